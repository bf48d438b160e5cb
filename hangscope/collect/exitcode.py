"""How a zombie exited: field 52 (``exit_code``) of ``/proc/PID/stat``.

A child that exited but that its parent has not reaped (``<defunct>``) still carries its wait
status; reading it needs the same privilege as ptrace. Unknown is ``None``.
"""

from __future__ import annotations

from pathlib import Path


def decode_wait_status(status: int) -> int:
    """A wait status as ``subprocess`` reports it: the exit code, or minus the killing signal."""
    signal = status & 0x7F
    if signal == 0:
        return (status >> 8) & 0xFF
    return -signal


def read_exit_code(pid: int) -> int | None:
    """The exit code of zombie ``pid`` (negative: killed by that signal); None if unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state); exit_code is field 52. Older kernels (< 3.5) lack it.
    if len(fields) < 50 or fields[0] not in ("Z", "X"):
        return None
    try:
        return decode_wait_status(int(fields[49]))
    except ValueError:
        return None
