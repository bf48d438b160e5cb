"""More calls wait on a server than its handler pool has workers, every worker blocked.

A gRPC server built on ``ThreadPoolExecutor(max_workers=N)`` runs each call on one worker for
the call's whole life: a server stream that waits for its next event keeps its worker as long
as it stays open; a Starlette/FastAPI app's sync endpoints run on AnyIO's worker threads, 40
at once, each for its request's life (a long poll that waits on an Event keeps its thread).
With every worker blocked inside a handler, the calls beyond the pool's size wait in its
queue, unseen: no thread of the server runs them, and their clients wait in their call
(grpc#7052, #8616: "bounded server thread pools considered harmful"; anyio#721). A
handler that waits for what a queued call would do (a watch notified by a publish) never
returns at all. An asyncio server's blocking handlers in its loop's default executor starve
the loop's own uses of it the same way (a DNS lookup: cpython#112169). The stacks count both
sides: the clients' threads inside a call to the server's port (the kernel's TCP pairs), the
server's workers inside their handlers.

The client's side has one thread of its own that nothing may hold: gRPC's channel thread,
which delivers every response of its channel and runs their done-callbacks. A callback that
blocks there on another call's result waits for itself (``callback_self_wait``, grpc#21716).
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.classify import user_code
from hangscope.analyze.evidence.signatures import POOL_WORKER_LOOPS, frame_text
from hangscope.analyze.graph.grpcedges import in_grpc_call
from hangscope.analyze.graph.loopedges import idle_loop
from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.patterns.selfcalls import calls_out, pool_words, saturated_workers
from hangscope.frameworks.grpc import CALL_WAITS, CHANNEL_FILE
from hangscope.model import Category, Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

#: The pools a server runs its handlers on, and what to do when long waits fill one: gRPC's
#: ThreadPoolExecutor; AnyIO's worker threads, which run a Starlette/FastAPI app's sync
#: endpoints (40 at once by default: the thread limiter's tokens, anyio#721, fastapi#4221).
_GRPC_ADVICE = ("Give the server more workers than the calls it holds at once (max_workers), "
                "cap them (maximum_concurrent_rpcs), or serve streams with grpc.aio")
_ANYIO_ADVICE = ("Make the endpoints that wait async (async def, await the event), or raise "
                 "the limit (anyio.to_thread.current_default_thread_limiter().total_tokens)")


#: asyncio's default executor (``loop.run_in_executor(None, ...)``, ``asyncio.to_thread``,
#: ``loop.getaddrinfo``): one ThreadPoolExecutor of min(32, CPUs + 4) threads named
#: ``asyncio_N`` (asyncio/base_events.py).
_LOOP_EXECUTOR = re.compile(r"^asyncio_\d+$")


def _loop_advice(g: Graph, server: Process, workers: list[Thread]) -> str | None:
    """The words for a full pool that is the loop's default executor, its loop idle: what
    would end the handlers' waits awaits, and whatever it awaits from that executor (a DNS
    lookup: cpython#112169) is queued behind them; None for another pool."""
    if not all(_LOOP_EXECUTOR.match(t.name or "") for t in workers):
        return None
    loop = next((t for t in server.threads if idle_loop(t)), None)
    if loop is None:
        return None
    idle = f" for {loop.off_cpu_s:.1f} s" if (loop.off_cpu_s or 0) >= 1 else ""
    unresolved = _unconnected_url(g, server)
    lookup = (f"; the last URL its output names, {unresolved[0]}, has a host name, and it "
              f"holds no connection to port {unresolved[1]}, where this host listens: that "
              "request never connected, its name's lookup most likely queued there"
              if unresolved else "")
    return ("The pool is the event loop's default executor (asyncio_N: min(32, CPUs + 4) "
            "threads), where run_in_executor(None, ...) runs the handlers' blocking calls, and "
            f"the loop (thread {loop.name or loop.tid}) idles in its selector{idle}: what "
            "would end their waits awaits something itself, and whatever a coroutine awaits "
            "from the same executor is queued behind the blocked handlers for ever: a DNS "
            "lookup (loop.getaddrinfo, which asyncio's open_connection and aiohttp's default "
            f"ThreadedResolver call), asyncio.to_thread, run_in_executor(None, ...) "
            f"(cpython#112169){lookup}. Give the blocking calls an executor of their own "
            "(run_in_executor(pool, ...)), make them async (await a Future the loop sets), or "
            "keep the lookups off the executor (an IP address, aiodns)")


#: A URL whose host is a name (``http://localhost:8000/embed``), not an address.
_NAMED_URL = re.compile(r"\b(?:https?|wss?)://(?P<host>[A-Za-z][\w.-]*):(?P<port>\d{1,5})\S*")


def _unconnected_url(g: Graph, proc: Process) -> tuple[str, str] | None:
    """The URL the last line of ``proc``'s output naming one names, where its host is a name,
    something on this host listens on its port, and ``proc`` holds no TCP connection to that
    port: a request that is still resolving the name (or never began). (The URL, its port.)"""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    host = g.snap.host_of(proc)
    read = kernel.process(proc.pid) if kernel is not None else None
    if read is None or host is None:
        return None
    url = next((m for line in reversed(proc.log_tail) if (m := _NAMED_URL.search(line))), None)
    if url is None or int(url.group("port")) not in host.listening_ports:
        return None
    mine = {r.inode for r in read.fds}
    port = f":{url.group('port')}"
    if any(c.inode in mine and c.remote.endswith(port) for c in kernel.tcp):  # type: ignore[union-attr]
        return None
    return url.group(0), url.group("port")


