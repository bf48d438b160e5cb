"""One error hierarchy; each error carries the exact fix and its exit code.

``cli.main`` is the one place that turns these into a message and an exit code.
Exit codes (documented in README.md):
  0  a diagnosis was produced (whatever it says)
  1  internal error (a bug in hangscope: please report it)
  2  bad usage or bad input (argument, PID, file)
  3  the target process does not exist
  4  permission denied: hangscope may not read or trace the target
  5  a required tool is missing (py-spy)
  6  the saved dump cannot be read (not JSON, wrong schema, truncated)
 130 interrupted (Ctrl-C)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # errors.py is imported before anything else: no runtime import of the model
    from hangscope.model import Snapshot

#: How hangscope tells a user to find a job's PID: one hint, the same in every message.
FIND_PID_HINT = "`pgrep -af python` lists the Python processes and their PIDs"

PTRACE_HELP = (
    "Run hangscope as root (sudo hangscope ...), or give it CAP_SYS_PTRACE "
    "(sudo setcap cap_sys_ptrace+ep $(which py-spy)); where kernel.yama.ptrace_scope > 0, "
    "`sudo sysctl kernel.yama.ptrace_scope=0` lets a user trace their own processes; "
    "in Docker start the container with --cap-add SYS_PTRACE (Kubernetes: "
    "securityContext.capabilities.add: [SYS_PTRACE])."
)


class HangscopeError(Exception):
    """Base class: a message for the user plus the fix."""

    exit_code = 1
    help_text = ""

    def __init__(self, message: str, help_text: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if help_text is not None:
            self.help_text = help_text

    def __str__(self) -> str:
        return self.message


class UsageError(HangscopeError):
    exit_code = 2


class ProcessNotFound(HangscopeError):
    exit_code = 3
    help_text = f"The job may have exited; {FIND_PID_HINT}."


class PermissionDenied(HangscopeError):
    """Not allowed to trace the job; ``snapshot``: the partial report, when one was taken."""

    exit_code = 4
    help_text = PTRACE_HELP

    def __init__(self, message: str, help_text: str | None = None,
                 snapshot: Snapshot | None = None) -> None:
        super().__init__(message, help_text)
        self.snapshot = snapshot


class ToolMissing(HangscopeError):
    """py-spy is missing; ``snapshot``: the /proc-only report, when one was taken."""

    exit_code = 5
    help_text = "Install it with `pip install py-spy` (the wheel ships the binary)."

    def __init__(self, message: str, help_text: str | None = None,
                 snapshot: Snapshot | None = None) -> None:
        super().__init__(message, help_text)
        self.snapshot = snapshot


class DumpFileError(HangscopeError):
    exit_code = 6
    help_text = "Pass a file written by `hangscope dump --format json -o FILE`."
