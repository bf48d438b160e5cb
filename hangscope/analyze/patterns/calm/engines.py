"""An idle serving engine: its front end waits for requests with no connection open, and
every other process of the job waits at the head of its loop for the next message.

A serving engine (SGLang: tokenizer manager -> schedulers -> detokenizer; vLLM: API server ->
EngineCore -> workers) is a chain of processes that each wait for the one before; between
requests every one of them is blocked, and none of them "waits for nobody in the job"
(analyze/patterns/calm/calm.py's roots). What settles it is a kernel fact about the front end:
a request in flight holds a connection to its listening port (the client's, accepted, or one
in the accept queue). With none, and nothing stopped, dead or computing behind it, no one has
asked the engine for anything: idle, not stuck. A real hang inside the engine shows as one of
the exceptions (a stopped or dead process, a thread in a lock or a collective, a request
connection still open).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hangscope.analyze.evidence.classify import user_code
from hangscope.analyze.evidence.progress import SLOW, STUCK
from hangscope.analyze.evidence.signatures import pool_loop
from hangscope.analyze.evidence.stackmemo import Frames, per_stack
from hangscope.analyze.graph.threadedges import at_loop_head
from hangscope.frameworks import REPLY_WAITS, SERVE_WAITS, frame_at
from hangscope.frameworks.grpc import SERVER_FILE, STREAM_RUNS
from hangscope.model import Category, Process, Snapshot, Thread
from hangscope.model.progress import RankProgress
from hangscope.model.waits import KernelWaits, TcpConnection, WaitEdge, port_of

#: The innermost Python frame of a server that waits for its next request or connection.
WAITS_FOR_WORK = re.compile(
    r"^(?:\S+\.)?(?:select|poll) \((?:[^)]*/)?selectors\.py\)|"
    r"^(?:\S+\.)?(?:accept|_accept) \((?:[^)]*/)?socket\.py\)")
#: The loop around it: an event loop's or a socket server's.
SERVES = re.compile(r"\((?:[^)]*/)?(?:asyncio/base_events\.py|asyncio/runners\.py|"
                    r"socketserver\.py)\)")
#: The innermost Python frame of a thread whose event loop runs in C (uvloop, which vLLM's
#: and SGLang's servers use): no Python frame of the loop's own, only the call that started it.
NATIVE_LOOP = re.compile(r"^(?:\S+\.)?(?:run|run_until_complete|run_forever) "
                         r"\((?:[^)]*/)?asyncio/(?:runners|base_events)\.py\)")
#: The native frame such a loop waits in for its next event.
_POLLS = re.compile(r"^(?:epoll_wait|epoll_pwait2?|poll|ppoll|select|pselect6?)$")
#: The frame of a hand-off queue's get (queue.Queue, or multiprocessing's over a pipe it reads
#: on another thread): a thread there waits for what another thread of its process receives.
_HAND_OFF = re.compile(r"^(?:\S+\.)?get \((?:[^)]*/)?queue\.py\)")
#: The get of a multiprocessing queue (its reader lock, then its pipe): a thread blocked on
#: that lock waits for its turn to read the next message, which a sibling reader waits for.
_MP_QUEUE_GET = re.compile(r"^(?:\S+\.)?get \((?:[^)]*/)?multiprocessing/queues\.py\)")
#: CPU (% of one core) under which a process is taken as waiting.
_WAITING_CPU = 5.0
#: What a process of an idle engine may be blocked in: the next message, or its timed poll.
_WAITS = frozenset({Category.IPC_WAIT, Category.IDLE, Category.SLEEP, Category.IO})


def python_names(thread: Thread) -> list[str]:
    """The thread's Python frames as ``func (file)`` labels, innermost first."""
    return [f"{f.name} ({f.file})" for f in thread.frames if not f.native]


def serving_thread(proc: Process) -> Thread | None:
    """The thread of ``proc`` that waits in a server loop for its next request: in Python's
    selector, or in a native loop's poll under the call that started it (by its native
    frames, or, where none were taken, by the kernel's wait channel: a process read without
    pausing it has a Python stack only)."""
    for thread in proc.threads:
        if serves(thread.frames) or (_starts_native_loop(thread.frames) and thread.state == "S"
                                     and (thread.wchan or "").startswith(_POLL_WCHANS)):
            return thread
    # A framework that serves on its own threads (gRPC: a poller in C, a pool for the
    # handlers) has no Python loop to find: its main thread's serve-until-stopped call stands
    # for it (frameworks ``serve_waits``).
    return next((t for t in proc.threads if serves_until_stop(t.frames)), None)


@per_stack
def serves_until_stop(frames: Frames) -> bool:
    """A thread with these frames blocks in a framework's serve-until-stopped call."""
    return any(not f.native and frame_at(f.name, f.file, SERVE_WAITS) for f in frames)


