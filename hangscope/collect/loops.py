"""Where a frame's line stands among its program's loops, from its source: the (first, last)
lines of each ``for``/``while`` loop that holds it (``Frame.loops``). Two peers running the
same code and waiting at different lines: the one before a loop the other is inside has not
got as far (analyze/patterns/siblings.py)."""

from __future__ import annotations

import ast

from hangscope.collect.source import MAX_SOURCE_BYTES, _parse, _per_version
from hangscope.model import in_library

_spans_cache: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {}


def loop_spans(tree: ast.AST) -> tuple[tuple[int, int], ...]:
    """The (first, last) lines of every ``for``/``while`` loop, in source order."""
    return tuple(sorted((node.lineno, node.end_lineno or node.lineno) for node in ast.walk(tree)
                        if isinstance(node, (ast.For, ast.AsyncFor, ast.While))))


def _enclosing(spans: tuple[tuple[int, int], ...], line: int) -> tuple[tuple[int, int], ...]:
    return tuple(span for span in spans if span[0] <= line <= span[1])


def loops_at(path: str | None, line: int | None) -> tuple[tuple[int, int], ...]:
    """The loops of the program's own code whose lines hold ``path:line``, outermost first:
    where a peer running the same code stands against it (one waiting before a loop the
    other is inside has not yet done what the other did). Libraries are not read."""
    if not path or not line or in_library(path):
        return ()
    return _enclosing(_per_version(path, _spans_cache, lambda source: loop_spans(
        _parse(source)) if b"for " in source or b"while" in source else (), ()), line)


def code_loops_at(code: str, line: int | None) -> tuple[tuple[int, int], ...]:
    """:func:`loops_at` for a program given as text (``python -c CODE``: py-spy names its
    frames' file ``<string>``)."""
    if not line or len(code) > MAX_SOURCE_BYTES:
        return ()
    try:
        spans = loop_spans(_parse(code.encode()))
    except (SyntaxError, ValueError, RecursionError, SystemError):
        return ()
    return _enclosing(spans, line)
