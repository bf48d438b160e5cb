"""Where a frame's line stands among its program's loops, from its source: the (first, last)
lines of each ``for``/``while`` loop that holds it (``Frame.loops``). Two peers running the
same code and waiting at different lines: the one before a loop the other is inside has not
got as far (analyze/patterns/siblings.py).

And what the innermost of them is (``Frame.loop_kind``): ``walk``, a ``for`` over a range, a
list, a file, which takes the next item each pass and ends with them; ``while``, which re-checks
a condition (so is a ``for`` over an endless ``itertools.count()`` or ``iter(poll, None)``);
``spin``, a ``while`` whose body does nothing (``pass``, ``continue``, ``os.sched_yield()``,
``time.sleep(0)``): only another thread or process can end it. A thread that burns a core on a
line of a walk computes; one going round a spin waits (analyze/evidence/progress.py)."""

from __future__ import annotations

import ast

from hangscope.collect.source import MAX_SOURCE_BYTES, _parse, _per_version
from hangscope.diskcache import SourceCache
from hangscope.model import NO_LOOP, SPIN, WALK, WHILE, in_library

_walks_cache = SourceCache("loop-walks")  # path, mtime, size -> ((first, last, kind), ...)
#: Iterators that never end: a ``for`` over one is a ``while True``.
_ENDLESS = frozenset({"count", "cycle", "repeat"})
#: Calls that do nothing but give the core away: a loop of them only waits.
_YIELDS = frozenset({"sched_yield", "sleep", "yield_"})


def _endless(node: ast.For | ast.AsyncFor) -> bool:
    call = node.iter
    if not isinstance(call, ast.Call):
        return False
    name = _called(call)
    return name in _ENDLESS or (name == "iter" and len(call.args) == 2)  # iter(poll, None)


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _idle(statement: ast.stmt) -> bool:
    """A statement that changes nothing: ``pass``, ``continue``, ``...``, a yield of the core
    (``time.sleep(0)``: a sleep of zero or a tiny constant, ``os.sched_yield()``)."""
    if isinstance(statement, (ast.Pass, ast.Continue)):
        return True
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Call) and _called(value) in _YIELDS:
        return all(isinstance(a, ast.Constant) and isinstance(a.value, (int, float))
                   and a.value < 0.001 for a in value.args)
    return False


def _kind(node: ast.AST) -> str:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return WHILE if _endless(node) else WALK
    return SPIN if all(_idle(s) for s in node.body) else WHILE  # type: ignore[attr-defined]


def loop_walks(tree: ast.AST) -> tuple[tuple[int, int, str], ...]:
    """(first, last, kind) of every loop, in source order (kinds: :data:`WALK`, :data:`WHILE`,
    :data:`SPIN`)."""
    return tuple(sorted(
        (node.lineno, node.end_lineno or node.lineno, _kind(node))
        for node in ast.walk(tree) if isinstance(node, (ast.For, ast.AsyncFor, ast.While))))


#: The loops holding a line, outermost first, and the innermost one's kind.
Loops = tuple[tuple[tuple[int, int], ...], str | None]


def _holding(walks: tuple[tuple[int, int, str], ...] | None, line: int) -> Loops:
    """The (first, last) lines of the loops holding ``line``, outermost first (walks are in
    source order), and the kind of the innermost: ``NO_LOOP`` where none holds it, None where
    the source could not be read (``walks`` None: not "no loop", unknown)."""
    if walks is None:
        return (), None
    holding = [w for w in walks if w[0] <= line <= w[1]]
    return tuple(w[:2] for w in holding), holding[-1][2] if holding else NO_LOOP


def loop_facts(path: str | None, line: int | None) -> Loops:
    """The loops of the program's own code whose lines hold ``path:line``, outermost first
    (where a peer running the same code stands against it: one waiting before a loop the
    other is inside has not yet done what the other did), and what the innermost is
    (``Frame.loops``, ``Frame.loop_kind``), from one read of the file. Libraries are not
    read."""
    if not path or not line or in_library(path):
        return (), None
    return _holding(_walks(path), line)


def code_loop_facts(code: str, line: int | None) -> Loops:
    """:func:`loop_facts` for a program given as text (``python -c CODE``: py-spy names its
    frames' file ``<string>``)."""
    if not line or len(code) > MAX_SOURCE_BYTES:
        return (), None
    try:
        return _holding(loop_walks(_parse(code.encode())), line)
    except (SyntaxError, ValueError, RecursionError, SystemError):
        return (), None


def _walks(path: str) -> tuple[tuple[int, int, str], ...] | None:
    """The file's loops, one parse per version of it; None where it cannot be read or
    parsed."""
    return _per_version(path, _walks_cache, lambda source: loop_walks(
        _parse(source)) if b"for " in source or b"while" in source else (), None)
