"""Real jobs that spin on shared memory: one hung, one healthy.

    python spin_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE once it is where it stays (the handshake
of tests/support.py ``running_target``). Modes, each the mechanism of a real report (the tests
cite it):

- ``ring_short`` a broadcast ring in ``multiprocessing.shared_memory`` (vLLM's shm_broadcast
                 shape, vllm#5801): the publisher sizes it for 3 readers but starts 2; after
                 they read slot 0 it spin-waits (``os.sched_yield``) for a third read flag; the
                 readers poll for a new message; the server waits on a pipe for the
                 publisher's "published" reply.
- ``ring_busy``  the same ring sized right: a publisher computes a message, waits (spinning)
                 until both readers took the last one, publishes; the readers spin for each
                 message and handle it. Healthy: everyone's line leaves its loop.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import sys
import time
from multiprocessing import shared_memory

import setproctitle

READERS_STARTED = 2


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class Ring:
    """One slot: byte 0 = the sequence number of the message in it (0: none yet), byte 1 + r =
    the last one reader r took."""

    def __init__(self, name: str, readers: int) -> None:
        self.shm = shared_memory.SharedMemory(name=name)
        self.readers = readers

    def publish(self, ready_file: str | None = None) -> None:
        buf = self.shm.buf
        told = False
        while buf[0] and any(buf[1 + r] != buf[0] for r in range(self.readers)):
            if ready_file and not told:
                ready(ready_file, "publisher")
                told = True
            os.sched_yield()  # wait for every reader to take the last message
        buf[0] = buf[0] % 255 + 1

    def take(self, reader: int, seen: int) -> int:
        buf = self.shm.buf
        while buf[0] == seen:
            os.sched_yield()
        buf[1 + reader] = buf[0]
        return buf[0]


def reader(name: str, index: int, readers: int, ready_file: str, busy: bool) -> None:
    setproctitle.setproctitle(f"ring::reader-{index}")
    ring = Ring(name, readers)
    seen = 0
    if busy:
        ready(ready_file, f"reader{index}")
        while True:
            seen = ring.take(index, seen)
            hashlib.sha256(bytes(1 << 18)).digest()  # handle it
    seen = ring.take(index, seen)
    ready(ready_file, f"reader{index}")
    buf = ring.shm.buf
    while buf[0] == seen:  # the next message, polled: it never comes
        time.sleep(0.01)


def publisher(name: str, readers: int, conn: object, ready_file: str, busy: bool) -> None:
    setproctitle.setproctitle("ring::publisher")
    ring = Ring(name, readers)
    sent = 0
    while True:
        payload = b"".join(hashlib.sha256(bytes([sent % 256, i])).digest() for i in range(200))
        ring.publish(None if busy else ready_file)
        if busy and sent == 0:
            ready(ready_file, "publisher")
        conn.send(len(payload))  # type: ignore[attr-defined]
        sent += 1


def main(mode: str, ready_file: str) -> None:
    busy = mode == "ring_busy"
    setproctitle.setproctitle("ring::server")
    shm = shared_memory.SharedMemory(create=True, size=16)
    shm.buf[:16] = bytes(16)
    readers = READERS_STARTED if busy else READERS_STARTED + 1  # the bug: one reader too many
    ctx = mp.get_context("fork")
    for i in range(READERS_STARTED):
        ctx.Process(target=reader, args=(shm.name, i, readers, ready_file, busy)).start()
    mine, theirs = ctx.Pipe()  # after the readers: only the publisher holds its other end
    ctx.Process(target=publisher, args=(shm.name, readers, theirs, ready_file, busy)).start()
    ready(ready_file, "server")
    try:
        while True:
            mine.recv()  # the publisher says each message went out
    finally:
        shm.unlink()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
