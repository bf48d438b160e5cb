"""What a Python frame's current line lies inside, from the frame's own source file, parsed
(``ast``) once per file version: ``with torch.cuda.graph(g):`` (a capture block), and the locks
it holds or enters (``with self.lock:``, ``lock.acquire()`` then ``try: ... finally:
lock.release()``).

Inside a capture block no torch frame is on the stack (``__enter__`` has returned), so the
source is the evidence: a frame whose line is in the body of a ``with`` over
``torch.cuda.graph(...)`` runs under capture, and so does everything it calls. Python does not
say who holds a ``threading.Lock`` either; the with-blocks that enclose each frame's line do.
"""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from hangscope import diskcache
from hangscope.diskcache import MISSING, SourceCache
from hangscope.model import in_library

#: Source files larger than this are not parsed (generated code; the cost is the parse).
MAX_SOURCE_BYTES = 4 * 1024 * 1024
_CAPTURE_SUFFIXES = ("cuda.graph", "cuda.graphs.graph")
_CAPTURE_MODULES = ("torch.cuda", "torch.cuda.graphs")

Block = tuple[int, int, str, int]  # the body's first and last line, the with-item, its line
#: A lock block: the held region's first and last line, the lock's source text, the line of
#: the statement that takes it.
LockBlock = tuple[int, int, str, int]
#: line -> the names of the functions called on it (``self.save(x)``: "save").
Calls = dict[int, frozenset[str]]
#: A with-block over a call (``with pool.connection() as conn:``): the body's first and last
#: line, the call's source text.
CallBlock = tuple[int, int, str]
_Parsed = tuple[tuple[Block, ...], tuple[LockBlock, ...], Calls, tuple[CallBlock, ...]]
_cache = SourceCache("parsed")  # path, mtime, size -> _Parsed
_lock = threading.Lock()
_parse_lock = threading.Lock()
_building: dict[tuple[int, tuple[str, int, int]], threading.Lock] = {}  # per version being built


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


def _lock_item(node: ast.expr) -> str | None:
    """A with-item that can be a lock: an object (``self.lock``, ``LOCK``, ``locks[i]``), not a
    call (``open(p)``, ``torch.no_grad()``), which builds a fresh context manager."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return ast.unparse(node)[:80]
    return None


def _named(attr: str, verb: str) -> bool:
    """``acquire``, or a lock's own flavour of it (``acquire_read``, ``acquire_write`` of a
    readers/writer lock)."""
    return attr == verb or attr.startswith(verb + "_")


def _acquired(stmt: ast.stmt) -> str | None:
    """``X`` of a statement ``X.acquire()`` or ``X.acquire_read()`` (its result unused: a
    blocking acquire)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(
            stmt.value.func, ast.Attribute) and _named(stmt.value.func.attr, "acquire"):
        return _lock_item(stmt.value.func.value)
    return None


def _releases(stmts: list[ast.stmt], text: str) -> bool:
    return any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
               and isinstance(s.value.func, ast.Attribute)
               and _named(s.value.func.attr, "release")
               and _lock_item(s.value.func.value) == text for s in stmts)


def lock_blocks(tree: ast.AST) -> tuple[LockBlock, ...]:
    """The regions where a lock is held: the body of ``with X:`` over an object ``X``, the
    ``try`` body after ``X.acquire()`` whose ``finally`` calls ``X.release()``, and the
    statements between ``X.acquire()`` and a later ``X.release()`` of the same block (held
    there unless an exception left it: then it leaks)."""
    out: list[LockBlock] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.body:
            last = node.end_lineno or node.body[-1].lineno
            for item in node.items:
                text = _lock_item(item.context_expr)
                if text is not None:
                    out.append((node.body[0].lineno, last, text, item.context_expr.lineno))
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for k, stmt in enumerate(body):
            text = _acquired(stmt)
            if text is None:
                continue
            after = body[k + 1] if k + 1 < len(body) else None
            later = next((j for j in range(k + 1, len(body))
                          if _releases([body[j]], text)), None)
            if isinstance(after, ast.Try) and after.body and _releases(after.finalbody, text):
                out.append((after.body[0].lineno, after.body[-1].end_lineno or after.lineno,
                            text, stmt.lineno))
            elif after is not None and later is not None and later > k + 1:
                out.append((after.lineno, body[later - 1].end_lineno or after.lineno, text,
                            stmt.lineno))
            else:  # taken here, released who knows where: the line takes it, holds nothing
                out.append((0, -1, text, stmt.lineno))
    return tuple(out)


def call_blocks(tree: ast.AST) -> tuple[CallBlock, ...]:
    """The bodies of ``with X.f(...):`` blocks: what a call handed the block (a pool's
    connection, a lease) is held until the block ends, as a lock is by ``with lock:``."""
    out: list[CallBlock] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.body:
            last = node.end_lineno or node.body[-1].lineno
            out.extend((node.body[0].lineno, last, ast.unparse(item.context_expr)[:80])
                       for item in node.items if isinstance(item.context_expr, ast.Call))
    return tuple(out)