#: The kernel's wait channels of a thread inside epoll_wait, poll or select.
_POLL_WCHANS = ("do_epoll_wait", "ep_poll", "poll_schedule_timeout", "do_select", "do_sys_poll")


@per_stack
def may_serve(frames: Frames) -> bool:
    """A thread with these frames may be a server loop's (``serving_thread`` decides, with
    the kernel's wait where no native frame was taken): a cheap filter per distinct stack."""
    return serves(frames) or _starts_native_loop(frames)


@per_stack
def _starts_native_loop(frames: Frames) -> bool:
    """A Python stack alone (no native frame taken) whose innermost frame started an event
    loop that runs in C (uvloop): where it waits, only the kernel says."""
    names = [f"{f.name} ({f.file})" for f in frames if not f.native]
    return bool(names) and len(names) == len(frames) and any(SERVES.search(n) for n in names) \
        and bool(NATIVE_LOOP.search(names[0]))


@per_stack
def serves(frames: Frames) -> bool:
    """A thread with these frames waits in a server loop for its next request (a fact of
    the stack alone: read once per distinct stack, not per rank of a job of 131,072)."""
    names = [f"{f.name} ({f.file})" for f in frames if not f.native]
    if not names or not any(SERVES.search(n) for n in names):
        return False
    return bool(WAITS_FOR_WORK.search(names[0]) or (
        NATIVE_LOOP.search(names[0]) and _in_native_poll(frames)))


def _in_native_poll(frames: Frames) -> bool:
    """The thread's innermost frame is a native poll: its loop waits for the next event (a
    Python callback running would show its own frames above the loop's start)."""
    first = frames[0] if frames else None
    return first is not None and first.native and bool(_POLLS.match(first.name))


def waits_for_message(proc: Process, thread: Thread) -> bool:
    """``thread`` waits for its process's next message: on a socket or pipe itself, or on a
    hand-off queue that another thread of the process fills from one (vLLM's EngineCore: its
    main thread in ``Queue.get``, its input thread in zmq's poll). Not a wait for the replies
    to a call it sent its workers (frameworks ``reply_waits``): it has a request in hand."""
    if thread.category in _WAITS:
        return not awaits_replies(thread)
    if thread.category is Category.LOCK and any(
            _MP_QUEUE_GET.search(n) for n in python_names(thread)[:3]):
        return True  # (its sibling reader holds the queue's lock, reading its pipe)
    if thread.category is not Category.LOCK or not any(
            _HAND_OFF.search(n) for n in python_names(thread)[:3]):
        return False
    return any(t is not thread and t.category in (Category.IPC_WAIT, Category.IDLE)
               and python_names(t) for t in proc.threads)


def awaits_replies(thread: Thread) -> bool:
    """The thread waits for its workers' replies to a call it sent (frameworks
    ``reply_waits``: vLLM's EngineCore inside ``collective_rpc``)."""
    return any(not f.native and f.name.rsplit(".", 1)[-1] == name and path in (f.file or "")
               for f in thread.frames[:12] for name, path in REPLY_WAITS)


def tcp_ports(proc: Process) -> set[int]:
    """The TCP ports ``proc`` listens on."""
    return {s.port for s in proc.listening if s.kind.startswith("tcp") and s.port}  # v4, v6


def open_requests(kernel: KernelWaits, ports: set[int]) -> int:
    """Connections of the job whose local end is one of the listening ``ports``: accepted
    requests the front end holds open; not one whose server end spoke last, all it got read
    (``tcp_info``: a keep-alive client answered, a WebSocket subscriber after its upgrade):
    an answered connection holds no request."""
    ends = {(c.local, c.remote): c for c in kernel.tcp}
    return sum(1 for c in kernel.tcp if port_of(c.local) in ports
               and not _answered(c, ends.get((c.remote, c.local))))


def _answered(conn: TcpConnection, peer: TcpConnection | None) -> bool:
    """The server end of ``conn`` sent after it last received and read all it received, and
    the client's end (a process of the job) read all of the answer (the same tick orders
    nothing, an answer unread is still being given: not answered)."""
    return (conn.last_sent_ms is not None and conn.last_recv_ms is not None
            and conn.last_sent_ms < conn.last_recv_ms and conn.unread == 0
            and peer is not None and peer.unread == 0)


