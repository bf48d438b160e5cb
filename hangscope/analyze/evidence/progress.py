"""Progressing, stuck or slow: a pure decision per rank from :mod:`hangscope.model.progress`.

Rules, first that holds wins; each names the evidence that decided, in a sentence:

1. *python*: the working thread's Python stack moved (dense sampling saw it at two or more
   places) -> progressing. A blocked rank shows one stack; a poll loop that never moves on shows
   its wait line only (its check takes microseconds, below the sampling period). A loop that
   moves between waits only (idle CPU, no data, no GPU work; reads of a few bytes with no write
   are a poll's re-read of its flag, SQLite's retry of a locked database) is a poll, judged by
   the counters,
   unless a collective is among its stacks: it returned from the collective and went on, so
   its peers answered (NCCL's data moves in its own threads' send/recv, which /proc/PID/io does
   not count, and a small step's kernels leave the SMs nearly idle); or a framework's object
   get that its program's line calls with no timeout (``ray.get(refs)``: the source says so,
   ``Frame.untimed``), and it was sampled outside it too: the get returned, which it does only
   with its objects (Ray's traffic is gRPC's sendmsg/recvmsg, not counted either).
   A threaded actor's main thread idles in the framework's task loop while pool threads run
   its methods: the busiest of those is judged instead.
2. *gpu*: its GPU's SMs do work (SM activity with DRAM traffic, FP/tensor math or NVLink
   traffic) -> progressing; the GPU is busy (graphics) while SMs, memory and math are idle -> a
   spinning kernel: stuck. ``utilization.gpu`` cannot tell these apart; GPM can.
3. *counters*: the working thread sleeps in one place:
   - it woke up repeatedly and the process moved data (``/proc/PID/io`` writes: gloo's
     sockets) -> its waits complete: progressing;
   - it sleeps now in a read of a socket with no timer (the kernel's syscall), where it
     waited most of the window, and woke again and again -> each wake brought bytes, which
     ``/proc/PID/io`` does not count for ``recv``: progressing (``socket_reads``: a long
     poll of an idle server is still idle, analyze/patterns/calm);
   - it was never scheduled in the window (schedstat's count did not move) -> stuck;
   - it only lost the CPU (involuntary switches, no wake-ups) -> slow: runnable, starved;
   - it sat all window in a framework's get with no timeout -> stuck, blocked as one that
     never woke (Ray's own re-checks inside the get are not the program's timer);
   - it woke again and again, never left its line and no data moved beyond its pollers' own
     (threads that never left their line: heartbeats, monitors) -> stuck: a timed poll
     (TCPStore check loops, a 1 s ``select``, CPython's 5 ms GIL wait, ``time.sleep`` re-checking
     a flag); slow instead while another thread of it computes (moves its line on CPU);
   - it woke once and moved nothing -> slow (a step longer than the window).
4. *counters*: the working thread ran on CPU in one place -> with an idle GPU, a spin-wait
   (``cudaStreamSynchronize`` spins, ``sched_yield``): stuck; without a GPU to judge, slow.

Then across ranks: a poll-loop verdict is taken back where a peer completed a collective in the
same loop function (a collective returns only once every rank has called it).

Why one file: the rules above are one ordered list, each reading the ones before it; split, the
order would live in two places.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from hangscope.analyze.evidence.progress_hints import Hints
from hangscope.analyze.evidence.progress_sites import (
    collective_sites,
    held_in_get,
    parse_frame,
    returned_gets,
    transport_io,
)
from hangscope.analyze.evidence.signatures import HELPER_THREAD_NAMES
from hangscope.frameworks import (
    STORE_THREADS,
    dispatches,
    in_task_loop,
    in_zmq_wait,
    runs_method,
)
from hangscope.model.progress import (
    CounterDelta,
    GpmReading,
    IoDelta,
    JobProgress,
    ProcessProgress,
    ProgressEvidence,
    RankProgress,
    ThreadProgress,
)

PROGRESSING = "progressing"
STUCK = "stuck"
SLOW = "slow"  # unknown: neither progress nor a hang could be proven
#: Healthy waits, named by the analysis (analyze/patterns/calm/calm.py) where every process waits
# for nobody:
PAUSED = "paused"  # a sleep that never woke in the window: between phases
IDLE = "idle"  # a server waiting for requests, none in flight
WAITING = "waiting"  # blocked the whole window while another process of the job progresses

#: Samples outside the dominant stack needed to call a move (one stray sample is noise: a
#: ``py-spy --nonblocking`` read can tear across a frame change).
MIN_MOVED_SAMPLES = 2
#: The share of a window's samples a thread may spend outside a framework's wait and still be
#: waiting in it (the tail of the last message's handling: 5%, 100 ms of a 2 s window).
WAIT_TAIL = 0.05
_COMPREHENSION = re.compile(r"\.<(genexpr|listcomp|setcomp|dictcomp|lambda)> \(")
#: A thread awake less than this share of the window is "idle" (it waits).
IDLE_CPU_SHARE = 0.2
#: Yields (involuntary switches) in the window that make a thread inside a wait a spinner.
SPIN_YIELDS = 100
#: Wake-ups in the window (with data moved) for a waiting thread's waits to "complete".
MIN_WAKES = 2
#: A poll re-reads a flag or a header (SQLite's 16-byte change counter before each lock try):
#: reads of at most this many bytes each, and no write, move no data of the job.
POLL_READ_BYTES = 64
NO_HINTS = Hints()
#: How a spin-wait's reason starts: a thread that burns its core waiting.
SPIN_WAITING = "spin-waiting"
#: GPM thresholds, percent. Measured on an H200: a spinning kernel reads graphics 100%, SM 0.8%,
#: DRAM ~0; a bf16 matmul loop SM 96%, tensor/FP32 tens of percent.
GPU_BUSY_GRAPHICS = 50.0
GPU_SM_WORK = 5.0
GPU_PIPE_WORK = 1.0  # DRAM bandwidth, FP32/FP16/FP64/tensor pipes
GPU_LINK_WORK_MIB_S = 100.0  # NVLink rx+tx
GPU_IDLE_GRAPHICS = 5.0
#: Voluntary context switches one blocking ``py-spy dump`` causes in each thread of its target
#: (ptrace attach + detach; measured: exactly 2, native or not, no I/O).
WAKES_PER_PAUSE = 2
_GPU_DECIDES = {"work": PROGRESSING, "spin": STUCK}
#: What decided a decision (``RankProgress.evidence``), in the report's words.
DECIDED_BY = {"python": "Python lines, py-spy record", "gpu": "GPU work, GPM",
              "counters": "kernel counters", "kernel": "its blocked syscall, /proc",
              "source": "CPU on a line of its own for loop",
              "sleep": "a sleep no loop of its own goes round (its source)",
              "socket": "its event loop's transport callbacks, py-spy record",
              "tcp": "its TCP connections' last data, the kernel's tcp_info",
              "none": "no evidence"}


def _pct(value: float) -> str:
    return f"{value:.2g}%" if value < 10 else f"{value:.0f}%"


def gpu_work(reading: GpmReading) -> tuple[str, str]:
    """(work | spin | idle | busy | unknown, sentence) from one GPU's GPM metrics."""
    if reading.error or not reading.metrics:
        return "unknown", f"GPU {reading.index}: {reading.error or 'no GPM metrics'}"
    m = reading.metrics
    sm, graphics = m.get("sm", 0.0), m.get("graphics", 0.0)
    pipes = {name: m[name] for name in ("dram", "tensor", "fp32", "fp16", "fp64") if name in m}
    busiest = max(pipes.items(), key=lambda item: item[1], default=("dram", 0.0))
    link = m.get("nvlink_rx_mib_s", 0.0) + m.get("nvlink_tx_mib_s", 0.0)
    facts = f"SM activity {_pct(sm)}, graphics {_pct(graphics)}, {busiest[0]} {_pct(busiest[1])}"
    if link:
        facts += f", NVLink {link:.0f} MiB/s"
    if sm >= GPU_SM_WORK and (busiest[1] >= GPU_PIPE_WORK or link >= GPU_LINK_WORK_MIB_S):
        return "work", f"GPU {reading.index}: {facts}: its kernels do work"
    if graphics >= GPU_BUSY_GRAPHICS and busiest[1] < GPU_PIPE_WORK and link < GPU_LINK_WORK_MIB_S:
        return "spin", (f"GPU {reading.index} is busy but does no work ({facts}): "
                        "a spinning kernel, not work")
    if graphics < GPU_IDLE_GRAPHICS:
        return "idle", f"GPU {reading.index} is idle ({facts})"
    return "busy", f"GPU {reading.index}: {facts}"


