"""``hangscope watch --nodes/--slurm-job/--pods``: one watcher for a job that spans nodes.

It starts one non-capturing watcher per node through the job's transport (remote/nodewatch.py:
``hangscope watch --find SPEC --events``, shipped where hangscope is missing), which pulses
as the one-node watch does (nothing paused) and prints one JSON line per pulse. Here every
node's lines meet: when any wait on any node has lasted ``--after`` seconds, or a rank dies on
a node while the others run, ONE capture of the whole job is taken through the multi-node dump
(remote/multinode.py: every node at once, merged) and written as the one-node watch writes
it (live/capture.py). Then "recovered", a second capture when the hang changes shape, and the
end of the job once it ended on every node. A node that cannot be reached, or whose watcher
stops, is said in one line and the watch goes on with the others.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hangscope.analyze.stall import ASLEEP, NOT_HUNG, leaf
from hangscope.errors import HangscopeError, UsageError
from hangscope.live.capture import Capture, Hooks, hang_line, write_capture
from hangscope.live.watch import HANG_CAPTURED, WatchOptions, _ago
from hangscope.model import Snapshot
from hangscope.remote.multinode import _is_here, dump_everywhere
from hangscope.remote.nodeset import fold
from hangscope.remote.nodewatch import NodeEvent, NodeWatcher
from hangscope.remote.request import NodeRequest, Pulse, remote_argv
from hangscope.remote.transport import Kubectl

#: A node whose job ended while others still run is a dead part of the job once this has
#: passed: the normal end of a job ends it on every node within seconds of the first.
NODE_EXIT_GRACE_S = 5.0
#: How often the loop wakes without an event (to notice a node's grace running out).
TICK_S = 0.25

#: (node, PID) -> the wait and how long it has lasted, as the node's last pulse said.
Key = tuple[str, int]
Shape = frozenset[tuple[str, int, tuple[str, ...]]]


@dataclass
class NodeState:
    """What one node's watcher last said."""

    waits: dict[int, tuple[tuple[str, ...], float]] = field(default_factory=dict)
    ranks: int = 0
    seen: bool = False
    ended_at: float | None = None
    ended_said: bool = False
    lost: bool = False
    waiting: bool = False  # said it has no process of the job yet
    pulse_no: int = 0  # the watch's count of pulses at this node's last

    @property
    def live(self) -> bool:
        return self.seen and self.ended_at is None and not self.lost