def _last_name(call: ast.Call) -> str | None:
    func = call.func  # an ast.Name's id; no other callee but an attribute has a name
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def call_names(tree: ast.AST, keep: Callable[[ast.Call], bool] = lambda call: True,
               name_of: Callable[[ast.Call], str | None] = _last_name) -> Calls:
    """The functions each line calls (those ``keep`` keeps), by their last name (or by
    ``name_of``): a frame whose caller's line calls no function of its name was entered some
    other way (a signal handler, a callback). A call spread over lines counts at its first
    line and at its function's last."""
    out: dict[int, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and keep(node) and (name := name_of(node)) is not None:
            for line in {node.lineno, getattr(node.func, "end_lineno", None) or node.lineno}:
                out.setdefault(line, set()).add(name)
    return {line: frozenset(names) for line, names in out.items()}


T = TypeVar("T")


def _per_version(path: str, cache: dict[tuple[str, int, int], T], build: Callable[[bytes], T],
                 empty: T) -> T:
    """``build(source)`` of the file's current version, once (cached by path, mtime, size);
    ``empty`` for a file that cannot be read or parsed, or is too large to be source."""
    try:
        st = os.stat(path)
    except OSError:
        return empty
    key = (path, st.st_mtime_ns, st.st_size)
    with _lock:
        if key in cache:
            return cache[key]
        gate = _building.setdefault((id(cache), key), threading.Lock())
    # One build per version: the ranks of a job, read at once by the sampler's threads, ask
    # for the same files together, and 8 CUDA ranks parsed threading.py 8 times over (a
    # parse holds the GIL: every /proc read of the round waited behind them).
    with gate:
        with _lock:
            if key in cache:
                return cache[key]
        on_disk = isinstance(cache, SourceCache)
        value = diskcache.load(cache, key) if on_disk else MISSING
        if value is MISSING:
            value = empty
            if st.st_size <= MAX_SOURCE_BYTES:
                try:
                    with open(path, "rb") as fh:
                        value = build(fh.read())
                except (OSError, SyntaxError, ValueError, RecursionError, SystemError):
                    value = empty
                if on_disk:
                    diskcache.store(cache, key, value)
        with _lock:
            cache[key] = value
            _building.pop((id(cache), key), None)
    return value


def _parse(source: bytes) -> ast.AST:
    # One parse at a time: CPython 3.11 keeps the AST constructor's recursion depth in
    # interpreter-wide state, and two threads parsing at once raise "SystemError: AST
    # constructor recursion depth mismatch".
    with _parse_lock:
        return ast.parse(source)


def _build_parsed(source: bytes) -> _Parsed:
    # Most files have no capture block and take no lock: skip their parse.
    if b"graph" not in source and b"with " not in source and b".acquire" not in source:
        return (), (), {}, ()
    tree = _parse(source)
    locks = lock_blocks(tree)
    return (capture_blocks(tree) if b"graph" in source else (), locks,
            call_names(tree) if locks else {}, call_blocks(tree))


def _parsed(path: str) -> _Parsed:
    return _per_version(path, _cache, _build_parsed, ((), (), {}, ()))


_loop_cache = SourceCache("loop-lines")  # -> frozenset[int]


def loop_lines(tree: ast.AST) -> frozenset[int]:
    """The lines of each ``for`` header (its target and iterable), and of the first statement
    of each ``while True:`` body: a frame stopped there waits for the loop's next item
    (``for line in sock_file:``, ``while True: req = conn.recv()``, an engine's busy loop).
    A ``while`` with a real condition (``while len(buf) < n: buf += sock.recv(...)``) reads
    the rest of one message, not the next."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            out.update(range(node.lineno, (node.iter.end_lineno or node.iter.lineno) + 1))
        elif isinstance(node, ast.While) and isinstance(node.test, ast.Constant) \
                and node.test.value and node.body:
            first = node.body[0]
            out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return frozenset(out)


#: The asyncio objects whose methods only the loop's own thread may call, by how they are
#: made: ``q = asyncio.Queue()``, ``fut = loop.create_future()``,
#: ``loop = asyncio.new_event_loop()``.
_LOOP_MADE = ("Queue", "LifoQueue", "PriorityQueue", "Future", "Event", "Condition",
              "create_future", "get_event_loop", "new_event_loop", "get_running_loop")
#: Their methods that schedule the waiter's wake-up with the non-thread-safe ``call_soon``.
_LOOP_ONLY = ("put_nowait", "set_result", "set_exception", "set", "call_soon", "call_later",
              "create_task")
_HOPS = ("call_soon_threadsafe", "run_coroutine_threadsafe")
_unsafe_cache = SourceCache("loop-unsafe")  # -> tuple[tuple[int, int, str, int], ...]


def _loop_made(tree: ast.AST) -> set[str]:
    """The names (a variable's, an attribute's last part) the file binds to asyncio objects."""
    made: set[str] = set()
    for node in ast.walk(tree):
        value = getattr(node, "value", None)
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(value, ast.Call):
            continue
        name = _dotted(value.func) or ""
        head, _, last = name.rpartition(".")
        if last not in _LOOP_MADE or (head != "asyncio" and last not in (
                "create_future", "get_event_loop", "new_event_loop", "get_running_loop")):
            continue
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if isinstance(target, (ast.Name, ast.Attribute)):
                made.add(target.id if isinstance(target, ast.Name) else target.attr)
    return made


def unsafe_loop_calls(tree: ast.AST) -> tuple[tuple[int, int, str, int], ...]:
    """(first line, last line, call, its line) of each plain function (not a coroutine: that
    runs on the loop) that calls a loop-only method of an asyncio object the file makes
    (``q.put_nowait(item)`` on ``q = asyncio.Queue()``) and never hops through
    ``call_soon_threadsafe``: run on another thread, it wakes no sleeping loop."""
    made = _loop_made(tree)
    if not made:
        return ()
    out: list[tuple[int, int, str, int]] = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute)]
        if any(c.func.attr in _HOPS for c in calls):  # type: ignore[union-attr]
            continue
        for call in calls:
            attr = call.func.attr  # type: ignore[union-attr]
            owner = call.func.value  # type: ignore[union-attr]
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(
                owner, ast.Attribute) else None
            if attr in _LOOP_ONLY and name in made:
                out.append((func.lineno, func.end_lineno or func.lineno,
                            ast.unparse(call)[:80], call.lineno))
                break
    return tuple(out)


def loop_unsafe(path: str | None, line: int | None) -> str | None:
    """``q.put_nowait(item) (server.py:28)``: the loop-only call of the plain function whose
    body holds ``path:line`` (:func:`unsafe_loop_calls`), in the program's own code."""
    if not path or not line or in_library(path):
        return None
    found = _per_version(path, _unsafe_cache, lambda source: unsafe_loop_calls(
        _parse(source)) if b"asyncio" in source else (), ())
    inner = [f for f in found if f[0] <= line <= f[1]]
    if not inner:
        return None
    _, _, call, at = max(inner, key=lambda f: f[0])  # the innermost function
    return f"{call} ({os.path.basename(path)}:{at})"


def at_loop_header(path: str | None, line: int | None) -> bool:
    """``path:line`` is a loop's wait for its next item in the program's own code (a ``for``
    header, a ``while True:`` body's first statement; libraries are not read:
    their loops are theirs, and parsing them would cost every dump)."""
    if not path or not line or in_library(path):
        return False
    return line in _per_version(path, _loop_cache, lambda source: loop_lines(
        _parse(source)) if b"for " in source or b"while" in source else frozenset(),
        frozenset())


def _blocks(path: str) -> tuple[Block, ...]:
    return _parsed(path)[0]


def calls_at(path: str | None, line: int | None) -> tuple[str, ...]:
    """The names of the functions called at ``path:line`` (sorted), where the file takes a
    lock somewhere (the only frames whose callees are read: a lock waiter's stack)."""
    if not path or not line:
        return ()
    return tuple(sorted(_parsed(path)[2].get(line, ())))


def lock_scope(path: str | None, line: int | None) -> tuple[str | None, tuple[str, ...], bool]:
    """(the lock the statement at ``path:line`` takes, the locks held at that line, outermost
    first, whether the function gives back what the line takes): ``("self.b", ("self.a",),
    True)`` on the inner ``with self.b:`` of ``with self.a:``. A statement taking several locks
    at once names none (which one blocks is unknown)."""
    if not path or not line:
        return None, (), False
    blocks = _parsed(path)[1]
    taking = [(text, first > 0) for first, _, text, at in blocks if at == line]
    held = sorted(((first, text) for first, last, text, _ in blocks if first <= line <= last),
                  key=lambda b: b[0])
    takes, releases = taking[0] if len(taking) == 1 else (None, False)
    return takes, tuple(text for _, text in held), releases


def within(path: str | None, line: int | None) -> tuple[str, ...]:
    """The calls of the with-blocks whose body holds ``path:line``, outermost first:
    ``("pool.connection()",)`` inside ``with pool.connection() as conn:``."""
    if not path or not line:
        return ()
    blocks = _parsed(path)[3]
    return tuple(text for first, _, text in sorted(b for b in blocks if b[0] <= line <= b[1]))


def capture_block(path: str | None, line: int | None) -> str | None:
    """``torch.cuda.graph(g) (train.py:152)`` when ``path:line`` is inside a capture block."""
    if not path or not line:
        return None
    for first, last, text, at in _blocks(path):
        if first <= line <= last:
            return f"{text} ({os.path.basename(path)}:{at})"
    return None


def line_text(path: str | None, line: int | None) -> str | None:
    """The text of ``path:line`` (a store call whose key the locals fill in), or None: no
    such file or line, or a file too large to be source."""
    if not path or not line or line < 1:
        return None
    try:
        if os.stat(path).st_size > MAX_SOURCE_BYTES:
            return None
        with open(path, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                if number == line:
                    return raw.decode("utf-8", "replace").rstrip("\r\n")
    except OSError:
        return None
    return None