def _moved(thread: ThreadProgress) -> bool:
    if len(thread.stacks) < 2:
        return False
    off_dominant = thread.samples - thread.stacks[0].count
    return off_dominant >= MIN_MOVED_SAMPLES


def _one_loop(thread: ThreadProgress) -> bool:
    """The stacks of the window are one but for the innermost frame's line: the thread went
    round one loop of one function (a spin), never into a call or out of it (work). The
    loop's own comprehensions (``while sum(f for f in flags) < n``) are part of it, and so are
    torn samples: a ``--nonblocking`` read that lost the outer frames (the loop's stack with
    its outermost frames cut off) is no move. A consumer that spins for each message and
    handles it leaves the loop: its samples outside it say so."""
    shapes = [(_loop_shape(s.frames), s.count) for s in thread.stacks]
    shapes = [(shape, count) for shape, count in shapes if shape]
    if not shapes:
        return False
    loop = max(shapes, key=lambda item: item[1])[0]
    left = sum(count for shape, count in shapes
               if shape != loop and shape != loop[len(loop) - len(shape):])
    return left < MIN_MOVED_SAMPLES


def _inside_wait(thread: ThreadProgress) -> bool:
    """The window's stacks are inside one of a framework's own waits for a message, entered
    from one line (vLLM's shared-memory broadcast: ``sched_yield`` for a while after each
    read, then a poll of its zmq notify socket; hangscope/frameworks ``zmq_waits``): they
    differ only inside the wait, which goes round its own loop: no progress. A torn sample
    (a ``--nonblocking`` read that lost the outer frames) enters from the same line, and a
    few samples elsewhere (under :data:`WAIT_TAIL` of them: the end of the last message's
    handling, caught as the window began) do not make it work."""
    entries: dict[tuple[str, ...], int] = {}
    left = 0
    for stack in thread.stacks:
        if not stack.frames:
            continue  # a sample py-spy caught between frames: says nothing
        k = next((i for i, f in enumerate(stack.frames) if in_zmq_wait(f)), None)
        if k is None:
            left += stack.count
        else:
            outer = tuple(stack.frames[:k])
            entries[outer] = entries.get(outer, 0) + stack.count
    if not entries:
        return False
    line = max(entries, key=lambda o: entries[o])
    left += sum(n for outer, n in entries.items()
                if outer[-len(line):] != line[-len(outer):] if outer and line)
    return left < max(MIN_MOVED_SAMPLES, WAIT_TAIL * thread.samples)


