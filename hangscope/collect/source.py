"""Whether a Python frame's current line lies inside ``with torch.cuda.graph(g):``: the
frame's own source file, parsed (``ast``) once per file version.

Inside a capture block no torch frame is on the stack (``__enter__`` has returned), so the
source is the evidence: a frame whose line is in the body of a ``with`` over
``torch.cuda.graph(...)`` runs under capture, and so does everything it calls.
"""

from __future__ import annotations

import ast
import os
import threading

#: Source files larger than this are not parsed (generated code; the cost is the parse).
MAX_SOURCE_BYTES = 4 * 1024 * 1024
_CAPTURE_SUFFIXES = ("cuda.graph", "cuda.graphs.graph")
_CAPTURE_MODULES = ("torch.cuda", "torch.cuda.graphs")

Block = tuple[int, int, str, int]  # the body's first and last line, the with-item, its line
_cache: dict[tuple[str, int, int], tuple[Block, ...]] = {}
_lock = threading.Lock()
_parse_lock = threading.Lock()


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def capture_blocks(tree: ast.AST) -> tuple[Block, ...]:
    """The bodies of ``with torch.cuda.graph(...)`` blocks (also ``cuda.graph`` through an
    import alias, and ``graph`` imported from torch.cuda)."""
    bare = {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in _CAPTURE_MODULES
            for alias in node.names if alias.name == "graph"}
    bare |= {f"{alias.asname}.graph" for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names if alias.name in _CAPTURE_MODULES and alias.asname}
    out: list[Block] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)) or not node.body:
            continue
        for item in node.items:
            call = item.context_expr
            name = _dotted(call.func) if isinstance(call, ast.Call) else None
            if name and (name.endswith(_CAPTURE_SUFFIXES) or name in bare):
                out.append((node.body[0].lineno, node.end_lineno or node.body[-1].lineno,
                            ast.unparse(call)[:80], node.lineno))
    return tuple(out)


def _blocks(path: str) -> tuple[Block, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    key = (path, st.st_mtime_ns, st.st_size)
    with _lock:
        if key in _cache:
            return _cache[key]
    blocks: tuple[Block, ...] = ()
    if st.st_size <= MAX_SOURCE_BYTES:
        try:
            with open(path, "rb") as fh:
                source = fh.read()
            if b"graph" in source:  # most files have no capture block: skip their parse
                # One parse at a time: CPython 3.11 keeps the AST constructor's recursion depth
                # in interpreter-wide state, and two threads parsing at once raise
                # "SystemError: AST constructor recursion depth mismatch".
                with _parse_lock:
                    tree = ast.parse(source)
                blocks = capture_blocks(tree)
        except (OSError, SyntaxError, ValueError, RecursionError, SystemError):
            blocks = ()
    with _lock:
        _cache[key] = blocks
    return blocks


def capture_block(path: str | None, line: int | None) -> str | None:
    """``torch.cuda.graph(g) (train.py:152)`` when ``path:line`` is inside a capture block."""
    if not path or not line:
        return None
    for first, last, text, at in _blocks(path):
        if first <= line <= last:
            return f"{text} ({os.path.basename(path)}:{at})"
    return None
