"""Read py-spy ``--locals`` JSON (``py-spy dump --locals --json --pid PID``): pure helpers.

py-spy gives each frame's locals as ``{"name", "repr", "arg", "addr"}``; a string's repr is
JSON-quoted (``"\\"/tmp/x/.lock\\""``), a number's is its digits, an object's ``<Type at 0x..>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence


def thread_frames(threads: Sequence[object], tid: int | None) -> list[Mapping[str, object]]:
    """The frames (innermost first) of OS thread ``tid`` in a ``--locals`` dump; [] if absent."""
    for thread in threads:
        if isinstance(thread, Mapping) and tid in (thread.get("os_thread_id"),
                                                   thread.get("thread_id")):
            frames = thread.get("frames")
            if isinstance(frames, list):
                return [f for f in frames if isinstance(f, Mapping)]
    return []


def frame_locals(frame: Mapping[str, object]) -> dict[str, object]:
    """A frame's locals: name -> repr text."""
    values = frame.get("locals")
    if not isinstance(values, list):
        return {}
    return {str(v.get("name")): v.get("repr") for v in values if isinstance(v, Mapping)}


def as_int(text: object) -> int | None:
    """A local's repr as an int; None for ``None``, objects and anything else."""
    try:
        return int(str(text))
    except ValueError:
        return None


def as_str(text: object) -> str | None:
    """A local's repr as a str when it is a (JSON-quoted) string, else None."""
    if not isinstance(text, str) or not text.startswith('"'):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None