def _loop_shape(frames: Sequence[str]) -> tuple[object, ...]:
    """A stack with its innermost frame's line dropped and the loop's comprehensions folded."""
    kept = list(frames)
    while kept and _COMPREHENSION.search(kept[-1]):
        kept.pop()
    return (*kept[:-1], _loop_key(kept[-1])) if kept else ()


def _leaf(thread: ThreadProgress) -> str:
    if not thread.stacks or not thread.stacks[0].frames:
        return "one place"
    return thread.stacks[0].frames[-1]


def _working_thread(proc: ProcessProgress, tid: int | None) -> ThreadProgress | None:
    by_tid = {t.tid: t for t in proc.threads}
    return by_tid.get(tid if tid is not None else proc.pid) or next(
        (t for t in proc.threads if t.samples), None)


def decide(proc: ProcessProgress, seconds: float, gpus: Sequence[GpmReading] = (),
           tid: int | None = None, hints: Hints = NO_HINTS) -> RankProgress:
    """The decision for one process; ``tid``: its working thread (default: the main thread);
    ``hints``: what a stack sample said of its threads (analyze/evidence/progress_hints.py)."""
    if proc.gone:
        return RankProgress(proc.pid, SLOW, "none", "the process exited during the window")
    thread = _working_thread(proc, tid)
    if thread is None:
        why = proc.error or "no thread could be read"
        return RankProgress(proc.pid, SLOW, "none", f"no evidence: {why}")
    judged = thread.tid
    if _between_tasks(thread):
        method = _method_thread(proc, thread)
        if method is not None:  # a threaded actor: its calls run on its pool's threads
            return decide(proc, seconds, gpus, method.tid, hints)
        return RankProgress(proc.pid, IDLE, "python", (
            f"between tasks: {thread.samples} samples in {_leaf(thread)}, the framework's loop "
            "for its next task: it runs none, so it holds up nobody"), judged)
    judged_gpus = [gpu_work(reading) for reading in gpus]
    gpu_text = "; ".join(sentence for _, sentence in judged_gpus) or None
    gpu_state = _gpu_state([state for state, _ in judged_gpus])
    # (a window that sampled no Python line of it, a live view's tick: the source's word
    # stands for an empty loop of the program's own)
    spins = thread.tid in hints.spinning and (_one_loop(thread) or (
        not thread.samples and thread.tid in hints.empty_loops))
    # blocked now in a read of a socket with no timer, where it waited most of the window
    reads = _reads_mostly(thread, hints.socket_readers.get(thread.tid))
    carried = transport_io(thread) if not spins else None
    if carried is not None and thread.counters is not None and _own_wakes(
            proc, thread.counters) >= MIN_WAKES:
        # its loop woke and moved a connection's bytes: a download read chunk by chunk, a
        # stream sent as the reader makes room (the counters see no recv/send)
        return RankProgress(proc.pid, PROGRESSING, "socket", (
            f"its event loop moved socket data in the window: sampled in {carried}, where "
            "asyncio hands a connection's bytes on (recv and send, which /proc/PID/io does not "
            "count)"), judged, gpu_text, gpu_state)
    moved = hints.tcp_moved.get(proc.pid)
    if moved is not None and moved[1] <= seconds * 1000 < moved[2] and not spins and \
            thread.counters is not None and _own_wakes(proc, thread.counters) >= MIN_WAKES:
        # woken again and again, and data went one way through one of its TCP connections
        # within a window's length of the kernel's read, none the other way: a stream read
        # event by event, whose callbacks no sample caught (a poll's request and answer, a
        # health check's ping and pong, go both ways: its own ticks, not data for it)
        return RankProgress(proc.pid, PROGRESSING, "tcp", (
            f"data went through its {moved[0]} {moved[1]} ms before the kernel was read (its "
            "tcp_info), and its wait ended again and again: its waits end as data moves "
            "(recv and send, which /proc/PID/io does not count)"), judged, gpu_text, gpu_state)
    # a spin-wait's line goes round its loop, and a framework's wait round its own: no progress
    if _moved(thread) and not spins and not _inside_wait(thread) and not reads:
        through = collective_sites(thread)
        if through:  # a collective returned and the line went on: its peers answer each step
            return RankProgress(proc.pid, PROGRESSING, "python", (
                f"Python line moved: {len(thread.stacks)} distinct stacks in {thread.samples} "
                f"samples, through {_sites(through)} and on: its collectives complete"),
                judged, gpu_text, gpu_state)
        gets = returned_gets(thread, hints.untimed.get(thread.tid, ()))
        if gets:  # a get with no timeout returned (its objects came) and the line went on
            return RankProgress(proc.pid, PROGRESSING, "python", (
                f"Python line moved: {len(thread.stacks)} distinct stacks in {thread.samples} "
                f"samples, in and out of {_sites(gets)}, a get with no timeout: it returns "
                "only once its objects came"), judged, gpu_text, gpu_state)
        if not _poll_loop(proc, thread, seconds, gpu_state, thread.tid in hints.readers,
                          hints.timers):
            return RankProgress(proc.pid, PROGRESSING, "python", (
                f"Python line moved: {len(thread.stacks)} distinct stacks in {thread.samples} "
                f"samples"), judged, gpu_text, gpu_state)
    for state, sentence in judged_gpus:
        if state in _GPU_DECIDES:
            return RankProgress(proc.pid, _GPU_DECIDES[state], "gpu", sentence, judged, gpu_text,
                                gpu_state)
    if spins:
        return RankProgress(proc.pid, STUCK, "counters", (
            f"{SPIN_WAITING}: the thread {hints.spinning[thread.tid]}"
            + (" and its line only goes round that loop" if thread.samples else "")
            + ": a wait that burns CPU, not work"), judged, gpu_text, gpu_state, spins=True)
    c = thread.counters
    if _inside_wait(thread) and c is not None and c.cpu_ns is not None and (
            c.cpu_ns / 1e9 >= IDLE_CPU_SHARE * seconds or (c.involuntary or 0) >= SPIN_YIELDS):
        # vLLM's broadcast wait spins (sched_yield, which the kernel counts as involuntary
        # switches) after each message before it polls: the CPU it burns there is the wait's,
        # not work (a stopped EngineCore's Worker)
        return RankProgress(proc.pid, STUCK, "counters", (
            f"{SPIN_WAITING}: {c.cpu_ns / 1e9:.1f} s of CPU and {c.involuntary or 0:,} yields in "
            f"{seconds:.1f} s, every sample inside the framework's own wait for a message "
            f"({_leaf(thread)}): a wait that burns CPU, not work"), judged, gpu_text,
            gpu_state, spins=True)
    if c is not None and c.cpu_ns is not None and _idle_on_cpu(c.cpu_ns, seconds):
        held = held_in_get(thread, hints.untimed.get(thread.tid, ()))
        if held is not None:
            # blocked in a get with no timeout: as a thread that never woke, it waits for its
            # objects; whoever makes them decides (progressing: waiting, analyze/patterns/calm)
            return RankProgress(proc.pid, STUCK, "counters", (
                f"blocked: in {held}, a get with no timeout, in {thread.samples} samples of "
                f"{seconds:.1f} s ({c.cpu_ns / 1e6:.0f} ms of CPU; its {c.voluntary or 0:,} "
                "wake-ups are the framework's own re-checks inside the get, not a timer of the "
                "program's)"), judged, gpu_text, gpu_state, wakes=0)
        once = hints.sleeps_once.get(thread.tid)
        wakes = _own_wakes(proc, c)
        if once is not None and wakes >= 1:
            # its sleep ended: no loop of its own went round to re-check something, so the
            # next sleep is the next call's or the next item's (a rate limiter, slow storage)
            return RankProgress(proc.pid, PROGRESSING, "sleep", (
                f"asleep {once}, and its sleep ended "
                f"{'once' if wakes == 1 else f'{wakes} times'} in {seconds:.1f} s: a timer no "
                "loop of its own code goes round re-checking, so each sleep is the next call's "
                "or the next item's: slow, not stuck"), judged, gpu_text, gpu_state, wakes=wakes)
    gpu_idle = gpu_state == "idle"
    return replace(_from_counters(proc, thread, seconds, gpu_idle, gpu_text,
                                  thread.tid in hints.readers, thread.tid in hints.iterating,
                                  reads, hints.timers),
                   gpu=gpu_text, gpu_state=gpu_state, mostly=_mostly(thread))


