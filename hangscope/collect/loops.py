"""Where a frame's line stands among its program's loops, from its source: the (first, last)
lines of each ``for``/``while`` loop that holds it (``Frame.loops``). Two peers running the
same code and waiting at different lines: the one before a loop the other is inside has not
got as far (analyze/patterns/siblings.py).

And whether the innermost of them walks items (``Frame.iterates``): a ``for`` over a range, a
list, a file takes the next item each pass and ends with them; a spin re-checks a ``while``
condition (or walks an endless ``itertools.count()``, ``iter(poll, None)``). A thread that burns
a core on one line of such a ``for`` computes (analyze/evidence/progress.py)."""

from __future__ import annotations

import ast

from hangscope.collect.source import MAX_SOURCE_BYTES, _parse, _per_version
from hangscope.model import in_library

_walks_cache: dict[tuple[str, int, int], tuple[tuple[int, int, bool], ...]] = {}
#: Iterators that never end: a ``for`` over one is a ``while True``.
_ENDLESS = frozenset({"count", "cycle", "repeat"})


def _endless(node: ast.For | ast.AsyncFor) -> bool:
    call = node.iter
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in _ENDLESS or (name == "iter" and len(call.args) == 2)  # iter(poll, None)


def loop_walks(tree: ast.AST) -> tuple[tuple[int, int, bool], ...]:
    """(first, last, walks items) of every loop: a ``for`` over an iterator that ends."""
    return tuple(sorted(
        (node.lineno, node.end_lineno or node.lineno,
         isinstance(node, (ast.For, ast.AsyncFor)) and not _endless(node))
        for node in ast.walk(tree) if isinstance(node, (ast.For, ast.AsyncFor, ast.While))))


def _innermost_walks(walks: tuple[tuple[int, int, bool], ...], line: int) -> bool:
    holding = [w for w in walks if w[0] <= line <= w[1]]
    return bool(holding) and max(holding, key=lambda w: (w[0], -w[1]))[2]


def _enclosing(spans: tuple[tuple[int, int], ...], line: int) -> tuple[tuple[int, int], ...]:
    return tuple(span for span in spans if span[0] <= line <= span[1])


def loops_at(path: str | None, line: int | None) -> tuple[tuple[int, int], ...]:
    """The loops of the program's own code whose lines hold ``path:line``, outermost first:
    where a peer running the same code stands against it (one waiting before a loop the
    other is inside has not yet done what the other did). Libraries are not read."""
    if not path or not line or in_library(path):
        return ()
    return _enclosing(tuple(w[:2] for w in _walks(path)), line)


def code_loops_at(code: str, line: int | None) -> tuple[tuple[int, int], ...]:
    """:func:`loops_at` for a program given as text (``python -c CODE``: py-spy names its
    frames' file ``<string>``)."""
    if not line or len(code) > MAX_SOURCE_BYTES:
        return ()
    try:
        spans = tuple(w[:2] for w in loop_walks(_parse(code.encode())))
    except (SyntaxError, ValueError, RecursionError, SystemError):
        return ()
    return _enclosing(spans, line)


def _walks(path: str) -> tuple[tuple[int, int, bool], ...]:
    """The file's loops, one parse per version of it."""
    return _per_version(path, _walks_cache, lambda source: loop_walks(
        _parse(source)) if b"for " in source or b"while" in source else (), ())


def iterates_at(path: str | None, line: int | None) -> bool:
    """The innermost loop of the program's own code holding ``path:line`` walks items (a
    ``for`` over an iterator that ends), not a ``while`` that re-checks a condition."""
    if not path or not line or in_library(path):
        return False
    return _innermost_walks(_walks(path), line)


def code_iterates_at(code: str, line: int | None) -> bool:
    """:func:`iterates_at` for a ``python -c CODE`` program."""
    if not line or len(code) > MAX_SOURCE_BYTES:
        return False
    try:
        return _innermost_walks(loop_walks(_parse(code.encode())), line)
    except (SyntaxError, ValueError, RecursionError, SystemError):
        return False
