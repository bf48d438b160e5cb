"""The rank tests a Python frame's line lies under, from its source: ``if
trainer.is_global_zero:`` (hangscope/frameworks ``rank_tests``). A collective in such a block
is called by the ranks that pass the test only (the tie-breaker of analyze/rules/tiebreak.py
reads ``Frame.guards``). Parsed once per file version, as collect/source.py parses.
"""

from __future__ import annotations

import ast
import os
import re

from hangscope.collect.source import _parse, _per_version
from hangscope.frameworks import RANK_TESTS

_guard_cache: dict[tuple[str, int, int], tuple[tuple[int, int, str, int], ...]] = {}


def _guards_of(source: bytes) -> tuple[tuple[int, int, str, int], ...]:
    """(first, last line, test text, the if's line) of each ``if`` whose test names a rank
    (hangscope/frameworks ``rank_tests``): its body and else run on some ranks only."""
    if not RANK_TESTS or not any(w.encode() in source for w in RANK_TESTS):
        return ()
    words = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in RANK_TESTS) + r")\b")
    out = []
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.If) and node.body:
            test = ast.unparse(node.test)
            if words.search(test):
                last = node.end_lineno or node.body[-1].end_lineno or node.lineno
                out.append((node.body[0].lineno, last, test, node.lineno))
    return tuple(out)


def rank_guards(path: str | None, line: int | None) -> tuple[str, ...]:
    """The rank tests of the ``if`` blocks holding ``path:line``, outermost first:
    ``("trainer.is_global_zero (train.py:23)",)``."""
    if not path or not line:
        return ()
    found = _per_version(path, _guard_cache, _guards_of, ())
    name = os.path.basename(path)
    return tuple(f"{test} ({name}:{at})" for first, last, test, at in sorted(found)
                 if first <= line <= last)