def _mostly(thread: ThreadProgress) -> tuple[str, ...]:
    """The most sampled stack of a thread whose line moved, ``func (file)`` innermost first."""
    return dominant_stack(thread) if _moved(thread) else ()


def dominant_stack(thread: ThreadProgress) -> tuple[str, ...]:
    """The window's most sampled stack of ``thread``, ``func (file)`` innermost first (empty
    where it was never sampled)."""
    if not thread.stacks:
        return ()
    frames = (parse_frame(text) for text in reversed(thread.stacks[0].frames))
    return tuple(f"{f.name} ({f.file})" for f in frames if f.file)


def _reads_mostly(thread: ThreadProgress, reading: tuple[str, int | None] | None) -> bool:
    """Blocked now in a read of a socket with no timer (the kernel's syscall; ``reading``: its
    innermost Python function and line then), and the window's most sampled stack is that
    read: on one line, or a loop that waits there most of the time (a sync fetch inside an
    event loop that takes most of each turn). Not a loop that waits most in a sleep and reads
    between (a health check polling "not ready", a TCPStore ``check`` before each sleep of
    one function: the line tells them apart): where it sleeps is its wait."""
    if reading is None or not thread.stacks:
        return False
    if not _moved(thread):
        return True
    frames = thread.stacks[0].frames
    leaf = parse_frame(frames[-1]) if frames else None
    name, line = reading
    return leaf is not None and leaf.name == name and (
        line is None or leaf.line is None or leaf.line == line)


def _method_thread(proc: ProcessProgress, idle: ThreadProgress) -> ThreadProgress | None:
    """The thread of a producer whose task loop idles (``idle``) that ran a method in the
    window, most sampled there: a threaded actor runs its calls on pool threads, so its
    main thread's loop says nothing of them (a call in flight, or calls coming and going)."""
    def inside(thread: ThreadProgress) -> int:
        return sum(s.count for s in thread.stacks if any(
            runs_method((f := parse_frame(text)).name, f.file) for text in s.frames[:2]))

    counted = [(inside(t), t) for t in proc.threads if t.tid != idle.tid]
    busiest = max(counted, key=lambda item: item[0], default=(0, None))
    return busiest[1] if busiest[0] >= MIN_MOVED_SAMPLES else None


def _between_tasks(thread: ThreadProgress) -> bool:
    """A framework's worker that spent the window in its loop for the next task (a Ray actor
    idle between calls): innermost there in all but stray samples. It does no work and waits
    for nobody's answer, so it is neither progress nor a hang."""
    if not thread.samples:
        return False
    inside = sum(s.count for s in thread.stacks if s.frames and in_task_loop(
        (f := parse_frame(s.frames[-1])).name, f.file))
    return inside > 0 and thread.samples - inside < MIN_MOVED_SAMPLES


