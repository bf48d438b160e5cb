"""Real jobs whose threads wait for a party or a permit that never comes.

    python party_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before it blocks for good (the
handshake of tests/support.py ``running_target``). Modes, each the mechanism of a real report
(the tests cite it):

- ``barrier_short`` a compositor reads the stdout pipe of its tiler child; the tiler makes a
                    ``threading.Barrier`` for 5 parties but starts 4 tile threads (no thread
                    died: a count off by one), and its main thread joins them.
- ``barrier_dead``  a simulator's 3 step threads meet at a ``Barrier(3)`` each step; one raises
                    in its setup before its first wait; the main thread waits on a results
                    ``queue.Queue`` and a client waits for the simulator's reply on a socket.
- ``permits_leak``  a gateway limits backend calls with ``BoundedSemaphore(2)``; a call that
                    fails raises between ``acquire()`` and ``release()``, the first two fail, so
                    both permits leak; 3 request threads then wait in ``acquire()`` while the
                    main thread serves ``accept()``, and a client waits for its reply.
- ``permits_held``  the same gateway whose two permit holders wait, inside the region, for a
                    backend child that never answers: held, not leaked.
- ``loop_urlopen``  an asyncio service fetches its config with ``urllib.request.urlopen`` inside
                    a coroutine (synchronous I/O on the loop's thread) from a service that
                    never answers: no other task runs. ``loop_urlopen_ok``: the service
                    answers; the loop fetches again and again (the twin).
                    ``loop_urlopen_slow``: the service answers after 60 ms, so the fetch
                    takes about half of each turn (healthy too, only slow).
- ``loop_lock``     an asyncio service forks a multiprocessing worker from inside a coroutine
                    (the child blocks on its task queue), then a coroutine takes a
                    ``threading.Lock`` that a publisher thread holds while it waits on
                    ``run_coroutine_threadsafe(...).result()``: the loop and the thread wait
                    for each other.
- ``sqlite_held``   a catalog service opens a write transaction (``BEGIN IMMEDIATE``) and,
                    inside it, reads a pipe from its indexer child for the row count; the
                    indexer must first insert into the same database: its connection's busy
                    handler retries the locked database, and a retry loop around "database is
                    locked" never gives up.
- ``fifo_dead``     a launcher starts an exporter script (written to WORKDIR) that crashes on
                    its config before it opens the FIFO it should read, and is never reaped;
                    the writer then blocks in ``open()`` of that FIFO for writing.
- ``loader_stuck``  a training loop over a torch DataLoader with 3 workers; worker 2's
                    ``__getitem__`` blocks reading a pipe nobody writes (a shard reader), the
                    other workers idle on their index queues.
- ``pull_idle``     a dispatcher (socketserver) whose 2 workers connected, registered and wait
                    for work in ``for line in conn_file:``; nothing is ever dispatched: idle.
- ``handler_chain`` a client asks a gateway (ThreadingTCPServer); the gateway's handler thread
                    calls a vault that listens but never accepts (its main thread reads a pipe
                    nobody writes); the gateway's main thread idles in serve_forever.
- ``queue_self``    a metrics shipper thread (a Thread subclass) drains a bounded queue; on a
                    send failure it reports through its own ``emit``, which puts into that same
                    full queue; 3 producer threads then wait in ``put``.
- ``loop_queue``    an asyncio service's coroutine calls ``multiprocessing.Queue.get()`` for a
                    result; its worker waits for the task the loop's dispatcher would send.
- ``executor_empty`` a ProcessPoolExecutor (spawn, 1 worker, max_tasks_per_child=2) given 12
                    shards: its recycled worker is not replaced (cpython#115634), and the main
                    thread waits on a future no process will run.
- ``manager_orphan`` a Manager().Lock() taken by a cache writer that then exits without
                    releasing it (os._exit: a crash); two readers wait in the proxy's acquire()
                    and the parent joins them.
- ``gil_sem``       the main thread waits on a POSIX semaphore through ``ctypes.PyDLL`` (so it
                    keeps the GIL); the thread that would post it wakes from its short sleep
                    and waits for the GIL for ever.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

MODE, READY = sys.argv[1], sys.argv[2]


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _child(mode: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, mode, READY, sys.argv[3], *args],
                            stdout=subprocess.PIPE if mode == "tiler" else None)


# -- barrier_short ---------------------------------------------------------------------


def barrier_short() -> None:
    tiler = _child("tiler")
    ready("compositor")
    assert tiler.stdout is not None
    tiler.stdout.read()  # the tiles come when the tiler finishes


def tiler() -> None:
    sync = threading.Barrier(5)  # one party more than the tile threads below

    def tile(n: int) -> None:
        sync.wait()
        print(f"tile {n}", flush=True)

    threads = [threading.Thread(target=tile, args=(n,), name=f"tile-{n}") for n in range(4)]
    for thread in threads:
        thread.start()
    while sync.n_waiting < 4:
        time.sleep(0.01)
    ready("tiler")
    for thread in threads:
        thread.join()


# -- barrier_dead ----------------------------------------------------------------------


def barrier_dead() -> None:
    step = threading.Barrier(3)
    results: queue.Queue[int] = queue.Queue()
    listener = socket.create_server(("127.0.0.1", 0))

    def body(n: int) -> None:
        if n == 1:
            raise KeyError("terrain")  # the setup fails before the first step
        for k in range(10):
            step.wait()
            results.put(k)

    for n in range(3):
        threading.Thread(target=body, args=(n,), name=f"body-{n}", daemon=True).start()
    client = _child("client", str(listener.getsockname()[1]))
    conn = listener.accept()[0]
    conn.recv(64)
    while step.n_waiting < 2:
        time.sleep(0.01)
    ready("simulator")
    total = sum(results.get() for _ in range(30))  # every step's result, never
    conn.sendall(f"{total}\n".encode())
    client.wait()


def client() -> None:
    conn = socket.create_connection(("127.0.0.1", int(sys.argv[4])))
    conn.sendall(b"run\n")
    ready("client")
    conn.recv(64)


# -- permits_leak / permits_held ---------------------------------------------------------


class BackendError(Exception):
    pass


SLOTS = threading.BoundedSemaphore(2)
FAILS = [2]


def call_backend(backend: socket.socket | None) -> bytes:
    SLOTS.acquire()
    if backend is not None:
        reply = backend.recv(64)  # the held case: inside the region, waiting for the backend
    elif FAILS[0] > 0:
        FAILS[0] -= 1
        raise BackendError("backend warming up")  # leaves before the release below
    else:
        reply = b"ok"
    SLOTS.release()
    return reply


def gateway(held: bool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    holders = []
    if held:
        backend_listener = socket.create_server(("127.0.0.1", 0))
        _child("backend", str(backend_listener.getsockname()[1]))
        for n in range(2):  # two calls hold both permits, waiting for the backend's reply
            link = backend_listener.accept()[0]
            holders.append(threading.Thread(target=call_backend, args=(link,), name=f"hold-{n}",
                                            daemon=True))
    else:
        for _ in range(2):  # two warm-up calls fail and leak both permits
            with contextlib.suppress(BackendError):
                call_backend(None)
    for thread in holders:
        thread.start()
    while SLOTS._value > 0:  # every permit is taken (held, or leaked above)
        time.sleep(0.01)

    def handle(conn: socket.socket) -> None:
        conn.recv(64)
        conn.sendall(call_backend(None))

    _child("client", str(listener.getsockname()[1]))
    requests = [threading.Thread(target=handle, args=(listener.accept()[0],), name="req-0")]
    requests += [threading.Thread(target=call_backend, args=(None,), name=f"req-{n}")
                 for n in (1, 2)]
    for thread in requests:
        thread.daemon = True
        thread.start()
    ready("gateway")
    while True:  # the main thread goes on serving connections
        listener.accept()[0].close()


def backend() -> None:
    conns = [socket.create_connection(("127.0.0.1", int(sys.argv[4]))) for _ in range(2)]
    ready("backend")
    conns[0].recv(64)  # never answers


# -- loop_lock ---------------------------------------------------------------------------


def _drain(tasks) -> None:  # type: ignore[no-untyped-def]
    ready("drainer")
    tasks.get()  # nothing is ever queued


def loop_lock() -> None:
    import asyncio
    import multiprocessing

    state = threading.Lock()

    async def record(item: int) -> int:
        return item

    def publisher(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        with state:
            started.set()
            asyncio.run_coroutine_threadsafe(record(1), loop).result()

    async def main() -> None:
        context = multiprocessing.get_context("fork")
        worker = context.Process(target=_drain, args=(context.Queue(),), daemon=True)
        worker.start()
        started = threading.Event()
        threading.Thread(target=publisher, args=(asyncio.get_running_loop(), started),
                         name="publisher", daemon=True).start()
        await asyncio.to_thread(started.wait)
        ready("service")
        with state:  # a synchronous lock inside a coroutine: the loop's thread blocks
            pass

    asyncio.run(main())


# -- sqlite_held -------------------------------------------------------------------------


def sqlite_held() -> None:
    import sqlite3

    path = os.path.join(sys.argv[3], "catalog.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS rows (n INTEGER)")
    reader, writer = os.pipe()
    indexer = subprocess.Popen([sys.executable, __file__, "indexer", READY, sys.argv[3],
                                path, str(writer)], pass_fds=(writer,))
    os.close(writer)
    db.execute("BEGIN IMMEDIATE")  # the write lock, held across the read below
    db.execute("DELETE FROM rows")
    ready("catalog")
    os.read(reader, 16)  # the indexer's count: it must insert first
    db.execute("COMMIT")
    indexer.wait()


def indexer() -> None:
    import sqlite3

    db = sqlite3.connect(sys.argv[4], timeout=0.2, isolation_level=None)
    tried = False
    while True:
        try:
            db.execute("INSERT INTO rows VALUES (1)")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            if not tried:
                ready("indexer")
                tried = True
    os.write(int(sys.argv[5]), b"1\n")


# -- fifo_dead ---------------------------------------------------------------------------


def fifo_dead() -> None:
    work = sys.argv[3]
    fifo = os.path.join(work, "stats.fifo")
    os.mkfifo(fifo)
    script = os.path.join(work, "stats_exporter.py")
    with open(script, "w") as f:
        f.write("import sys\nlimits = {'rate': 1}\nburst = limits['burst']\n"
                "open(sys.argv[1]).read()\n")
    exporter = subprocess.Popen([sys.executable, script, fifo])
    stat = Path(f"/proc/{exporter.pid}/stat")
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)  # dead, not reaped
    ready("writer")
    with open(fifo, "w") as out:  # the only reader is gone: blocks for ever
        out.write("x")


# -- loader_stuck ------------------------------------------------------------------------


class _Shards:
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int) -> int:
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        if info is not None and info.id == 2 and index > 20:
            reader, _writer = os.pipe()
            ready("shard_reader")
            os.read(reader, 1)  # the shard's bytes never come
        return index


def loader_stuck() -> None:
    from torch.utils.data import DataLoader

    for _batch in DataLoader(_Shards(), batch_size=4, num_workers=3):  # type: ignore[arg-type]
        pass


# -- pull_idle ---------------------------------------------------------------------------


def pull_idle() -> None:
    import socketserver

    class Register(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.rfile.readline()  # the worker's hello; then it waits for jobs, none come
            while True:
                if not self.rfile.readline():
                    return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Register)
    server.daemon_threads = True
    for n in range(2):
        _child("puller", str(server.server_address[1]), str(n))
    ready("dispatcher")
    server.serve_forever()


def puller() -> None:
    conn = socket.create_connection(("127.0.0.1", int(sys.argv[4])))
    jobs = conn.makefile("rw")
    jobs.write(f"hello {sys.argv[5]}\n")
    jobs.flush()
    ready(f"puller{sys.argv[5]}")
    for line in jobs:  # the next job, when the dispatcher has one
        jobs.write(f"done {line}")
        jobs.flush()


# -- handler_chain -----------------------------------------------------------------------


def handler_chain() -> None:
    import socketserver

    vault_listener = socket.create_server(("127.0.0.1", 0))
    vault_port = vault_listener.getsockname()[1]
    if os.fork() == 0:  # the vault: listens, never accepts, waits on its own pipe
        reader, _writer = os.pipe()
        ready("vault")
        os.read(reader, 1)
        os._exit(0)
    vault_listener.close()

    class Ask(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.rfile.readline()
            with socket.create_connection(("127.0.0.1", vault_port)) as vault:
                vault.sendall(b"secret?\n")
                self.wfile.write(vault.recv(64))  # the vault never answers

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Ask)
    server.daemon_threads = True
    _child("client", str(server.server_address[1]))
    ready("gateway")
    server.serve_forever()


# -- queue_self ----------------------------------------------------------------------------


class Shipper(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="shipper", daemon=True)
        self.items: queue.Queue[str] = queue.Queue(maxsize=4)
        self.started_up = threading.Event()

    def emit(self, line: str) -> None:
        self.items.put(line)

    def run(self) -> None:
        self.started_up.wait()  # the producers have filled the queue
        self.items.get()
        while not self.items.full():  # a producer takes the room back
            time.sleep(0.01)
        ready("shipper")
        self.emit("ship failed: collector refused the batch")  # into its own full queue


def queue_self() -> None:
    shipper = Shipper()
    shipper.start()
    producers = [threading.Thread(target=lambda n=n: [shipper.emit(f"metric {n} {k}")
                                                      for k in range(100)],
                                  name=f"producer-{n}", daemon=True) for n in range(3)]
    for thread in producers:
        thread.start()
    while not shipper.items.full() or sum(t.is_alive() for t in producers) < 3:
        time.sleep(0.01)
    shipper.started_up.set()
    for thread in producers:
        thread.join()


# -- loop_queue ----------------------------------------------------------------------------


def _hasher(tasks, results) -> None:  # type: ignore[no-untyped-def]
    ready("hasher")
    while True:
        results.put(hash(tasks.get()))


def loop_queue() -> None:
    import asyncio
    import multiprocessing

    context = multiprocessing.get_context("fork")
    tasks, results = context.Queue(), context.Queue()
    context.Process(target=_hasher, args=(tasks, results), daemon=True).start()

    async def dispatch() -> None:
        await asyncio.sleep(0.5)
        tasks.put("repo-1")

    async def receive() -> int:
        ready("listener")
        return results.get()  # synchronous, on the loop's thread: dispatch never runs

    async def main() -> None:
        asyncio.get_running_loop().create_task(dispatch())
        print(await receive())

    asyncio.run(main())


def _config_server(answer: bool, delay: float = 0.0) -> int:
    """A config service on a thread: it accepts and, ``answer``, replies to each request
    after ``delay`` seconds; otherwise holds every connection and never replies (a service
    that hangs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        held = []
        while True:
            conn, _ = server.accept()
            if not answer:
                held.append(conn)
                continue
            conn.recv(4096)
            time.sleep(delay)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.close()

    threading.Thread(target=serve, name="config-service", daemon=True).start()
    return int(server.getsockname()[1])


def loop_urlopen(answer: bool, delay: float = 0.0) -> None:
    import asyncio
    import urllib.request

    port = _config_server(answer, delay)

    async def fetch_config() -> bytes:
        # synchronous I/O inside a coroutine: the whole loop waits for it
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=3600) as r:
            return bytes(r.read())

    async def handle_request() -> bytes:
        return await fetch_config()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.05)

    async def main() -> None:
        asyncio.get_running_loop().create_task(ticker())
        await asyncio.sleep(0.1)
        ready("service")
        while True:
            await handle_request()
            await asyncio.sleep(0.05)

    asyncio.run(main())


