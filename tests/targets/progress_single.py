"""One process for the progress watcher's edge cases.

``python tests/targets/progress_single.py MODE READY_FILE``; appends ``"<pid> MODE"`` to
READY_FILE right before entering its steady state.

Modes:
  regex  busy in one C call: a catastrophically backtracking regular expression (one Python
         line, 100% CPU, no GPU): the watcher cannot tell a spin from work.
  exit   exits 0.5 s after ready (mid-window).
"""

from __future__ import annotations

import os
import re
import sys
import time


def backtrack() -> None:
    """Runs for hours inside one call to the C regex engine."""
    re.match(r"(a+)+$", "a" * 64 + "b")


def main() -> int:
    mode, ready = sys.argv[1], sys.argv[2]
    with open(ready, "a") as fh:
        fh.write(f"{os.getpid()} {mode}\n")
    if mode == "regex":
        backtrack()
    elif mode == "exit":
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