def _sites(sites: Sequence[str]) -> str:
    return ", ".join(sites[:2]) + (f" and {len(sites) - 2} more" if len(sites) > 2 else "")


def _gpu_state(states: Sequence[str]) -> str | None:
    """One state for a rank's GPUs: work wins, then a spin; idle only when every one is."""
    if not states:
        return None
    for state in ("work", "spin"):
        if state in states:
            return state
    if all(state == "idle" for state in states):
        return "idle"
    return "busy" if "busy" in states else "unknown"


def _poller(thread: ThreadProgress) -> bool:
    """A Python thread that never left its line (a heartbeat, a monitor, a timed poll): the
    I/O it does is its own polling, not the job's data (a native thread, gloo's, is no poller:
    py-spy sees no line of it)."""
    return thread.samples > 0 and not _moved(thread)


def _ticks(thread: ThreadProgress, consumes: bool = False, timer: bool = False) -> bool:
    """A poller's own tick: a heartbeat's timestamp, a monitor's log line, a supervisor's
    health check (uvicorn's master pings each worker over a pipe and reads its pong every
    0.5 s: a write and a read per worker). Small reads or writes, a few bytes each: the
    bookkeeping of a loop that wakes on its own timer, not the job's data (a heartbeat process
    that only beats moves nothing anyone waits for). The loop is a thread that never left its
    line; or one blocked now in a wait with a deadline (``timer``) whose line left it for
    round trips only, each write answered by a read (a ping and its pong; a loaded machine
    stretches them long enough to be sampled): a loop that sleeps between steps and prints
    each one is a worker's loop, its data moving elsewhere (a gloo ``recv``). Bytes it got
    from a pipe or a socket it waits on (``consumes``) were sent to it: data."""
    io = thread.io
    if io is None or thread.counters is None or (consumes and io.rchar > 0):
        return False
    if not _poller(thread) and not (timer and thread.samples > 0
                                    and 0 < io.syscw <= io.syscr):
        return False
    return io.rchar + io.wchar <= POLL_READ_BYTES * max(io.syscr + io.syscw, 1)


def _data_moved(proc: ProcessProgress, judged: ThreadProgress, consumes: bool = False,
                timers: frozenset[int] = frozenset()) -> IoDelta | None:
    """The I/O of the process beyond what its pollers did: the judged thread's own (unless it
    is a poller's tick), and every thread's that moved its line or runs no Python (unless it
    is a timed loop's tick; ``timers``: threads in a wait with a deadline), but a framework's
    store server's (its coordination, frameworks ``store_threads``). Without per-thread
    counters (recordings from before they were read), the whole process's."""
    if not any(t.io is not None for t in proc.threads):
        return proc.io
    kept = [t.io for t in proc.threads if t.io is not None and (
        not _ticks(t, consumes, t.tid in timers) if t.tid == judged.tid
        else not _poller(t) and not (t.tid in timers and _ticks(t, timer=True))
        and not (t.name or "").startswith(STORE_THREADS))]
    return IoDelta(syscr=sum(i.syscr for i in kept), syscw=sum(i.syscw for i in kept),
                   rchar=sum(i.rchar for i in kept), wchar=sum(i.wchar for i in kept))


def _poll_loop(proc: ProcessProgress, thread: ThreadProgress, seconds: float,
               gpu_state: str | None, consumes: bool = False,
               timers: frozenset[int] = frozenset()) -> bool:
    """Its Python line moves, but only around a loop that waits: idle on CPU, no data moved
    beyond its pollers' own, no GPU work (``while not store.check(k): time.sleep(0.05)``
    alternates two lines forever). The counters judge it then: a timed poll. (A loop whose
    wait moves between a socket read and a sleep is one too: a health check's reads return
    bytes, "not ready"; what it polls says whether that is a hang.)"""
    c = thread.counters
    if c is None or c.cpu_ns is None or gpu_state == "work":
        return False
    io = _data_moved(proc, thread, consumes, timers)
    # It blocks and is woken (a wait), not only preempted (a computing loop the machine starves)
    wakes = _own_wakes(proc, c)
    return (_idle_on_cpu(c.cpu_ns, seconds) and wakes >= MIN_WAKES
            and io is not None and (io.syscr + io.syscw < MIN_WAKES or _rereads(io, consumes)))


def _idle_on_cpu(cpu_ns: int, seconds: float) -> bool:
    """On CPU for less than :data:`IDLE_CPU_SHARE` of the window: it waits."""
    return cpu_ns / 1e9 < IDLE_CPU_SHARE * seconds


def _own_wakes(proc: ProcessProgress, c: CounterDelta) -> int:
    """The thread's wake-ups in the window, less those py-spy's pauses caused."""
    return (c.voluntary or 0) - WAKES_PER_PAUSE * proc.pauses


def _rereads(io: IoDelta, consumes: bool = False) -> bool:
    """Only small reads and no write: a poll re-reading its flag, not data moving; unless the
    thread reads a pipe or a socket (``consumes``) and got bytes: those were sent to it."""
    if consumes and io.rchar > 0:
        return False
    return io.syscw == 0 and io.wchar == 0 and io.rchar <= POLL_READ_BYTES * io.syscr


def _other_worker(proc: ProcessProgress, judged: ThreadProgress,
                  seconds: float) -> ThreadProgress | None:
    """Another thread of the process that computes: it moved its Python line on CPU; or the
    busiest of several that moved theirs and together used that much CPU (a pool's workers
    running many short tasks, each handing the GIL to the next)."""
    moving = [t for t in proc.threads if t.tid != judged.tid and _moved(t)
              and t.counters is not None and t.counters.cpu_ns is not None]
    if not moving:
        return None
    busiest = max(moving, key=lambda t: t.counters.cpu_ns or 0)  # type: ignore[union-attr]
    total = sum(t.counters.cpu_ns or 0 for t in moving)  # type: ignore[union-attr]
    return busiest if total / 1e9 >= IDLE_CPU_SHARE * seconds else None


