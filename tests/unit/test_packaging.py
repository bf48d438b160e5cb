"""A non-editable install must carry every package of hangscope (the README's quick start is one).

pyproject.toml lists the packages by name: a new subpackage left out of that list works in the
editable checkout and fails with ModuleNotFoundError after `pip install .`.
"""

from __future__ import annotations

import re

import support

ROOT = support.REPO_ROOT


def test_every_package_directory_is_listed_in_pyproject() -> None:
    # Read with a pattern, not tomllib: hangscope supports Python 3.10, which has none.
    text = (ROOT / "pyproject.toml").read_text()
    packages = re.search(r"^packages = \[(.*?)\]", text, re.M | re.S)
    assert packages is not None, "no packages list in pyproject.toml"
    listed = set(re.findall(r'"([\w.]+)"', packages.group(1)))
    renamed = dict(re.findall(r'^"([\w.]+)" = "([\w/]+)"$', text, re.M))
    on_disk = set()
    for init in (ROOT / "hangscope").rglob("__init__.py"):
        if "__pycache__" in init.parts:
            continue
        on_disk.add(".".join(init.parent.relative_to(ROOT).parts))
    for name, path in renamed.items():
        for init in (ROOT / path).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / path).parts
            on_disk.add(".".join((name, *rel)))
    assert on_disk <= listed, f"not in pyproject.toml's packages: {sorted(on_disk - listed)}"
