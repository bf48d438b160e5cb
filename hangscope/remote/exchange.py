"""Every node's transport process from one thread: one selector over all their pipes.

A thread per node (and a timer thread per deadline) stopped scaling at 1,000 nodes: starting
2,000 threads while the first answers are parsed is a GIL convoy (each ``Thread.start``
waits for its thread to take the GIL), which doubled the coordinator's CPU and took 14 s
over the slowest node on two cores. Here the nodes cost one process and three pipes each,
and the conversation with each is a small state machine:

1. read stdout until its first line: ``HANGSCOPE:send`` asks for the bundle (written to
   stdin without blocking, then stdin closed), ``HANGSCOPE:installed`` asks for nothing;
   any other first line is part of the dump;
2. read stdout and stderr to their ends; reap the process;
3. past the node's deadline: kill the transport and answer with what it had.

Each node's answer is handed to ``done`` as soon as it is complete (the caller parses it
there, while slower nodes still sample), and its bytes are dropped after that.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO

from hangscope.errors import HangscopeError
from hangscope.remote.ship import HELLO_INSTALLED, HELLO_SEND

#: Bytes read or written per ready pipe per turn: a pipe's whole buffer on Linux.
CHUNK = 65536
#: How often a process whose pipes have closed is polled until it exits.
REAP_S = 0.02


@dataclass
class Exchange:
    """What one transport process said: exit status, output, and how the talk went."""

    rc: int
    stdout: str
    stderr: str
    shipped: bool
    timed_out: bool
    seconds: float
    error: str | None = None  # why the conversation could not go on (nothing to ship)


@dataclass
class _Child:
    key: str
    proc: subprocess.Popen[bytes]
    deadline: float
    start: float
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    greeted: bool = False  # the first line has been read and answered
    pending: memoryview | None = None  # the part of the bundle not yet written
    shipped: bool = False
    timed_out: bool = False
    reading: int = 2  # stdout and stderr still open
    error: str | None = None


class Conversations:
    """Run ``argv`` per key, at most ``width`` at once; ``done(key, exchange)`` per answer."""

    def __init__(self, width: int, timeout: float, bundle: Callable[[], bytes],
                 done: Callable[[str, Exchange | OSError], None]) -> None:
        self.width, self.timeout, self.bundle, self.done = max(1, width), timeout, bundle, done
        self.sel = selectors.DefaultSelector()
        self.children: dict[str, _Child] = {}

    def run(self, jobs: Iterable[tuple[str, list[str]]]) -> None:
        """Until every job has answered (or been killed at its deadline)."""
        queue = deque(jobs)
        try:
            while queue or self.children:
                while queue and len(self.children) < self.width:
                    self._spawn(*queue.popleft())
                self._turn()
        finally:
            for child in list(self.children.values()):  # an exception: leave nothing behind
                child.proc.kill()
                self._finish(child)
            self.sel.close()

    def _spawn(self, key: str, argv: list[str]) -> None:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        except OSError as exc:
            self.done(key, exc)
            return
        now = time.monotonic()
        child = _Child(key, proc, now + self.timeout, now)
        self.children[key] = child
        for pipe in (proc.stdout, proc.stderr):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe, selectors.EVENT_READ, child)

    def _turn(self) -> None:
        """Wait for a pipe (or the next deadline), serve what is ready, settle what ended."""
        now = time.monotonic()
        reaping = any(c.reading == 0 for c in self.children.values())
        wait = min((c.deadline for c in self.children.values()), default=now) - now
        if reaping:
            wait = min(wait, REAP_S)
        for key, _ in self.sel.select(max(0.0, wait)):  # epoll: waits with no pipe too
            child = key.data
            if key.fileobj is child.proc.stdin:
                self._write(child)
            else:
                self._read(child, key.fileobj)
        now = time.monotonic()
        for child in list(self.children.values()):
            if child.reading == 0 and child.pending is None and child.proc.poll() is not None:
                self._finish(child)
            elif now >= child.deadline:
                # The transport is killed; ssh's hang-up makes the remote remove its
                # temporary directory, and py-spy's ptrace detach resumes the ranks. Its
                # pipes are not drained: a grandchild may hold them open.
                child.timed_out = True
                child.proc.kill()
                self._finish(child)

    def _read(self, child: _Child, pipe: IO[bytes]) -> None:
        try:
            data = os.read(pipe.fileno(), CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.sel.unregister(pipe)
            pipe.close()
            child.reading -= 1
        if pipe is child.proc.stderr:
            child.err += data
            return
        child.out += data
        if not child.greeted and (b"\n" in data or not data):
            self._greet(child)

    def _greet(self, child: _Child) -> None:
        """The first line is read: send the bundle if asked, then close stdin."""
        child.greeted = True
        first, _, rest = bytes(child.out).partition(b"\n")
        hello = first.strip()
        if hello in (HELLO_SEND.encode(), HELLO_INSTALLED.encode()):
            child.out = bytearray(rest)  # the handshake line is no part of the dump
        stdin = child.proc.stdin
        assert stdin is not None
        if hello == HELLO_SEND.encode():
            try:
                child.pending = memoryview(self.bundle())
            except HangscopeError as exc:  # nothing to ship (no py-spy here): this node only
                child.error = exc.message
                child.deadline = 0.0  # killed and answered at the end of this turn
                self._close_stdin(child)
                return
            os.set_blocking(stdin.fileno(), False)
            self.sel.register(stdin, selectors.EVENT_WRITE, child)
        else:
            self._close_stdin(child)

    def _write(self, child: _Child) -> None:
        assert child.pending is not None
        try:
            sent = os.write(child.proc.stdin.fileno(), child.pending[:CHUNK])  # type: ignore[union-attr]
        except BlockingIOError:
            return
        except (BrokenPipeError, ConnectionResetError):
            child.pending = None
            self._close_stdin(child)
            return
        child.pending = child.pending[sent:]
        if not child.pending:
            child.pending, child.shipped = None, True
            self._close_stdin(child)

    def _close_stdin(self, child: _Child) -> None:
        stdin = child.proc.stdin
        if stdin is None or stdin.closed:
            return
        if self._registered(stdin):
            self.sel.unregister(stdin)
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin.close()

    def _registered(self, pipe: IO[bytes]) -> bool:
        try:
            self.sel.get_key(pipe)
        except KeyError:
            return False
        return True

    def _finish(self, child: _Child) -> None:
        """Close what is open, reap the process, hand over the answer, forget the child."""
        del self.children[child.key]
        self._close_stdin(child)
        child.pending = None
        for pipe in (child.proc.stdout, child.proc.stderr):
            if pipe is not None and not pipe.closed:
                if self._registered(pipe):
                    self.sel.unregister(pipe)
                pipe.close()
        child.proc.wait()
        exchange = Exchange(child.proc.returncode, child.out.decode(errors="replace"),
                            child.err.decode(errors="replace"), child.shipped,
                            child.timed_out and child.error is None,
                            time.monotonic() - child.start, child.error)
        child.out, child.err = bytearray(), bytearray()
        self.done(child.key, exchange)