def _from_counters(proc: ProcessProgress, thread: ThreadProgress, seconds: float,
                   gpu_idle: bool, gpu_text: str | None, consumes: bool = False,
                   walks: bool = False, socket: bool = False,
                   timers: frozenset[int] = frozenset()) -> RankProgress:
    c = thread.counters
    where = (f"one stack in {thread.samples} samples ({_leaf(thread)})" if thread.samples
             else "no Python samples")
    if _moved(thread):  # a loop around a wait: its lines, not one
        where = (f"{len(thread.stacks)} stacks of one waiting loop in {thread.samples} samples "
                 f"({_leaf(thread)})")
    if c is None or c.cpu_ns is None:
        return RankProgress(proc.pid, SLOW, "none",
                            f"{where}; its kernel counters could not be read", thread.tid)
    cpu_s = c.cpu_ns / 1e9
    raw_wakes = c.voluntary if c.voluntary is not None else c.runs or 0
    noise = WAKES_PER_PAUSE * proc.pauses
    wakes = max(0, raw_wakes - noise)
    # A pause wakes the thread into the stop; on a loaded machine it may be preempted on its
    # way there, once per pause at most: that time scheduled in is py-spy's too.
    preempted = min(c.involuntary or 0, proc.pauses)
    runs = max(0, (c.runs if c.runs is not None else raw_wakes) - noise - preempted)
    window = f"{seconds:.1f} s"
    if proc.pauses:
        window += f" (not counting {raw_wakes - wakes} from py-spy's {proc.pauses} pauses)"
    if cpu_s < IDLE_CPU_SHARE * seconds:
        io = _data_moved(proc, thread, consumes, timers)
        # A wait that completes because data came moves some for each wake-up: fewer reads
        # and writes than wake-ups are a timer's wakes beside a stray write (a runtime's
        # native thread logging its stats once a minute, as Ray's core worker does).
        moved = (io is not None and (io.syscw + io.syscr) >= max(MIN_WAKES, wakes)
                 and not _rereads(io, consumes))
        if wakes >= MIN_WAKES and socket:
            # a blocking recv that returned again and again: bytes came (a loop that sleeps
            # most and reads between polls instead: "not ready" is bytes too)
            return RankProgress(proc.pid, PROGRESSING, "counters", (
                f"{where}, but its wait, a read of a socket with no timer, ended {wakes} times "
                f"in {window}: each time bytes came (a socket's recv, which /proc/PID/io does "
                "not count): its waits complete and data moves"), thread.tid, wakes=wakes,
                socket_reads=True)
        if wakes >= MIN_WAKES and moved and io is not None:
            return RankProgress(proc.pid, PROGRESSING, "counters", (
                f"{where}, but its wait ended {wakes} times in {window} and the process made "
                f"{io.syscr + io.syscw:,} reads/writes ({(io.rchar + io.wchar) / 1024:,.0f} KiB):"
                " its waits complete and data moves"), thread.tid, wakes=wakes)
        # Runnable for little of the window: its runs (a pause may preempt a thread on its
        # way into the stop and again on its way back) are not a starved thread's.
        queued_s = c.queued_ns / 1e9 if c.queued_ns is not None else None
        if runs == 0 or (wakes == 0 and queued_s is not None
                         and queued_s < IDLE_CPU_SHARE * seconds):
            # never scheduled but by py-spy: asleep the whole window
            return RankProgress(proc.pid, STUCK, "counters", (
                f"blocked: {where}, {cpu_s * 1000:.0f} ms of CPU and 0 wake-ups in "
                f"{window}"), thread.tid, wakes=0)
        if wakes == 0:  # ran, but only ever lost the CPU to others: runnable, starved
            return RankProgress(proc.pid, SLOW, "counters", (
                f"{where}; it was runnable{_queued(queued_s)} but got only "
                f"{cpu_s * 1000:.0f} ms of CPU in {window} (preempted {c.involuntary or 0:,} "
                "times): the machine is overloaded"),
                thread.tid, wakes=0)
        if not moved and wakes >= MIN_WAKES:
            other = _other_worker(proc, thread, seconds)
            if other is not None:  # it waits while threads of its own compute: its process
                # works (a pool's workers run its tasks, each wake-up a result or the GIL)
                return RankProgress(proc.pid, PROGRESSING, "counters", (
                    f"{where}; it woke {wakes} times in {window} without leaving that line "
                    f"while thread {other.tid} of the same process ran and moved its Python "
                    "line: the process works, it waits for that work"), thread.tid,
                    wakes=wakes)
            # A timer, not an event: woken by its own timeout, it checked and waited again.
            return RankProgress(proc.pid, STUCK, "counters", (
                f"polling without progress: {where}; it woke {wakes} times in {window} "
                f"(every {seconds / wakes * 1000:,.0f} ms) but never left that "
                f"{'loop' if _moved(thread) else 'line'} and no data "
                "moved beyond its own polling: a timed wait that re-checks, not progress"),
                thread.tid, wakes=wakes)
        return RankProgress(proc.pid, SLOW, "counters", (
            f"{where}; it woke once in {window}: a step longer than the window, or a wait "
            "that timed out once"), thread.tid, wakes=wakes)
    busy = (f"the thread ran {cpu_s:.1f} s of CPU and was scheduled {c.runs or 0:,} times in "
            f"{window} in {where}")
    if gpu_idle:
        return RankProgress(proc.pid, STUCK, "counters",
                            f"{busy} while its GPU is idle: a spin-wait, not work", thread.tid)
    extra = f"; {gpu_text}" if gpu_text else ""
    if walks and not _moved(thread):
        # its loop header is too quick to be sampled, but a ``for`` takes the next item each
        # pass: the core computes through them (a spin re-checks a ``while`` instead)
        return RankProgress(proc.pid, PROGRESSING, "source", (
            f"{busy}, its own code's line inside a for loop over items: each pass takes the "
            f"next, it computes{extra}"), thread.tid)
    return RankProgress(proc.pid, SLOW, "counters", f"{busy}: a spin or work{extra}",
                        thread.tid)


