"""Which key a rank waits for in a c10d store get/wait, from its stack, its locals and its line.

Pure. ``TCPStore.get(key)`` is a C++ method: no Python frame holds its argument. The Python
frame that calls it does: its line (``store.get(f"policy/v{version}")``, read by the sampler,
collect/source.py ``line_text``) says the expression, and that frame's locals (py-spy
``--locals``) give the names it uses. Only what those two say for sure is a key: a string
literal, a local string, an f-string over local strings and numbers; anything else (a call, an
attribute) is no key (None), never a guess.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence

from hangscope.analyze.evidence.pylocals import as_int, as_str, frame_locals, thread_frames
from hangscope.model import Process, Thread

#: ``c10d::TCPStore::get``, ``c10d::PrefixStore::wait``: a store call that blocks for a key.
_NATIVE = re.compile(r"\b\w*Store::(get|wait|multiGet)\b")
_OPS = {"get": "get", "wait": "wait", "multiGet": "multi_get"}

LineText = Callable[[str | None, int | None], str | None]


def store_op(thread: Thread | None) -> str | None:
    """``get`` / ``wait`` / ``multi_get``: the store call the thread is blocked in (its
    innermost one), from its native frames; None: not in one."""
    if thread is None:
        return None
    for frame in thread.frames[:16]:
        if not frame.native:
            return None  # past the C++ call: a Python frame above no store frame
        match = _NATIVE.search(frame.name)
        if match:
            return _OPS[match.group(1)]
    return None


def waits_in_store(proc: Process) -> bool:
    """Its working thread is blocked in a store get/wait (its key is worth a --locals read)."""
    return store_op(proc.working_thread) is not None


def _text(node: ast.expr, names: Mapping[str, object]) -> str | None:
    """The value of a key expression from the frame's locals, where they say it for sure."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return as_str(names.get(node.id))
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
                continue
            if not isinstance(value, ast.FormattedValue) or value.format_spec is not None or (
                    value.conversion not in (-1, ord("s"))) or not isinstance(value.value,
                                                                            ast.Name):
                return None
            raw = names.get(value.value.id)
            text = as_str(raw)
            number = as_int(raw) if text is None else None
            if text is None and number is None:
                return None
            parts.append(text if text is not None else str(number))
        return "".join(parts)
    return None


def _keys(call: ast.Call, op: str, names: Mapping[str, object]) -> tuple[str, ...]:
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg in ("key", "keys")), None)
    if arg is None:
        return ()
    items = arg.elts if op != "get" and isinstance(arg, (ast.List, ast.Tuple)) else [arg]
    found = tuple(t for item in items if (t := _text(item, names)) is not None)
    return found if len(found) == len(items) else ()


def store_keys(threads: Sequence[object], tid: int | None, line_text: LineText,
               op: str = "get") -> tuple[str, ...]:
    """The keys thread ``tid`` waits for in its store call ``op``, from its innermost Python
    frame's line and locals in ``py-spy dump --locals --json`` (): not known for sure."""
    frames = thread_frames(threads, tid)
    if not frames:
        return ()
    frame = frames[0]
    path, line = frame.get("filename"), frame.get("line")
    text = line_text(path if isinstance(path, str) else None,
                     line if isinstance(line, int) else None)
    if not text:
        return ()
    try:
        tree = ast.parse(text.strip())
    except (SyntaxError, ValueError, RecursionError):
        return ()  # a statement over several lines: no key rather than half of one
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == op]
    if len(calls) != 1:
        return ()  # none, or two on one line: which one blocks is unknown
    return _keys(calls[0], op, frame_locals(frame))
