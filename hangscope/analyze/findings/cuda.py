"""The GPU core dump a job was set up for: ``CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1`` and
``CUDA_COREDUMP_PIPE`` in a rank's environment (hangscope says how to use it, never does)."""

from __future__ import annotations

from hangscope.model import Finding, Severity, Snapshot
from hangscope.words import short_who


def _expand(template: str, pid: int, host: str | None) -> str:
    """The driver's ``%p`` (PID) and ``%h`` (host name) in a pipe or file name."""
    return template.replace("%p", str(pid)).replace("%h", host or "%h")


def check_coredump_pipe(snap: Snapshot) -> list[Finding]:
    """One finding for the ranks started with a user-triggered GPU core dump pipe."""
    # (the variable first: most ranks of a large job have none)
    armed = [p for p in snap.subjects
             if p.environ.get("CUDA_ENABLE_USER_TRIGGERED_COREDUMP") == "1"
             and p.environ.get("CUDA_COREDUMP_PIPE") and not p.is_exited]
    if not armed:
        return []
    pipes = {p.pid: _expand(p.environ["CUDA_COREDUMP_PIPE"], p.pid, p.host) for p in armed}
    first = armed[0]
    who = ", ".join(f"{short_who(p)} (PID {p.pid})" for p in armed[:4]) + (
        f" and {len(armed) - 4} more" if len(armed) > 4 else "")
    core = first.environ.get("CUDA_COREDUMP_FILE")
    return [Finding("gpu.coredump_pipe", Severity.INFO, (
        f"{who} {'was' if len(armed) == 1 else 'were'} started with "
        "CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1: writing to a rank's pipe makes the CUDA driver "
        f"write a GPU core dump of its running kernels (`echo 1 > {pipes[first.pid]}`), to "
        + (f"{_expand(core, first.pid, first.host)}" if core else
           "CUDA_COREDUMP_FILE (default core_<time>_<host>_<pid>.nvcudmp in its working "
           "directory)")
        + "; open it with `cuda-gdb -ex 'target cudacore FILE'`. It changes the job, so "
        "hangscope never does it."),
        {"pipes": {str(k): v for k, v in pipes.items()}})]