def idle_front(snap: Snapshot, edges: Sequence[WaitEdge] | None = None
               ) -> tuple[Process, set[int]] | None:
    """The job's front end and its ports, where the whole engine waits for requests; None
    where anything says otherwise. ``edges``: the wait-for edges, where the snapshot holds no
    graph yet."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    if kernel is None or len(snap.host_names) > 1:
        return None
    if edges is None:
        edges = snap.wait_graph.edges if snap.wait_graph is not None else ()
    if _both_ends_read(edges):
        return None  # nobody can send on that connection: no request it waits for comes
    live = [p for p in snap.processes if not p.is_exited]
    fronts = [(p, ports) for p in live if (ports := tcp_ports(p)) and serving_thread(p)]
    if len(fronts) != 1:
        return None
    front, ports = fronts[0]
    if any(s.pending for s in front.listening) or (
            open_requests(kernel, ports) and not _serves_no_call(front)) or _handles(front):
        return None  # a request is in flight (or a client waits to be accepted)
    by_pid = {r.pid: r for r in snap.progress.ranks} if snap.progress else {}
    for proc in live:
        measured = by_pid.get(proc.pid)
        # A reader that spins (sched_yield) in its framework's own wait for a message for a
        # while after the last one burns CPU waiting (vLLM's Worker, seconds after a call)
        spins = measured is not None and measured.spins and proc is not front
        if proc.is_stopped or proc.state == "D" or (
                (proc.cpu_percent or 0.0) >= _WAITING_CPU and not spins):
            return None
        if proc is front:
            continue
        if measured is not None and measured.decision not in (STUCK, SLOW):
            return None  # it moved: the engine works
        # (slow: woken by its own timed poll, its stack never changed, its CPU near nothing)
        thread = proc.working_thread
        if thread is not None and not waits_for_message(proc, thread):
            return None  # a lock, a collective, a compute loop: not a wait for a message
    return front, ports


def _both_ends_read(edges: Sequence[WaitEdge]) -> bool:
    """Two threads of the job each blocked in a read of one end of the same connection (each
    edge names the thread blocked on the other end): neither will send, whichever spoke last
    (an HTTP/1.1 response without a length, read until the connection closes, on a keep-alive
    connection whose server reads for the next request)."""
    reads = {(e.pid, e.tid, e.to_pid, e.to_tid) for e in edges
             if e.kind in ("tcp", "unix") and e.to_tid is not None
             and e.how.startswith(("recv", "read"))}
    return any((b, bt, a, at) in reads for a, at, b, bt in reads)


def _handles(front: Process) -> bool:
    """A pool's worker thread of the front end runs a task (classify: no helper while it runs
    the program's code): a request's handler (a sync endpoint, a streaming response's
    iterator on AnyIO's thread), in flight even where the server spoke last on its connection
    and the kernel's facts read it answered (the body of a streamed answer still to come)."""
    return any(t.python and not t.helper and _pool_worker(t.frames) for t in front.threads)


@per_stack
def _pool_worker(frames: Frames) -> bool:
    return any(map(pool_loop, frames))


def _serves_no_call(front: Process) -> bool:
    """A front end its framework's threads serve (gRPC: its main thread in the serve-until-
    stopped call) runs each call on a thread of its pool, the handler's frames the program's
    own, and its clients keep their connections (HTTP/2 channels) between calls: there an
    open connection is no request, a running handler is. None runs: every Python thread of it
    is the framework's helper, runs none of the program's code, or waits at the head of the
    program's own loop (a collector reading its workers' results)."""
    thread = serving_thread(front)
    return thread is not None and serves_until_stop(thread.frames) and all(
        t.helper or t.tid == thread.tid or not any(map(user_code, t.frames)) or at_loop_head(t)
        for t in front.threads if t.python)


def idle_reason(front: Process, ports: set[int], measured: RankProgress) -> str:
    """Why a process of an idle engine is idle, in one clause."""
    port = ", ".join(str(p) for p in sorted(ports))
    serving = serving_thread(front)
    none = ("no handler running a call" if serving is not None
            and serves_until_stop(serving.frames) else "no connection open")
    return (f"waits for work: the job's front end (PID {front.pid}) waits for requests on "
            f"port {port} with {none}, and nothing in the job is stopped, dead or "
            f"computing: {measured.reason.removeprefix('blocked: ')}")


def serves_until_stopped(proc: Process, thread: Thread) -> bool:
    """``thread`` blocks in a framework's serve-until-stopped call (gRPC's
    ``wait_for_termination``) while the process listens, and every other Python thread of it
    with a stack is the framework's helper (its poller, pool workers waiting for a call): the
    framework's threads serve, and none runs a request now."""
    if not proc.listening or not serves_until_stop(thread.frames):
        return False
    return all(t.helper or t.tid == thread.tid or not any(map(user_code, t.frames))
               or idle_stream(t)
               for t in proc.threads if t.python)  # (a handler runs the servicer's code: no)


def idle_stream(thread: Thread) -> bool:
    """A server stream's handler blocked in a wait to be notified inside the servicer (a watch
    between events): a subscription with nothing to send yet, no request being worked on."""
    return thread.state != "R" and thread.category is Category.LOCK and any(
        not f.native and f.name.rsplit(".", 1)[-1] == STREAM_RUNS
        and (f.file or "").endswith(SERVER_FILE) for f in thread.frames)