def _queued(seconds: float | None) -> str:
    """`` for 1.2 s`` of a run-queue wait; nothing where unknown."""
    return f" for {seconds:.1f} s" if seconds is not None else ""


def decide_all(evidence: ProgressEvidence, gpus_of: Mapping[int, Iterable[int]] | None = None,
               working: Mapping[int, int] | None = None, hints: Hints = NO_HINTS
               ) -> tuple[RankProgress, ...]:
    """Every watched process. ``gpus_of``: pid -> GPU indices it uses; ``working``: pid -> tid;
    ``hints``: as :func:`decide` takes them."""
    by_index = {g.index: g for g in evidence.gpus}
    out = []
    for proc in evidence.processes:
        mine = [by_index[i] for i in (gpus_of or {}).get(proc.pid, ()) if i in by_index]
        tid = (working or {}).get(proc.pid)
        decided = _through_threads(
            proc, decide(proc, evidence.seconds, mine, tid, hints), evidence.seconds, mine, hints)
        out.append(replace(decided, seen=collective_sites(_working_thread(proc, tid))))
    return _peers_answered(evidence, _dispatched_nothing(evidence, out), working or {})


def _dispatched_nothing(evidence: ProgressEvidence,
                        decided: list[RankProgress]) -> list[RankProgress]:
    """A process that progressed only through a framework's scheduler thread
    (``DISPATCH_THREADS``) while no other process of the job progressed: its scheduler went
    round handing out nothing (every worker waits between tasks), which is no work."""
    going = [k for k, r in enumerate(decided) if r.decision == PROGRESSING]
    if len(going) != 1:
        return decided
    r = decided[going[0]]
    proc = next((p for p in evidence.processes if p.pid == r.pid), None)
    schedulers = [t for t in proc.threads if dispatches(t.name) and _moved(t)] \
        if proc is not None else []
    # (its progress is the scheduler's: decided on that thread, or on counters its I/O moved;
    # a line of another thread's own that moved is work of its own)
    if not schedulers or (r.evidence == "python" and r.tid not in {t.tid for t in schedulers}):
        return decided
    out = list(decided)
    out[going[0]] = replace(r, decision=STUCK, reason=(
        f"only thread {schedulers[0].name}, the framework's scheduler, moved ({r.reason}): "
        "while no other process of the job progressed, it handed no work out"))
    return out


def _through_threads(proc: ProcessProgress, decided: RankProgress, seconds: float,
                     gpus: Sequence[GpmReading], hints: Hints) -> RankProgress:
    """A thread that never woke in the window, asleep or joining its own threads (``parked``),
    leaves the work to them: where one of them waits in a read of a socket with no timer and
    its reads ended again and again (bytes came each time), the process progresses through it
    (a client's threads each waiting for the answer to a long poll, then sending the next,
    while the main thread sleeps). A thread blocked elsewhere (a collective, a recv of its
    own) is judged by its own wait: a helper's traffic beside it is no progress of its work."""
    if decided.decision != STUCK or decided.wakes != 0 or decided.tid not in hints.parked:
        return decided
    for thread in proc.threads:
        if thread.tid == decided.tid or thread.tid not in hints.socket_readers or (
                thread.name and HELPER_THREAD_NAMES.match(thread.name)):
            continue  # (a helper's reads, a supervisor's pings answered, are no work)
        other = decide(proc, seconds, gpus, thread.tid, hints)
        if other.decision == PROGRESSING:
            return replace(other, reason=(
                f"thread {thread.tid}{f' ({thread.name})' if thread.name else ''}, while "
                f"thread {decided.tid} sleeps or joins its threads without waking: "
                f"{other.reason}"))
    return decided


def _loop_key(text: str) -> tuple[str, str] | None:
    """(function, file name) of a ``func (file:line)`` frame; None without a file."""
    frame = parse_frame(text)
    return (frame.name, frame.file.rsplit("/", 1)[-1]) if frame.file else None


