"""Real jobs on a pseudo-terminal whose grandchild prompts on it.

    python terminal_stop_jobs.py MODE READY_FILE WORKDIR

The ``setup-runner`` runs an ``installer`` on a new pty (``pty.fork()``: the installer leads
a session whose controlling terminal is that pty) and reads what it prints. The installer
starts a ``migrator`` that asks ``Proceed? [y/N]`` with ``input()`` and waits for it
(``Popen.wait``). Each process appends ``"<pid> <tag>"`` to READY_FILE when it is where it
stays (the migrator right before its prompt). Modes:

- ``background`` the migrator is started in its own process group (``process_group=0``): its
                 read of the terminal from a background group stops it with SIGTTIN (state
                 T), and nobody sees the prompt (hung).
- ``foreground`` the migrator stays in the installer's (foreground) group: it sits at its
                 prompt, reading the terminal, and nobody answers (hung too, but not stopped).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import setproctitle

PROMPT = """
import os, setproctitle, sys
setproctitle.setproctitle("migrator")
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()} migrator\\n")
input("Proceed? [y/N] ")
"""


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    pid, master = pty.fork()
    if pid == 0:
        setproctitle.setproctitle("installer")
        extra = {"process_group": 0} if mode == "background" else {}
        child = subprocess.Popen([sys.executable, "-c", PROMPT, ready_file], **extra)
        ready(ready_file, "installer")
        child.wait()
        os._exit(0)
    setproctitle.setproctitle("setup-runner")
    ready(ready_file, "runner")
    while True:
        try:
            if not os.read(master, 4096):
                break
        except OSError:
            break


if __name__ == "__main__":
    main()
