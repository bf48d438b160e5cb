"""Every blocking category is complete: one row in model/categories.py gives it a verb (one
and many), a specificity, whether its thread waits or works, a style and its meaning, and the
JSON schema names it. A new ``Category`` without its row fails here, not in a report.
"""

from __future__ import annotations

import re

from support import REPO_ROOT

from hangscope.model import Category
from hangscope.model.categories import CATEGORIES, NEITHER, WAITING, WAITS, WORKS
from hangscope.words import verb

SCHEMA_DOC = REPO_ROOT / "docs" / "json-schema.md"


def test_every_category_has_a_complete_row() -> None:
    assert set(CATEGORIES) == set(Category), "add a row to hangscope/model/categories.py"
    for category, row in CATEGORIES.items():
        one, many = row.verb
        assert one and many and one != many, category
        assert row.activity in (WAITS, WORKS, NEITHER), category
        assert isinstance(row.specificity, int) and 0 <= row.specificity <= 10, category
        assert isinstance(row.style, str), category
        assert row.doc.strip(), f"{category}: say what it means"
        assert verb(category) == one.format(op="a collective")


def test_every_category_is_in_the_json_schema() -> None:
    line = next(ln for ln in SCHEMA_DOC.read_text().splitlines() if '"category": "' in ln)
    documented = set(re.search(r'"category": "([^"]+)"', line).group(1).split("|"))
    assert documented == {c.value for c in Category}


def test_waiting_and_busy_are_what_the_table_says() -> None:
    assert Category.COLLECTIVE in WAITING and Category.IDLE in WAITING
    assert Category.RUNNING not in WAITING and Category.JIT_COMPILE not in WAITING
    assert Category.DEAD not in WAITING
