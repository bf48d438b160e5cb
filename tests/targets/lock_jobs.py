"""Real jobs hung on Python locks and thread-to-thread waits (issue 17, locks and threads).

    python lock_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in
(verdict_support.py's handshake). Modes, each the mechanism of a real report (the tests cite it):

- ``abba_store``     a record store: a writer thread takes ``index_lock`` then ``journal_lock``,
                     the compactor thread ``journal_lock`` then ``index_lock``; two reader
                     threads queue on ``index_lock``; a child client waits on a Unix socket for
                     the writer's reply (the cycle inside a longer chain).
- ``handler_lock``   the main thread holds a module lock while it waits in select() on a pipe;
                     the test sends SIGUSR2, whose handler takes the same lock (one thread
                     deadlocks itself).
- ``dead_producer``  the main thread waits on a queue.Queue that a producer thread should fill;
                     the producer raised before its first put (its traceback is in the output).
- ``fork_feeder``    the parent forks a multiprocessing child (fork start method) while a
                     thread of the parent holds the registry lock; the child starts a queue
                     feeder thread, then waits on the inherited lock; the parent joins it.
- ``lost_future``    an asyncio server's handler awaits a future that its dispatcher task
                     should set; the dispatcher died of an exception (never retrieved); a
                     client child waits over TCP for the reply while the loop idles.
- ``pool_self``      a one-worker ThreadPoolExecutor's task submits a second task to the
                     same pool and waits on its result; the main thread waits on the first.
- ``loop_callback``  an asyncio loop callback (call_soon) blocks on
                     ``run_coroutine_threadsafe(coro, its own loop).result()``; the loop's
                     default executor has an idle worker thread.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue
import select
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODE, READY, WORKDIR = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def forever() -> None:
    while True:
        time.sleep(3600)


# -- abba_store ------------------------------------------------------------------------


class RecordStore:
    """Records by key, and a journal of the writes; both behind their own lock."""

    def __init__(self) -> None:
        self.index_lock = threading.Lock()
        self.journal_lock = threading.Lock()
        self.records: dict[str, bytes] = {}
        self.journal: list[str] = []
        self.writer_in = threading.Event()
        self.compactor_in = threading.Event()

    def write(self, key: str, value: bytes) -> None:
        with self.index_lock:
            self.records[key] = value
            self.writer_in.set()
            self.compactor_in.wait()
            with self.journal_lock:
                self.journal.append(key)

    def compact(self) -> None:
        with self.journal_lock:
            self.compactor_in.set()
            self.writer_in.wait()
            with self.index_lock:
                self.journal = [k for k in self.journal if k in self.records]

    def read(self, key: str) -> bytes | None:
        with self.index_lock:
            return self.records.get(key)


def abba_store() -> None:
    store = RecordStore()
    path = str(WORKDIR / "store.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(4)

    def serve_one(conn: socket.socket) -> None:
        key = conn.recv(64).decode()
        store.write(key, b"v")
        conn.sendall(b"ok")

    def accept() -> None:
        conn, _ = listener.accept()
        threading.Thread(target=serve_one, args=(conn,), name="writer").start()

    threading.Thread(target=accept, name="acceptor", daemon=True).start()
    threading.Thread(target=store.compact, name="compactor", daemon=True).start()
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, __file__, "abba_client", READY, str(WORKDIR)])
    store.writer_in.wait()
    store.compactor_in.wait()
    for n in range(2):  # they queue behind the writer, which holds index_lock
        threading.Thread(target=store.read, args=(f"k{n}",), name=f"reader-{n}",
                         daemon=True).start()
    ready("server")
    os.waitpid(pid, 0)


def abba_client() -> None:
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(str(WORKDIR / "store.sock"))
    conn.sendall(b"k9")
    ready("client")
    conn.recv(16)


# -- handler_lock ----------------------------------------------------------------------

_BUFFER_LOCK = threading.Lock()
_BUFFER: list[str] = []


def flush_buffer(signum: int, frame: object) -> None:
    ready("handler")
    with _BUFFER_LOCK:
        _BUFFER.clear()


def collect_lines(fd: int) -> None:
    with _BUFFER_LOCK:
        ready("main")
        select.select([fd], [], [])  # nobody writes: the handler runs on top of this frame
        _BUFFER.append(os.read(fd, 100).decode())


def handler_lock() -> None:
    signal.signal(signal.SIGUSR2, flush_buffer)
    r, _ = os.pipe()
    collect_lines(r)


# -- dead_producer ---------------------------------------------------------------------


def produce(out: queue.Queue[int], size: int) -> None:
    if size > 0:
        raise ValueError(f"shard size {size} is not a multiple of the block size")
    out.put(size)


def dead_producer() -> None:
    results: queue.Queue[int] = queue.Queue()
    producer = threading.Thread(target=produce, args=(results, 7), name="shard-producer")
    producer.start()
    producer.join()  # it died: the traceback is printed before the wait below starts
    ready("consumer")
    results.get()


# -- fork_feeder -----------------------------------------------------------------------

_REGISTRY_LOCK = threading.Lock()


def child_main(q: mp.Queue[str]) -> None:
    q.put("hello")  # starts this child's feeder thread
    ready("child")
    with _REGISTRY_LOCK:  # held by the parent's registrar thread at fork time
        q.put("registered")


def fork_feeder() -> None:
    ctx = mp.get_context("fork")
    q: mp.Queue[str] = ctx.Queue()
    held, forked = threading.Event(), threading.Event()

    def registrar() -> None:
        with _REGISTRY_LOCK:
            held.set()
            forked.wait()

    threading.Thread(target=registrar, name="registrar", daemon=True).start()
    held.wait()
    child = ctx.Process(target=child_main, args=(q,))
    child.start()
    forked.set()
    q.get()
    ready("parent")
    child.join()


# -- loop_callback ---------------------------------------------------------------------


async def fetch_config() -> str:
    await asyncio.sleep(0)
    return "config"


def on_tick(loop: asyncio.AbstractEventLoop) -> None:
    ready("loop")
    asyncio.run_coroutine_threadsafe(fetch_config(), loop).result()


async def loop_main() -> None:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, time.sleep, 0)  # the default executor: one idle worker
    loop.call_soon(on_tick, loop)
    await asyncio.sleep(3600)


def loop_callback() -> None:
    asyncio.run(loop_main())


class Dispatcher:
    """Routes replies to the requests waiting for them."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[bytes]] = {}
        self.replies: asyncio.Queue[tuple[int, bytes | None]] = asyncio.Queue()

    async def run(self) -> None:
        while True:
            rid, body = await self.replies.get()
            fut = self.waiting.pop(rid)
            fut.set_result(body.upper())  # type: ignore[union-attr]  # None: AttributeError


