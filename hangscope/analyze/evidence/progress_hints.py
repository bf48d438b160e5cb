"""What a stack sample says that the progress counters cannot: spin-waits, stream reads, and
loops that walk items.

**Spin-waits**: a thread that burns a core while it waits (``while not ok: os.sched_yield()``).

vLLM's shared-memory ring (``acquire_write`` / ``acquire_read``), hand-written flag spins on a
``multiprocessing.shared_memory`` buffer and lock-free queues wait this way: the thread is on
CPU, its Python line goes round one loop, and no syscall but the yield is made. On every counter
that is a computing loop; what tells them apart is the yield itself: a thread that gives its
core away again and again has nothing to do until someone else changes memory. Native frames
of a dump sample show it (``sched_yield <- os_sched_yield <- <the loop's line>``).

A yield reached through a driver (libcuda spins in ``cudaStreamSynchronize`` with
``sched_yield``) is not counted: the GPU judges that wait (analyze/evidence/progress.py).

**Stream reads**: a thread asleep in a read of a pipe or a socket. Small reads with no write
look like a poll re-reading a flag (SQLite's 16-byte header before each lock try); from a pipe
or a socket they cannot be: every byte read there was sent, and is consumed (a server taking
small messages).

**Socket reads**: a thread blocked reading a socket with no timer (``recv``; CPython's
``poll`` on the socket for a timeout longer than any window, urlopen's 3600 s) wakes only when
bytes come or the peer closes: each wake-up is data, which ``/proc/PID/io`` does not count for
``recv``/``send`` (only ``read``/``write`` are counted). A poll's timed re-check is not such a
read: a ``time.sleep``, a short ``poll`` timeout, an epoll loop's timers.

**Loops that walk items, loops that only wait**: a thread on CPU whose whole window is one
line of its own code (``digest = sha256(digest + block)`` inside ``for step in range(n):``,
the loop header too quick to be sampled). On the counters that is "a spin or work"; the
source tells (``Frame.loop_kind``, collect/loops.py): the line's innermost loop is a ``for``
over items that end, so each pass takes the next one. The other way round, a ``while`` whose
body does nothing (``while not state["ready"]: pass``) goes round two lines that look like a
moving stack, yet only another thread can end it: a spin-wait, as a yield is. A call into a
library (a backtracking regular expression) proves neither: only the program's own line counts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hangscope.model import NO_LOOP, SPIN, WALK, Category, Frame, Process, Thread, in_library
from hangscope.model.waits import SYSCALLS, KernelWaits, TaskSyscall

#: The C functions that give the CPU away and return at once.
YIELDS = frozenset({"sched_yield", "__sched_yield", "pthread_yield", "thrd_yield"})
#: Native code between the yield and the Python frame that called it: the C library and the
#: interpreter (``os_sched_yield``, ``_PyEval_EvalFrameDefault``), nothing else.
_CALLERS = ("libc.so", "libc-", "libpython", "/python3", "ld-linux")


def yields(frames: Iterable[Frame]) -> bool:
    """The innermost frames are a CPU yield called from Python code."""
    seen = False
    for frame in frames:
        if not frame.native:
            return seen
        if frame.name in YIELDS:
            seen = True
        elif not seen or not any(part in (frame.module or frame.file or "")
                                 for part in _CALLERS):
            return False
    return False


def sleep_once(thread: Thread) -> str | None:
    """Where ``thread`` sleeps (:attr:`Hints.sleeps_once`) when its sleep is the program's own
    line and no ``while`` of its own code goes round it; None otherwise (a poll re-checking a
    flag between sleeps, a library's timer, not asleep)."""
    if thread.category is not Category.SLEEP:
        return None
    own = [f for f in thread.frames if not f.native and not in_library(f.file)]
    if not own:
        return None  # a library's own timer (a launcher's monitor loop): not the program's
    k = next((k for k, f in enumerate(own) if f.loops), None)
    holder = own[k] if k is not None else None
    if holder is not None and holder.loop_kind != WALK:
        return None  # a ``while`` (or a loop of unknown kind) re-checks between sleeps
    if any(f.loop_kind != NO_LOOP for f in own[:k]):
        return None  # a frame inside it whose source was not read: it may hold a ``while``
    at = f"at {own[0].name} ({own[0].location})"
    if holder is None:
        return f"{at}, in no loop of its own code"
    first, last = holder.loops[-1]
    return f"{at}, inside a for loop over items ({holder.short_file}:{first}-{last})"


#: Waits for a thread of one's own process: (file suffix, function) of the innermost frame.
_JOINS = (("/threading.py", "_wait_for_tstate_lock"), ("/threading.py", "Thread.join"),
          ("/concurrent/futures/_base.py", "Future.result"), ("/concurrent/futures/_base.py",
                                                                "wait"),
          ("/concurrent/futures/thread.py", "ThreadPoolExecutor.shutdown"))


def joins_threads(thread: Thread) -> bool:
    """Waiting for a thread of its own process to end (``Thread.join``, a ``concurrent.futures``
    result or shutdown)."""
    python = itertools.islice((f for f in thread.frames if not f.native and f.file), 3)
    return any(f.file.endswith(suffix) and f.name == name  # type: ignore[union-attr]
               for f in python for suffix, name in _JOINS)


def parked(thread: Thread) -> bool:
    """Asleep or joining its own process's threads: the work, if any, is theirs."""
    return thread.category is Category.SLEEP or joins_threads(thread)


def _leaf(thread: Thread) -> Frame | None:
    """The thread's innermost Python frame."""
    return next((f for f in thread.frames if not f.native), None)


def spins(thread: Thread) -> str | None:
    """How and where ``thread`` spin-waits, on CPU: caught yielding from Python code, or
    going round a loop of its own code that does nothing; None where it does not."""
    if not (thread.active or thread.state == "R"):
        return None
    leaf = _leaf(thread)
    at = f" at {leaf.name} ({leaf.short_file}:{leaf.line})" if leaf is not None else ""
    if yields(thread.frames):
        return f"yields its core (sched_yield) again and again{at}"
    if leaf is not None and leaf.loop_kind == SPIN:
        return ("goes round a loop whose body does nothing (only another thread can end "
                f"it){at}")
    return None


#: Kernel wait channels of a read of a pipe or a socket (``cat /proc/PID/task/TID/wchan``).
_STREAM_READ = re.compile(r"pipe_read|unix_stream_read|unix_dgram_recv|sk_wait_data|"
                          r"tcp_recvmsg|skb_wait_for_more_packets|udp_recvmsg")


#: A frame's (function, short file, line), as the window's ``func (file:line)`` names it.
Line = tuple[str, "str | None", "int | None"]


@dataclass(frozen=True)
class Hints:
    """Threads (IDs) a stack sample says more of than the counters can: spin-waiting, asleep
    reading a stream, on a line of a ``for`` loop over items."""

    spinning: Mapping[int, str] = field(default_factory=dict)  # how each spins
    readers: frozenset[int] = frozenset()
    iterating: frozenset[int] = frozenset()
    # spinning in a loop of its own code that does nothing: the source proves it, with or
    # without the window's samples (a yield may be a framework's healthy brief spin)
    empty_loops: frozenset[int] = frozenset()
    # blocked reading a socket with no timer: each wake-up brought bytes (or the peer's end);
    # each one's innermost Python function there ("" where it has none)
    socket_readers: Mapping[int, tuple[str, int | None]] = field(default_factory=dict)
    # the program's own lines (name, short file, line) that call a framework's object get with
    # no timeout (``Frame.untimed``), per thread: such a get returns only with its objects
    untimed: Mapping[int, frozenset[Line]] = field(default_factory=dict)
    # asleep in a timed sleep (``time.sleep``) of the program's own line that no loop of its
    # own code goes round (none holds it, or the innermost that does is a ``for`` over items):
    # a wake-up ends a sleep that only the next call or the next item begins again; each
    # one's words: where it sleeps and what holds it
    sleeps_once: Mapping[int, str] = field(default_factory=dict)
    # blocked in a wait with a deadline of its own (a timed futex: ``Event.wait(0.5)``; a
    # ``time.sleep``): its own timer wakes it, so what it does between such waits (a
    # supervisor's ping to each worker and the pong) is its own initiative, not data it got
    timers: frozenset[int] = frozenset()
    # per process: its TCP connection that data went through last, "TCP a -> b", how many
    # ms before the kernel's read, and when data last went the other way (tcp_info)
    tcp_moved: Mapping[int, tuple[str, int, int]] = field(default_factory=dict)
    # parked: asleep (``time.sleep``) or joining threads of its own process (``Thread.join``,
    # a ``concurrent.futures`` result): a main thread that leaves the work to its threads
    parked: frozenset[int] = frozenset()


#: A poll timeout (ms) that no window outlasts: a wait for data, not a timed re-check.
_UNTIMED_POLL_MS = 60_000


def _reads_socket(call: TaskSyscall, sockets: set[int], arch: str) -> bool:
    """Blocked in a read of a socket fd, or in ``poll`` for input on socket fds only, for
    longer than any window (``timeout`` -1 reads as the register's unsigned value)."""
    table = SYSCALLS.get(arch, {})
    if call.nr in table.get("read", ()) and call.args:
        return call.args[0] in sockets
    # A poll a ptrace stop (py-spy's) interrupted goes on as restart_syscall, its registers
    # still holding poll's arguments: the collector read its fds only where the wait channel
    # said poll, so a restarted call with fds is that poll (CI read the loop of a healthy
    # service "polling without progress" when the dump's pause had just restarted it).
    # (ppoll's third argument is a pointer: a user address, above 32 bits, is not poll's)
    restarted = (call.nr in table.get("restart", ()) and bool(call.polled)
                 and len(call.args) > 2 and call.args[2] >> 32 in (0, 0xFFFFFFFF))
    if call.nr not in table.get("poll_ms", ()) and not restarted:
        return False  # ppoll's timeout is a pointer, unread: it may be a short one
    # (a negative timeout, none, reads as 2**32 - 1 once masked: above the bound too)
    timeout = call.args[2] & 0xFFFFFFFF if len(call.args) > 2 else 0
    return timeout >= _UNTIMED_POLL_MS and bool(call.polled) and all(
        fd in sockets and events & 1 for fd, events in call.polled)


def socket_readers(kernel: KernelWaits | None) -> frozenset[int]:
    """Threads blocked reading a socket with no timer (:func:`_reads_socket`)."""
    out: set[int] = set()
    for proc in kernel.processes if kernel is not None else ():
        sockets = {r.fd for r in proc.fds if r.target.startswith("socket:")}
        out.update(c.tid for c in proc.syscalls if _reads_socket(c, sockets, kernel.arch))
    return frozenset(out)


def timed_waits(processes: Iterable[Process], kernel: KernelWaits | None,
                sleeps: bool = False) -> frozenset[int]:
    """Threads (IDs) blocked in a futex wait that has a deadline: its fourth argument points
    to it (Python's ``Condition.wait(timeout)``, ``Event.wait(timeout)``, ``Queue.get(timeout=)``);
    a timed futex that a ptrace stop interrupted goes on as ``restart_syscall`` (an untimed
    one restarts as ``futex``). ``sleeps``: ``clock_nanosleep`` (``time.sleep``) too."""
    table = SYSCALLS.get(kernel.arch) if kernel is not None else None
    if kernel is None or table is None:
        return frozenset()
    futex = table["futex"] | table["restart"]
    wchan = {t.tid: t.wchan or "" for p in processes for t in p.threads}
    return frozenset(c.tid for pf in kernel.processes for c in pf.syscalls
                     if (c.nr in futex and len(c.args) > 3 and c.args[3] != 0
                         and wchan.get(c.tid, "").startswith("futex"))
                     or (sleeps and c.nr in table["clock_nanosleep"]))


def hints_of(processes: Iterable[Process], kernel: KernelWaits | None = None) -> Hints:
    """What the last stack samples of these processes say of their threads; ``kernel``: the
    syscalls their blocked threads are in."""
    spinning: dict[int, str] = {}
    readers: set[int] = set()
    loops: dict[str, set[int]] = {WALK: set(), SPIN: set()}
    on_sockets = socket_readers(kernel)
    sockets: dict[int, tuple[str, int | None]] = {}
    untimed: dict[int, frozenset[Line]] = {}
    once: dict[int, str] = {}
    parks: set[int] = set()
    procs = list(processes)
    for thread in (t for p in procs for t in p.threads):
        if parked(thread):
            parks.add(thread.tid)
        if where := sleep_once(thread):
            once[thread.tid] = where
        if lines := frozenset((f.name, f.short_file, at) for f in thread.frames
                              for at in ((f.line,) if f.untimed else ()) + f.loop_gets):
            untimed[thread.tid] = lines
        leaf = _leaf(thread)
        if thread.tid in on_sockets:
            sockets[thread.tid] = (leaf.name, leaf.line) if leaf is not None else ("", None)
        if how := spins(thread):
            spinning[thread.tid] = how
        if thread.wchan and _STREAM_READ.search(thread.wchan):
            readers.add(thread.tid)
        if leaf is not None and leaf.loop_kind in loops:
            loops[leaf.loop_kind].add(thread.tid)
    return Hints(spinning, frozenset(readers), frozenset(loops[WALK]),
                 frozenset(loops[SPIN] & spinning.keys()), sockets, untimed, once,
                 timed_waits(procs, kernel, sleeps=True), tcp_moved(kernel), frozenset(parks))


def tcp_moved(kernel: KernelWaits | None) -> dict[int, tuple[str, int, int]]:
    """Per process, the established TCP connection of it whose data moved last: when (ms
    before the read: tcp_info's ``last_data_sent``/``last_data_recv``, the nearer), and when
    data last went the other way (the farther)."""
    if kernel is None:
        return {}
    conns = {c.inode: c for c in kernel.tcp if c.state == 1
             and c.last_sent_ms is not None and c.last_recv_ms is not None}
    out: dict[int, tuple[str, int, int]] = {}
    for proc in kernel.processes:
        mine = [conns[r.inode] for r in proc.fds if r.inode in conns]
        if mine:
            last = min(mine, key=lambda c: min(c.last_sent_ms or 0, c.last_recv_ms or 0))
            ages = sorted((last.last_sent_ms or 0, last.last_recv_ms or 0))
            out[proc.pid] = (f"TCP {last.local} -> {last.remote}", ages[0], ages[1])
    return out
