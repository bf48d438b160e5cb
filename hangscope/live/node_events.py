"""``hangscope watch --find SPEC --events``: the one-node watcher a multi-node watch starts on
every node (hidden from ``--help``).

The same pulses as ``hangscope watch PID`` (live/watch.py): nothing paused, nothing captured.
Instead of judging, each pulse prints one JSON line on stdout for the watcher that started it
(remote/multiwatch.py), which sees every node's lines and captures the whole job at once:

    {"event": "pulse", "host": "node02", "pid": 11, "ranks": {"14": 3}, "processes": 2,
     "waits": [[14, ["all_reduce (...)"], 21.0]]}     # [PID, wait, seconds in it]
    {"event": "died", "host": "node02", "why": "rank 3 (PID 14) exited while ..."}
    {"event": "ended", "host": "node02", "how": "exited"}
    {"event": "waiting", "host": "node02"}      # no Python process of the job here yet

It ends when the job ends on its node, or when its stdout is gone (the watcher that started
it ended and the transport closed the pipe: the next pulse's line fails with EPIPE), so no
watcher outlives the watch on any node.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence

from hangscope.live.watch import Watch, WatchOptions
from hangscope.model import Process


def emit(event: str, **fields: object) -> bool:
    """One JSON line on stdout; False when nobody reads it any more (EPIPE)."""
    line = json.dumps({"event": event, "host": socket.gethostname(), **fields},
                      separators=(",", ":"))
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        # Python's own flush at exit would fail again: point stdout at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return False
    return True


class NodeEvents:
    """The node's watcher from its start: wait for the job to appear here (``find``: its
    PID, or None while it has none), then an :class:`EventWatch` of it until it ends."""

    def __init__(self, find: Callable[[], int | None], options: WatchOptions) -> None:
        self.find, self.options = find, options
        self._stop = threading.Event()
        self._watch: EventWatch | None = None

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()

    def run(self) -> int:
        pid = self.find()
        while pid is None:
            # Not started on this node yet: say so each interval (a line that fails says the
            # watcher that started this one is gone).
            if not emit("waiting") or self._stop.wait(self.options.interval):
                return 0
            pid = self.find()
        self._watch = EventWatch(pid, self.options)
        if self._stop.is_set():
            return 0
        return self._watch.run()


class EventWatch(Watch):
    """A Watch that reports each pulse as a JSON line and never captures."""

    def __init__(self, pid: int, options: WatchOptions) -> None:
        super().__init__(pid, options, say=self._note)

    def emit(self, event: str, **fields: object) -> None:
        """One line to the watcher; a closed pipe means it is gone: stop."""
        if not emit(event, **fields):
            self.stop()

    def _note(self, line: str) -> None:
        self.emit("note", line=line)

    def _judge(self) -> bool:
        end = self.stall.last_end or 0.0
        waits = [[w.pid, list(w.wait), round(end - w.since, 2)]
                 for w in self.stall.waiting.values()]
        ranks = {str(pid): (p.rank.global_rank if p.rank is not None else None)
                 for pid, p in self._ranks.items()}
        self.emit("pulse", pid=self.pid, ranks=ranks, waits=waits)
        return False

    def _capture(self, why: str, shape: frozenset[tuple[int, tuple[str, ...]]]) -> bool:
        # Only _rank_died gets here (_judge never captures): the watcher captures every node.
        self.emit("died", why=why)
        return False

    def _ended(self, procs: Sequence[Process] | None) -> int:
        self.emit("ended", pid=self.pid, how="exited" if procs is None
                  else "has no working process left")
        return 0