async def lost_future_main() -> None:
    dispatcher = Dispatcher()
    task = asyncio.get_running_loop().create_task(dispatcher.run())

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rid = int((await reader.readline()).decode())
        fut = asyncio.get_running_loop().create_future()
        dispatcher.waiting[rid] = fut
        await dispatcher.replies.put((rid, None))  # a reply without a body
        writer.write(await fut)
        await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "lost_client", READY, str(WORKDIR), str(port))
    while not task.done():
        await asyncio.sleep(0.01)
    ready("server")
    await child.wait()
    del task


def lost_future() -> None:
    asyncio.run(lost_future_main())


def lost_client() -> None:
    conn = socket.create_connection(("127.0.0.1", int(sys.argv[4])))
    conn.sendall(b"1\n")
    ready("client")
    conn.recv(16)


def checksum_part(n: int) -> int:
    return n * 7


def checksum(pool: ThreadPoolExecutor) -> int:
    part = pool.submit(checksum_part, 3)  # queued: the pool's only worker is running this
    ready("pool")
    return part.result()


def pool_self() -> None:
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checksum")
    pool.submit(checksum, pool).result()


MODES = {"pool_self": pool_self, "lost_future": lost_future, "lost_client": lost_client,
         "abba_store": abba_store,
         "abba_client": abba_client, "handler_lock": handler_lock,
         "dead_producer": dead_producer, "fork_feeder": fork_feeder,
         "loop_callback": loop_callback}

if __name__ == "__main__":
    WORKDIR.mkdir(parents=True, exist_ok=True)
    MODES[MODE]()