def _pool(g: Graph, server: Process) -> tuple[list[Thread], str]:
    """The server's handler pool where every worker runs a handler blocked inside it, and the
    advice for it; ([], "") where none is full."""
    workers = saturated_workers(server)
    if workers:
        return workers, _loop_advice(g, server, workers) or _GRPC_ADVICE
    anyio = [t for t in server.threads if any(
        not f.native and POOL_WORKER_LOOPS.search(frame_text(f)) for f in t.frames)]
    if anyio and all(blocked(t) and any(map(user_code, t.frames)) and t.category in (
            Category.IPC_WAIT, Category.LOCK) for t in anyio):
        return anyio, _ANYIO_ADVICE
    return [], ""


def _calls(g: Graph, server: Process) -> list[tuple[Process, Thread]]:
    """The client threads of the job waiting inside a call to ``server``: in gRPC's blocking
    call or response wait on a connection to its port, or blocked reading a TCP connection to
    it (an HTTP request's response)."""
    found: dict[tuple[int, int], tuple[Process, Thread]] = {}
    for proc in g.snap.processes:
        if proc is server or not calls_out(g.snap, proc, (server,)):
            continue
        for t in proc.threads:
            if blocked(t) and in_grpc_call(t.frames):
                found[(proc.pid, t.tid)] = (proc, t)
    for e in g.edges:  # (a library's own thread on the connection is no call of the program)
        t = g.threads.get((e.pid, e.tid)) if e.kind == "tcp" and e.to_pid == server.pid \
            and e.pid != server.pid else None
        if t is not None and not t.helper and any(map(user_code, t.frames)):
            found.setdefault((e.pid, e.tid), (g.procs[e.pid], t))
    return list(found.values())


def overbooked_pool(g: Graph) -> WaitPattern | None:
    """The first server of the job with more calls waiting on it than its handler pool has
    workers, every worker running a handler blocked inside it."""
    if not g.has_file("concurrent/futures/thread.py") and not g.has_file(
            "anyio/_backends/_asyncio.py"):
        return None
    for server in g.snap.processes:
        workers, advice = _pool(g, server) if server.listening and not server.is_exited \
            else ([], "")
        calls = _calls(g, server) if workers else []
        if len(calls) <= len(workers):
            continue
        names, at = pool_words(server, workers)
        by_proc: dict[int, list[tuple[Process, Thread]]] = {}
        for p, t in calls:
            by_proc.setdefault(p.pid, []).append((p, t))
        waiting = "; ".join(
            f"{thread_words(*mine[0])}{site_words(mine[0][1])}" if len(mine) == 1 else
            f"{len(mine)} threads of {who(mine[0][0])}{site_words(mine[0][1])}"
            for mine in list(by_proc.values())[:3])
        more = f" and {len(by_proc) - 3} more processes" if len(by_proc) > 3 else ""
        queued = len(calls) - len(workers)
        chain = (f"{len(calls)} calls wait on {who(server)} ({waiting}{more}), and all "
                 f"{len(workers)} worker threads of its handler pool ({names}) run handlers "
                 f"blocked inside them{at}: {queued} of the calls "
                 f"{'waits' if queued == 1 else 'wait'} for a free worker until a handler "
                 "returns, and a stream or a wait that never ends keeps its worker for good (a "
                 f"handler that waits for what a queued call would do never returns). {advice}")
        members = (server.pid, *dict.fromkeys(p.pid for p, _ in calls))
        return WaitPattern("overbooked_pool", members, chain, (), server.pid, workers[0].tid)
    return None


#: gRPC's channel thread: it delivers every response of its channel and runs their
#: done-callbacks (``_run_channel_spin_thread.<locals>.channel_spin``, grpc/_channel.py).
_CHANNEL_SPIN = "channel_spin"


def callback_self_wait(g: Graph) -> WaitPattern | None:
    """A done-callback on gRPC's channel thread that blocks on another call's result of the
    same channel: that thread alone delivers the response it waits for (grpc#21716)."""
    if not g.has_file(CHANNEL_FILE):
        return None
    for proc in g.snap.processes:
        for thread in proc.threads if not proc.is_exited else ():
            frames = [f for f in thread.frames if not f.native and f.file]
            spin = next((k for k, f in enumerate(frames) if f.file.endswith(CHANNEL_FILE)  # type: ignore[union-attr]
                         and f.name.rsplit(".", 1)[-1] == _CHANNEL_SPIN), None)
            wait = next((k for k, f in enumerate(frames) if f.file.endswith(CHANNEL_FILE)  # type: ignore[union-attr]
                         and f.name in CALL_WAITS), None)
            if spin is None or wait is None or wait > spin or not blocked(thread):
                continue
            own = next((f for f in frames[wait + 1:spin] if user_code(f)), None)
            if own is None:
                continue
            chain = (f"thread {thread.name or thread.tid} of {who(proc)}, gRPC's channel thread, "
                     f"which delivers every response of its channel and runs their "
                     f"done-callbacks, waits in {frames[wait].name} at {own.name} "
                     f"({own.short_file}:{own.line}), a done-callback, for the response of "
                     "another call on the same channel: only this thread can deliver it, so it "
                     "waits for itself (grpc#21716). Never block in a done-callback: chain the "
                     "next call with add_done_callback, or hand the work to an executor")
            return WaitPattern("callback_self_wait", (proc.pid,), chain, (), proc.pid,
                               thread.tid)
    return None