class MultiWatch:
    """Watches the job of ``request`` on every node until it ends there (``run``)."""

    def __init__(self, request: NodeRequest, pid: int | None, options: WatchOptions,
                 say: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic,
                 dump: Callable[[NodeRequest, int | None], Snapshot] = dump_everywhere) -> None:
        if request.where.nodes is None:
            raise UsageError("watch --nodes auto needs SLURM_JOB_NODELIST in the job's "
                             "environment (NCCL RAS is asked only at a capture).",
                             "Name the nodes: --nodes node[01-04].")
        self.request, self.pid, self.options = request, pid, options
        self.say, self.clock, self.dump = say, clock, dump
        self.nodes = list(dict.fromkeys(request.where.nodes))
        self.state = {node: NodeState() for node in self.nodes}
        self.captures: list[Capture] = []
        self.hooks = Hooks(options.on_hang, say)
        self.events: queue.Queue[NodeEvent] = queue.Queue()
        self._stop = threading.Event()
        self._hang: Shape | None = None
        self._hang_since: float | None = None
        self._checked: Shape | None = None
        self._announced = False
        self._dead: set[str] = set()  # nodes whose rank's death was captured
        self._finished = False  # the job ended (not a stop)
        self._pulses = 0  # pulses from every node so far
        self._left_at: int | None = None  # the pulse that first saw part of the hang leave
        where = request.where
        args = remote_argv(request.spec, options.sampling, Pulse(options.after,
                                                                    options.interval))
        kubectl = isinstance(where.transport, Kubectl)
        self.watchers = [NodeWatcher(where.transport, node, args, self.events, where.ship,
                                     where.python, local=_is_here(node) and not kubectl)
                         for node in self.nodes]

    def stop(self) -> None:
        """End the watch (Ctrl-C, SIGTERM): the loop returns at its next tick."""
        self._stop.set()

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> int:
        """Watch until the job ended on every node; the exit code (0, or HANG_CAPTURED).

        Raises:
            HangscopeError: no node could be watched (each node's reason).
        """
        opts = self.options
        transport = self.request.where.transport
        self.say(f"watching the job on {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}"
                 f" ({fold(self.nodes)}) through {transport.name}, every {opts.interval:g} s "
                 f"without pausing it; a wait of {opts.after:g} s is a hang; captures go to "
                 f"{opts.out}")
        try:
            for watcher in self.watchers:
                watcher.start()
            while not self._stop.is_set():
                try:
                    event: NodeEvent | None = self.events.get(timeout=TICK_S)
                except queue.Empty:
                    event = None
                if event is not None and self._handle(event) and opts.exit_on_hang:
                    return HANG_CAPTURED
                if self._grace() and opts.exit_on_hang:
                    return HANG_CAPTURED
                if self._over():
                    return self._ended()
            return HANG_CAPTURED if self.captures else 0
        finally:
            self._stop_watchers()
            watched = [n for n, st in self.state.items() if st.seen or st.waiting]
            if not self._finished and watched:  # Ctrl-C, SIGTERM, --exit-on-hang
                self.say(f"stopped: the watchers on {fold(watched)} ended"
                         + (f"; {len(self.captures)} capture(s) in {opts.out}"
                            if self.captures else ""))

    def _over(self) -> bool:
        """The job ended on every node that ran it (a node still waiting for it to start
        never will once it ended everywhere else), or no node is left to watch."""
        states = self.state.values()
        if all(s.lost for s in states):
            return True
        return any(s.ended_at is not None for s in states) and all(
            s.ended_at is not None or s.lost or not s.seen for s in states)

    def _handle(self, event: NodeEvent) -> bool:
        """One node's line; True when a capture was written."""
        state = self.state[event.node]
        if event.event == "lost":
            state.lost = True
            left = [n for n, s in self.state.items() if not s.lost]
            goes_on = ("No node is left" if not left else
                       f"The watch goes on with {left[0]}" if len(left) == 1 else
                       f"The watch goes on with the other {len(left)} nodes")
            # Never reached: the transport is the suspect. Watched, then lost: its ranks are
            # still asked at every capture, through a connection of their own.
            fix = (f"its ranks are still in every capture; start the watch again to watch "
                   f"{event.node} again" if state.seen else
                   f"check that `{self.request.where.transport.name}` reaches {event.node} "
                   "by hand")
            self.say(f"{event.node}: not watched: {event.error}. {goes_on}; {fix}.")
            self._announce()
            return False
        if event.event == "waiting":  # started before the job: it has no process there yet
            if not state.waiting and self.options.verbose:
                self.say(f"{event.node}: waiting for the job to start there")
            state.waiting = True
            self._announce()
            return False
        if event.event == "note":
            if self.options.verbose:
                self.say(f"{event.node}: {event.data.get('line', '')}")
            return False
        if event.event == "ended":
            state.ended_at = self.clock()
            return False
        if event.event == "died":
            self._dead.add(event.node)  # its node's end that follows is this same death
            if self._hang is not None and len(self.captures) >= self.options.max_captures:
                return False
            return self._capture(f"on {event.node}, {event.data.get('why', 'a rank exited')}",
                                 self._shape())
        if event.event != "pulse":
            return False
        state.seen = True
        self._pulses += 1
        state.pulse_no = self._pulses
        ranks = event.data.get("ranks")
        state.ranks = len(ranks) if isinstance(ranks, dict) else 0
        state.waits = {}
        for item in event.data.get("waits") or ():  # type: ignore[attr-defined]
            pid, wait, age = item
            state.waits[int(pid)] = (tuple(str(f) for f in wait), float(age))
        self._announce()
        if self.options.verbose:
            longest = max(state.waits.items(), key=lambda kv: kv[1][1], default=None)
            where = (f", longest wait {longest[1][1]:.0f} s (PID {longest[0]} in "
                     f"{leaf(longest[1][0])})" if longest else ", nobody waits")
            self.say(f"pulse {event.node}: {state.ranks} ranks{where}")
        return self._judge()

    def _announce(self) -> None:
        """Once every node answered or was lost: one line that says what is watched."""
        if self._announced or not all(s.seen or s.lost or s.waiting
                                      for s in self.state.values()):
            return
        seen = [n for n, s in self.state.items() if s.seen]
        if not seen:
            return  # every node waits for the job: said once it has started somewhere
        self._announced = True
        ranks = sum(self.state[n].ranks for n in seen)
        waiting = [n for n, s in self.state.items() if s.waiting and not s.seen]
        self.say(f"{len(seen)} of {len(self.nodes)} nodes watched ({fold(seen)}): "
                 f"{ranks} rank{'s' if ranks != 1 else ''}"
                 + (f"; the job has not started on {fold(waiting)} yet" if waiting else ""))

    def _shape(self) -> Shape:
        """Who waits where on the live nodes, for the waits as old as ``--after``."""
        return frozenset((node, pid, wait) for node, s in self.state.items() if s.live
                         for pid, (wait, age) in s.waits.items() if age >= self.options.after)

    def _left(self, node: str, pid: int, wait: tuple[str, ...]) -> bool:
        """The process left the wait it was captured in (another wait named by its stack, or
        none); a node's pulse that merely named an anonymous wait is no move."""
        s = self.state[node]
        if not s.live:
            return False  # gone with its node: that is a changed shape, not a recovery
        now = s.waits.get(pid)
        return now is None or (now[0] != wait and ASLEEP not in (now[0], wait))

    def _judge(self) -> bool:
        shape = self._shape()
        if self._hang is not None:
            if self._hang and all(self._left(n, p, w) for n, p, w in self._hang):
                took = self.clock() - (self._hang_since or self.clock())
                self.say(f"recovered after {_ago(took)}: every process of the hang left its "
                         "wait; the capture was a slow phase, not a hang")
                self._hang = self._hang_since = self._left_at = None
                return False
            # More processes of other nodes reaching --after in later pulses is the same
            # hang (nodes pulse out of step); one that left its wait while others stay is
            # not, once every node of the hang has pulsed since (a recovery reaches the
            # nodes' pulses one at a time: it must not read as a new shape on the way).
            if not any(self._left(n, p, w) for n, p, w in self._hang):
                self._left_at = None
                self._hang |= shape
                return False
            if self._left_at is None:
                self._left_at = self._pulses
            nodes = {n for n, _, _ in self._hang if self.state[n].live}
            # A shape already re-checked and read not hung is not dumped again each pulse.
            if shape and shape != self._checked \
                    and all(self.state[n].pulse_no > self._left_at for n in nodes) \
                    and len(self.captures) < self.options.max_captures:
                return self._capture("the hang changed shape", shape)
            return False
        if not shape or shape == self._checked:
            return False
        node, pid, wait, age = max(((n, p, w, self.state[n].waits[p][1]) for n, p, w in shape),
                                   key=lambda item: item[3])
        return self._capture(f"PID {pid} on {node} waited {age:.0f} s in {leaf(wait)}", shape)

    def _grace(self) -> bool:
        """A node whose job ended while other nodes run: captured once its grace is over."""
        now = self.clock()
        for node, s in self.state.items():
            if s.ended_at is None or s.ended_said or now - s.ended_at < NODE_EXIT_GRACE_S:
                continue
            s.ended_said = True
            running = [n for n, o in self.state.items() if o.live]
            if node in self._dead or not running:
                continue
            if self._hang is None or len(self.captures) < self.options.max_captures:
                self._dead.add(node)
                return self._capture(f"the job ended on {node} while it runs on "
                                     f"{fold(running)}", self._shape())
        return False

    def _ended(self) -> int:
        ended = [n for n, s in self.state.items() if s.ended_at is not None]
        if not ended and not self.captures:
            what = ("No node is left to watch" if any(s.seen for s in self.state.values())
                    else "No node could be watched")
            raise HangscopeError(f"{what} (each node's reason is above).",
                                 f"Check that `{self.request.where.transport.name}` reaches "
                                 "the nodes and that --find matches the job on them.")
        self._finished = True
        hangs = len(self.captures)
        tail = f"; {hangs} capture(s) in {self.options.out}" if hangs else "; no hang seen"
        lost = [n for n, s in self.state.items() if s.lost]
        if ended:
            self.say(f"the job ended on {fold(ended)}"
                     + (f" ({fold(lost)} not watched)" if lost else "") + tail)
        else:  # every node's watcher was lost after a capture
            self.say(f"no node is left to watch ({fold(lost)} not watched){tail}")
        self.hooks.wait()
        return HANG_CAPTURED if hangs else 0

    # -- the capture ---------------------------------------------------------------------
    def _capture(self, why: str, shape: Shape) -> bool:
        """The whole job's dump, every node at once; written when its verdict says hung."""
        try:
            snap = self.dump(self.request, self.pid)
        except HangscopeError as exc:
            self.say(f"could not capture ({why}): {exc.message}")
            return False
        verdict = snap.verdict
        kind = str(verdict.kind) if verdict is not None else "unknown"
        # Not hung: before a hang, the job is idle or slow; after one, its new shape is the
        # job moving again (a recovery reaching the nodes one pulse at a time), not a second
        # hang to write.
        if kind in NOT_HUNG:
            self._checked = shape
            self.say(f"checked ({why}): not hung: {verdict.summary if verdict else ''}")
            return False
        capture = write_capture(self.options.out, snap, why, "job", len(self.captures) + 1)
        self.captures.append(capture)
        if self._hang is None:
            ages = [self.state[n].waits[p][1] for n, p, _ in shape
                    if p in self.state[n].waits]
            self._hang_since = self.clock() - max(ages, default=0.0)
        self._hang, self._left_at = shape, None
        self.say(hang_line(capture))
        self.hooks.run(capture)
        return True

    def _stop_watchers(self) -> None:
        """Every node's watcher ends, in parallel (a node's transport may take seconds)."""
        threads = [threading.Thread(target=w.stop, daemon=True) for w in self.watchers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
