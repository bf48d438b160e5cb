"""A real job whose reader holds the other end of its own socketpair.

    python own_end_jobs.py MODE READY_FILE WORKDIR

Mode ``merge`` (python-ptrace#43's shape, a parent that keeps the child's end "for cleanup
later"): a checkpoint merger makes one ``socket.socketpair()`` per shard, forks a shard reader
per pair and keeps both ends. Reader 0 sends its shard and exits; readers 1-2 send theirs and
block, their socket buffers full, because the merger reads shard 0 until EOF first: EOF never
comes while the merger itself (and readers 1-2, which inherited it) holds shard 0's other end.
Each process appends ``"<pid> <tag>"`` to READY_FILE before it blocks.
"""

from __future__ import annotations

import os
import socket
import sys

import setproctitle

SHARD = 1 << 20


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def main(ready_file: str) -> None:
    setproctitle.setproctitle("ckpt_merge")
    pairs = []
    for i in range(3):
        parent_end, child_end = socket.socketpair()
        pairs.append((parent_end, child_end))
        if os.fork() == 0:
            setproctitle.setproctitle(f"ckpt_merge: shard-reader {i}")
            if i > 0:
                ready(ready_file, f"reader{i}")
            child_end.sendall(bytes(SHARD))  # blocks for i > 0: nobody reads yet
            child_end.close()
            os._exit(0)
    ready(ready_file, "merger")
    got = 0
    while chunk := pairs[0][0].recv(1 << 16):  # shard 0 until EOF
        got += len(chunk)


if __name__ == "__main__":
    main(sys.argv[2])
