"""How a zombie exited: field 52 (``exit_code``) of ``/proc/PID/stat``.

A child that exited but that its parent has not reaped (``<defunct>``) still carries its wait
status; reading it needs the same privilege as ptrace. Unknown is ``None``.
"""

from __future__ import annotations

from hangscope.collect import procfs


def decode_wait_status(status: int) -> int:
    """A wait status as ``subprocess`` reports it: the exit code, or minus the killing signal."""
    signal = status & 0x7F
    if signal == 0:
        return (status >> 8) & 0xFF
    return -signal


def read_exit_code(pid: int) -> int | None:
    """The exit code of zombie ``pid`` (negative: killed by that signal); None if unreadable."""
    found = procfs.read_stat(pid)
    # exit_status is field 52, which kernels before 3.5 lack; only an exited task has one.
    if found is None or found.exit_status is None or found.state not in ("Z", "X"):
        return None
    return decode_wait_status(found.exit_status)