def _peers_answered(evidence: ProgressEvidence, decided: list[RankProgress],
                    working: Mapping[int, int]) -> tuple[RankProgress, ...]:
    """A poll-loop verdict taken back where a peer completed a collective in the same loop.

    A collective returns only once every member has called it: when rank A's samples pass
    through ``all_reduce at train (x.py:51)`` and on, a rank B whose moving loop is in that
    same function called it too, even if its own samples missed the call (an NCCL launch takes
    microseconds; a 100 Hz window can see only B's sleep and ``.item()``)."""
    loops: dict[tuple[str, str], tuple[int, str]] = {}
    for r in decided:
        if r.decision != PROGRESSING:
            continue
        for site in r.seen:  # "all_reduce at train (x.py:51)"
            key = _loop_key(site.partition(" at ")[2])
            if key is not None:
                loops.setdefault(key, (r.pid, site))
    if not loops:
        return tuple(decided)
    procs = {p.pid: p for p in evidence.processes}
    out = []
    for r in decided:
        thread = _working_thread(procs[r.pid], working.get(r.pid)) if r.pid in procs else None
        peer = None
        if (r.decision == STUCK and r.evidence == "counters" and (r.wakes or 0) >= MIN_WAKES
                and thread is not None and _moved(thread)):
            peer = next((loops[key] for stack in thread.stacks for frame in stack.frames
                         if (key := _loop_key(frame)) in loops), None)
        if peer is None:
            out.append(r)
            continue
        out.append(replace(r, decision=PROGRESSING, evidence="python", reason=(
            f"its loop is the one where PID {peer[0]} completed {peer[1]} in this window: a "
            "collective returns only once every rank has called it (this rank's own call was "
            "too short to be sampled)")))
    return tuple(out)


def _pids(ranks: Sequence[RankProgress]) -> str:
    """``PID 12``, ``PIDs 12, 14``."""
    return ("PID " if len(ranks) == 1 else "PIDs ") + ", ".join(str(r.pid) for r in ranks)


def job_progress(ranks: Sequence[RankProgress]) -> JobProgress:
    """Stuck when a rank is stuck (unless the stuck ones only poll while others progress:
    slow); progressing when every rank is; else slow. A framework's
    worker idle between tasks (decided ``idle`` by the window) counts for neither: the job is
    what the others do, idle only when every one is."""
    ranks = tuple(ranks)
    if not ranks:
        return JobProgress(SLOW, "no process was watched")
    busy = [r for r in ranks if r.decision != IDLE]
    if not busy:
        return JobProgress(IDLE, f"every process waits for work; for example PID "
                           f"{ranks[0].pid}: {ranks[0].reason}", ranks)
    stuck = [r for r in busy if r.decision == STUCK]
    going = [r for r in busy if r.decision == PROGRESSING]
    if stuck and going and all(r.evidence == "counters" and (r.wakes or 0) > 0 for r in stuck):
        # Pollers beside work (a heartbeat, a loop re-checking a flag): the job as a whole is
        # not proven stuck; each poller's own decision stays stuck for the rules to read.
        return JobProgress(SLOW, f"{_pids(going)} progress; {_pids(stuck)} poll without "
                           f"progress: {stuck[0].reason}", ranks)
    if stuck:
        are = "is" if len(stuck) == 1 else "are"
        return JobProgress(STUCK, f"{_pids(stuck)} {are} stuck: {stuck[0].reason}", ranks)
    if len(going) == len(busy):
        kinds = sorted({r.evidence for r in going})
        return JobProgress(PROGRESSING, (
            f"every process progresses (evidence: {', '.join(kinds)}); "
            f"for example PID {going[0].pid}: {going[0].reason}"), ranks)
    slow = [r for r in busy if r.decision == SLOW]
    if not slow:  # some progress, the others wait for it
        waiting = [r for r in busy if r.decision != PROGRESSING]
        return JobProgress(SLOW, f"{_pids(going)} progress; {_pids(waiting)} wait: "
                           f"{waiting[0].reason}", ranks)
    are = "is" if len(slow) == 1 else "are"
    return JobProgress(SLOW, f"{_pids(slow)} {are} slow: not proven hung, nor seen to move: "
                       f"{slow[0].reason}", ranks)


def _unsampled(evidence: ProgressEvidence) -> list[ProcessProgress]:
    """Processes py-spy record could not sample (the process itself was there)."""
    return [p for p in evidence.processes
            if not p.gone and not p.sampled and (p.error or evidence.error)]


def watch_note(evidence: ProgressEvidence) -> str | None:
    """One sentence for the report when the dense sampling was not (fully) there."""
    failed = _unsampled(evidence)
    if not failed:
        return None
    why = evidence.error or failed[0].error
    pids = ", ".join(str(p.pid) for p in failed[:8]) + (", ..." if len(failed) > 8 else "")
    return (f"Progress not measured for PID {pids} (py-spy record: {why}): stuck or moving "
            "comes from the stack samples there.")


def progress_of(evidence: ProgressEvidence, gpus_of: Mapping[int, Iterable[int]] | None = None,
                working: Mapping[int, int] | None = None, hints: Hints = NO_HINTS
                ) -> JobProgress:
    """The job's decision, the window and what could not be watched: Snapshot.progress.

    A process py-spy record could not sample gets no decision: the verdict falls back to its
    stack samples (stuck unless a change was seen), as without the watcher.
    """
    failed = {p.pid for p in _unsampled(evidence)}
    kept = replace(evidence, processes=tuple(p for p in evidence.processes
                                             if p.pid not in failed))
    ranks = decide_all(kept, gpus_of, working, hints)
    job = job_progress(ranks) if ranks else JobProgress(SLOW, "no process was watched")
    return replace(job, seconds=evidence.seconds, note=watch_note(evidence))


def merge_progress(parts: Sequence[JobProgress | None],
                   pids: Sequence[int]) -> JobProgress | None:
    """The nodes' decisions as one job's (``hangscope merge``); None where a node has none or
    a decided PID is also a process of another node (decisions are keyed by PID: one node's
    decision would judge the other's process)."""
    if not parts or any(p is None for p in parts):
        return None
    known = [p for p in parts if p is not None]
    ranks = tuple(r for p in known for r in p.ranks)
    if any(pids.count(r.pid) > 1 for r in ranks):
        return None
    job = job_progress(ranks)
    return replace(job, seconds=min(p.seconds for p in known),
                   note=next((p.note for p in known if p.note), None))
