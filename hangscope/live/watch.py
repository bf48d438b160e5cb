"""``hangscope watch``: watch a job for its whole life, capture the hang the moment it starts.

The live loop beside :mod:`hangscope.live.sampler`. Each *pulse* watches the job's working
processes for ``interval`` seconds without pausing any of them (collect/progress.py: Python
lines sampled by ``py-spy record --nonblocking`` at a low rate, per-thread kernel counters,
``/proc/PID/io``, GPU GPM), and the pure clock of analyze/stall.py says how long the longest
wait has lasted. Only when a wait has lasted ``after`` seconds, or a rank has died while the
others live, does the watcher pause anything: one full ``Sampler`` snapshot (every rank's
stacks, /proc, GPUs, RAS, the Flight Recorder, the kernel log), written as JSON and Markdown.

Then it keeps watching: "recovered" when every process of the hang has left its wait (the
capture was a slow phase), a second capture when the hang changes shape (a rank dies, the
waits change), a last line when the job ends.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hangscope.analyze.evidence.progress import progress_of
from hangscope.analyze.evidence.progress_hints import hints_of
from hangscope.analyze.stall import NOT_HUNG, StallClock, leaf, wait_of
from hangscope.collect import procfs
from hangscope.collect.progress import ProgressWatcher
from hangscope.errors import HangscopeError, PermissionDenied, ProcessNotFound
from hangscope.live.capture import Capture, Hooks, hang_line, write_capture
from hangscope.live.discover import Discovery
from hangscope.live.sampler import WATCHED, SampleOptions, Sampler
from hangscope.model import Process, Role

#: Python samples per second where a wait is recorded: enough to see a line move in a pulse
#: (~0.5% of a core per process recorded, benchmarks/watch_cost.py).
RATE = 10
#: How long a rank that exited is given for the others to exit too (a job's normal end):
#: short, since a launcher such as torchrun tears the other ranks down within seconds.
EXIT_GRACE_S = 1.0
#: How often a pulse checks that its ranks still live (a stat of /proc/PID).
DEATH_CHECK_S = 0.25
#: Exit codes of ``watch`` beyond errors.py's: the job ended after a hang was captured.
HANG_CAPTURED = 8


@dataclass(frozen=True)
class WatchOptions:
    """``hangscope watch --after S --interval S --out DIR --on-hang CMD``."""

    after: float = 60.0
    interval: float = 5.0
    out: Path = Path(".")
    on_hang: str | None = None
    max_captures: int = 5
    exit_on_hang: bool = False
    verbose: bool = False
    sampling: SampleOptions = field(default_factory=SampleOptions)


class Watch:
    """Watches the job of ``pid`` until it ends (``run``); say(line) tells the user."""

    def __init__(self, pid: int, options: WatchOptions,
                 say: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pid = pid
        self.options = options
        self.say = say
        self.clock = clock
        self.discovery = Discovery(pid, redact=options.sampling.redact)
        self.stall = StallClock(options.after)
        self.captures: list[Capture] = []
        self.own_cpu_s = 0.0  # the recorders' CPU over the watch (the watcher's own cost)
        self._stop = threading.Event()
        self._hang: frozenset[tuple[int, tuple[str, ...]]] | None = None  # shape captured
        self._hang_since: float | None = None
        self._checked: frozenset[tuple[int, tuple[str, ...]]] | None = None  # judged not hung
        self._ranks: dict[int, Process] = {}  # the ranks seen alive at the last pulse
        self.hooks = Hooks(options.on_hang, say)

    def stop(self) -> None:
        """End the watch at the next pulse's end (Ctrl-C, a signal)."""
        self._stop.set()

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        """Watch until the job ends; the exit code (0, or HANG_CAPTURED)."""
        opts = self.options
        procs = self._discover()
        if procs is None:
            raise ProcessNotFound(f"No process with PID {self.pid} exists.")
        watched = _watched(procs)
        self.say(f"watching the job of PID {self.pid} ({_count(watched)}), every "
                 f"{opts.interval:g} s without pausing it; a wait of {opts.after:g} s is a "
                 f"hang; captures go to {opts.out}")
        self._ranks = {p.pid: p for p in procs if p.role is Role.RANK}
        while not self._stop.is_set():
            procs = self._discover()
            if procs is None or not _watched(procs):
                return self._ended(procs)
            if self._rank_died(procs):
                if opts.exit_on_hang:
                    return HANG_CAPTURED
                continue
            self._pulse(_watched(procs))
            if self._stop.is_set():
                break
            if self._judge() and opts.exit_on_hang:
                return HANG_CAPTURED
        return HANG_CAPTURED if self.captures else 0

    def _discover(self) -> list[Process] | None:
        """The job's processes now; None once the process watched has exited (a zombie too:
        its parent has not reaped it yet, but it will never run again)."""
        if not _alive(self.pid):
            return None
        try:
            _, procs = self.discovery.discover()
        except ProcessNotFound:
            return None
        return [p for p in procs if p.pid != os.getpid() and _alive(p.pid)]

    def _pulse(self, watched: Sequence[Process]) -> None:
        """One window of cheap evidence, and the clock fed with each process's wait."""
        opts = self.options
        # Python lines only where a wait has lasted half of --after: to name the wait and to
        # prove its line does not move before anything is paused. Kernel counters alone tell
        # a healthy job's ranks moving, and cost no py-spy at all.
        named = [p.pid for p in watched if self.stall.age(p.pid) >= opts.after / 2]
        pids = [*named, *(p.pid for p in watched if p.pid not in named)]
        watcher = ProgressWatcher(pids, rate=RATE, max_seconds=opts.interval + 30,
                                  record=bool(named), record_limit=len(named))
        start = self.clock()
        watcher.start()
        ranks = [p.pid for p in watched if p.role is Role.RANK]
        while not self._stop.wait(DEATH_CHECK_S) and self.clock() - start < opts.interval:
            if ranks and any(not _alive(pid) for pid in ranks):
                break  # a rank died: the pulse ends now, so its capture starts at once
        evidence = watcher.stop()
        end = self.clock()
        self.own_cpu_s += evidence.sampler_cpu_s or 0.0
        gpus_of = {p.pid: [g.gpu_index for g in p.gpus] for p in watched}
        decided = {r.pid: r for r in progress_of(evidence, gpus_of,
                                                 hints=hints_of(watched)).ranks}
        waits = {}
        for proc in evidence.processes:
            decision = decided.get(proc.pid)
            waits[proc.pid] = (wait_of(proc, decision, evidence.seconds)
                               if decision is not None else None)
        self.stall.feed(start, end, waits)
        if opts.verbose:
            longest = self.stall.longest()
            where = f" (PID {longest.pid} in {leaf(longest.wait)})" if longest else ""
            self.say(f"pulse: {len(pids)} processes, longest wait "
                     f"{self.stall.stalled_for():.0f} s{where}")

    def _judge(self) -> bool:
        """Capture, recover or keep watching after a pulse; True when a capture was written."""
        shape = self.stall.shape()
        if self._hang is not None:
            if self.stall.moved_since(self._hang):
                took = self.clock() - (self._hang_since or self.clock())
                self.say(f"recovered after {_ago(took)}: every process of the hang left its "
                         "wait; the capture was a slow phase, not a hang")
                self._hang = self._hang_since = None
                return False
            # A shape already re-checked and read not hung is not dumped again each pulse.
            if shape and shape not in (self._hang, self._checked) \
                    and len(self.captures) < self.options.max_captures:
                return self._capture("the hang changed shape", shape)
            return False
        if self._checked is not None and self.stall.moved_since(self._checked):
            # The job moved since it was judged not hung (a server served, a phase ended): a
            # later stall in the same places is a new one (the engine stopped at the wait it
            # idled in), judged anew.
            self._checked = None
        if not self.stall.stalled() or shape == self._checked:
            return False
        longest = self.stall.longest()
        why = (f"PID {longest.pid} waited {self.stall.stalled_for():.0f} s in "
               f"{leaf(longest.wait)}" if longest else "no progress")
        return self._capture(why, shape)

    def _rank_died(self, procs: Sequence[Process]) -> bool:
        """A rank that exited while the others live is a hang at once (no --after): True when
        it was captured."""
        alive = {p.pid: p for p in procs if p.role is Role.RANK and not p.is_exited}
        # A process that is still there but no longer a rank only changed its role: a
        # torchrun agent started by srun carries SLURM_PROCID and reads as a rank until its
        # workers appear (analyze/evidence/roles.py refine_roles), which a watch started before the
        # job sees.
        gone = [p for pid, p in self._ranks.items() if pid not in alive and not _alive(pid)]
        self._ranks = alive
        if not gone or not alive:
            return False
        # The job's normal end: every rank exits within moments of the first.
        deadline = self.clock() + EXIT_GRACE_S
        while self.clock() < deadline and not self._stop.is_set():
            self._stop.wait(DEATH_CHECK_S)
            again = self._discover()
            if again is None or not any(p.role is Role.RANK and not p.is_exited
                                        for p in again):
                return False
        who = ", ".join(f"{_who(p)}" for p in gone)
        return self._capture(f"{who} exited while the other ranks run", self.stall.shape())

    def _ended(self, procs: list[Process] | None) -> int:
        hangs = len(self.captures)
        tail = f"; {hangs} capture(s) in {self.options.out}" if hangs else "; no hang seen"
        self.say(f"the job ended (PID {self.pid} "
                 f"{'exited' if procs is None else 'has no working process left'}){tail}")
        self.hooks.wait()
        return HANG_CAPTURED if hangs else 0

    # -- the capture -------------------------------------------------------------------
    def _capture(self, why: str, shape: frozenset[tuple[int, tuple[str, ...]]]) -> bool:
        """The full dump; written only when its verdict says hung (an idle server is not)."""
        try:
            snap = Sampler(self.pid, self.options.sampling).snapshot()
        except PermissionDenied as exc:
            snap = exc.snapshot
        except HangscopeError as exc:
            self.say(f"could not capture ({why}): {exc.message}")
            return False
        if snap is None:
            return False
        verdict = snap.verdict
        kind = str(verdict.kind) if verdict is not None else "unknown"
        # Not hung: before a hang, the job is idle or slow; after one, its new shape is the
        # job moving again (a recovery under way), not a second hang to write.
        if kind in NOT_HUNG:
            self._checked = shape
            summary = verdict.summary if verdict is not None else ""
            self.say(f"checked ({why}): not hung: {summary}")
            return False
        capture = write_capture(self.options.out, snap, why, str(self.pid),
                                len(self.captures) + 1)
        self.captures.append(capture)
        if self._hang is None:
            self._hang_since = self.clock() - self.stall.stalled_for()
        self._hang = shape
        self.say(hang_line(capture))
        self.hooks.run(capture)
        return True


def _alive(pid: int) -> bool:
    """The process exists and is no zombie (a rank that exited but is not reaped yet)."""
    stat = procfs.read_stat(pid)
    return stat is not None and stat.state not in ("Z", "X")


def _watched(procs: Sequence[Process]) -> list[Process]:
    """The processes whose waits decide (as the sampler's progress watcher picks them)."""
    python = [p for p in procs if p.python is not False and not p.is_exited]
    return ([p for p in python if p.role in WATCHED]
            or [p for p in python if p.role is Role.OTHER])


def _count(procs: Sequence[Process]) -> str:
    ranks = sum(1 for p in procs if p.role is Role.RANK)
    if ranks:
        return f"{ranks} rank{'s' if ranks != 1 else ''}"
    return f"{len(procs)} process{'es' if len(procs) != 1 else ''}"


def _who(proc: Process) -> str:
    rank = proc.rank.global_rank if proc.rank is not None else None
    return f"rank {rank} (PID {proc.pid})" if rank is not None else f"PID {proc.pid}"


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"
