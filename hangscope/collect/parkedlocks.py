"""Where a lock can stay held by code that is not running, from the program's own source.

A ``threading.Lock`` taken in a generator's ``with`` block and held across a ``yield`` (or a
coroutine's, across an ``await``) stays held while the generator is suspended: a stream whose
client went away and that nobody closes holds it for ever, and no thread's stack shows it. An
``acquire()`` whose ``release()`` an early ``return``, ``break`` or ``raise`` skips leaks it
the same way. When every thread waiting for a lock waits and none holds it, these places in the
waiter's own file are where its holder went (collect/pyspy.py asks for a lock waiter's frame).
"""

from __future__ import annotations

import ast
import os

from hangscope.collect.source import _lock_item, _parse, _per_version
from hangscope.diskcache import SourceCache
from hangscope.model import in_library

#: (lock text, where, what keeps it held): ``("MODEL_LOCK", "generate_stream (app.py:38)",
#: "yields inside with MODEL_LOCK:")``
Parked = tuple[str, str, str]
_cache = SourceCache("parked-locks")  # path, mtime, size -> tuple[Parked, ...]
_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


def _own_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of a block, not those of functions or classes defined inside it."""
    out, todo = [], list(ast.iter_child_nodes(node))
    while todo:
        child = todo.pop()
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        out.append(child)
        todo.extend(ast.iter_child_nodes(child))
    return out


def _released(stmt: ast.stmt, text: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr.startswith("release") and _lock_item(n.func.value) == text
               for n in ast.walk(stmt))


def _acquire_of(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(
            stmt.value.func, ast.Attribute) and stmt.value.func.attr.startswith("acquire"):
        return _lock_item(stmt.value.func.value)
    return None


def _function_parked(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                     file: str) -> list[Parked]:
    out: list[Parked] = []
    where = f"{name} ({file}:{func.lineno})"
    for node in (func, *_own_nodes(func)):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            pauses = [n for stmt in node.body for n in (stmt, *_own_nodes(stmt))
                      if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await))]
            for item in node.items:
                text = _lock_item(item.context_expr)
                if text is not None and pauses:
                    verb = "awaits" if isinstance(pauses[0], ast.Await) else "yields"
                    out.append((text, where, f"{verb} at line {pauses[0].lineno} inside "
                                             f"`with {text}:`"))
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for k, stmt in enumerate(body):
            text = _acquire_of(stmt)
            if text is None:
                continue
            after = body[k + 1:]
            if after and isinstance(after[0], ast.Try) and any(
                    _released(s, text) for s in after[0].finalbody):
                continue  # try/finally: released on every path
            later = next((j for j, s in enumerate(after) if _released(s, text)), None)
            if later is None:
                out.append((text, where, f"`{text}.acquire()` at line {stmt.lineno} has no "
                                         "release() after it in its block"))
                continue
            exits = [n for s in after[:later] for n in (s, *_own_nodes(s))
                     if isinstance(n, _EXITS)]
            if exits:
                word = type(exits[0]).__name__.lower()
                out.append((text, where, f"`{word}` at line {exits[0].lineno} leaves "
                                         f"`{text}` held (taken at line {stmt.lineno})"))
    return out


def parked_holders(tree: ast.AST, file: str) -> tuple[Parked, ...]:
    """Every place of the module that can leave a lock held by code that is not running."""
    out: list[Parked] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.extend(_function_parked(child, f"{prefix}{child.name}", file))
                visit(child, f"{prefix}{child.name}.<locals>.")

    visit(tree, "")
    return tuple(out)


def parked_for(path: str | None, lock: str | None) -> tuple[str, ...]:
    """Where, in ``path`` (the program's own file of a frame that waits to take ``lock``),
    ``lock`` can stay held by code that is not running: ``"generate_stream (app.py:38) yields
    at line 40 inside `with MODEL_LOCK:`"``. Libraries are not read."""
    if not path or not lock or in_library(path):
        return ()
    file = os.path.basename(path)
    found = _per_version(path, _cache, lambda source: parked_holders(_parse(source), file)
                         if b"yield" in source or b"await" in source or b".acquire" in source
                         else (), ())
    return tuple(f"{where} {what}" for text, where, what in found if text == lock)
