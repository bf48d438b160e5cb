"""A process held in uninterruptible sleep (state D): the parent of a ``vfork`` whose child never
execs.

After ``vfork()`` the kernel keeps the parent in ``TASK_KILLABLE`` (shown as ``D``) until the
child calls ``exec`` or exits; this child calls ``pause()`` instead. SIGKILL still ends the
parent (killable), and the child is an ordinary sleeping process. Only the child runs after the
fork (it shares the parent's memory), so it does nothing but pause.

Readiness: the parent appends ``"<pid> vfork"`` to ``--ready-file`` right before ``vfork``; the
test then waits for state ``D`` in ``/proc/PID/stat``.
"""

from __future__ import annotations

import ctypes
import os
import sys


def main() -> None:
    ready = sys.argv[sys.argv.index("--ready-file") + 1]
    libc = ctypes.CDLL(None, use_errno=True)
    with open(ready, "a") as fh:
        fh.write(f"{os.getpid()} vfork\n")
    if libc.vfork() == 0:
        libc.pause()  # the child: never exec, so the parent stays in vfork
        libc._exit(0)


if __name__ == "__main__":
    main()