# -- executor_empty ------------------------------------------------------------------------


def _embed(shard: int) -> int:
    return shard * 2


def executor_empty() -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=1, max_tasks_per_child=2,
                               mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(_embed, n) for n in range(12)]
    futures[1].result()  # the first worker's two tasks are done
    while multiprocessing.active_children():  # it exited after them
        time.sleep(0.05)
    ready("indexer")
    print(sum(f.result() for f in futures))


# -- manager_orphan ------------------------------------------------------------------------


def _writer(lock) -> None:  # type: ignore[no-untyped-def]
    lock.acquire()
    os._exit(9)  # dies inside its critical section


def _reader(lock, n) -> None:  # type: ignore[no-untyped-def]
    ready(f"reader{n}")
    with lock:
        pass


def manager_orphan() -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    manager = context.Manager()
    lock = manager.Lock()
    writer = context.Process(target=_writer, args=(lock,))
    writer.start()
    writer.join()
    readers = [context.Process(target=_reader, args=(lock, n)) for n in range(2)]
    for proc in readers:
        proc.start()
    ready("master")
    for proc in readers:
        proc.join()


# -- gil_sem -------------------------------------------------------------------------------


def gil_sem() -> None:
    import ctypes

    keeps_gil = ctypes.PyDLL(None)  # libc, called with the GIL held
    releases_gil = ctypes.CDLL(None)
    sem = ctypes.create_string_buffer(64)  # sem_t is 32 bytes on x86-64
    releases_gil.sem_init(sem, 0, 0)
    done = threading.Event()

    def poster() -> None:
        while not done.is_set():
            time.sleep(0.01)  # the chunk upload it waits for, polled
        releases_gil.sem_post(sem)

    threading.Thread(target=poster, name="poster", daemon=True).start()
    ready("store")
    keeps_gil.sem_wait(sem)  # keeps the GIL: the poster never runs again


MODES = {"barrier_short": barrier_short, "tiler": tiler, "barrier_dead": barrier_dead,
         "client": client, "permits_leak": lambda: gateway(False),
         "permits_held": lambda: gateway(True), "backend": backend, "loop_lock": loop_lock,
         "sqlite_held": sqlite_held, "indexer": indexer, "fifo_dead": fifo_dead,
         "loader_stuck": loader_stuck, "pull_idle": pull_idle, "puller": puller,
         "handler_chain": handler_chain, "queue_self": queue_self,
         "loop_queue": loop_queue, "executor_empty": executor_empty,
         "manager_orphan": manager_orphan, "gil_sem": gil_sem,
         "loop_urlopen": lambda: loop_urlopen(False),
         "loop_urlopen_ok": lambda: loop_urlopen(True),
         "loop_urlopen_slow": lambda: loop_urlopen(True, 0.06)}

if __name__ == "__main__":
    MODES[MODE]()
