"""Real hung jobs for the wait-for graph (issue 17), one per edge kind and pattern.

    python waitgraph_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in
(verdict_support.py's handshake). Modes, each the mechanism of a real report (the tests cite it):

- ``popen_pipe``  the parent waits for its child in Popen.wait; the child writes 1 MiB to its
                  stdout pipe, which only the parent reads (a cycle: pipe + child wait).
- ``mp_queue``    a child puts 1 MiB on a multiprocessing.Queue and exits: its feeder thread
                  blocks writing the queue's pipe while the parent join()s the child first.
- ``queue_pair_fork``, ``queue_pair_spawn`` two workers each put 1 MiB on one
                  multiprocessing.Queue; the parent joins them (in order; with spawn, polling
                  their sentinels as torch.multiprocessing.spawn's ProcessContext.join does)
                  before it gets the results: the feeder holding the queue's write lock blocks
                  on the full pipe, the other feeder waits for that lock (python/cpython#73983).
- ``queue_pair_drained`` the twin: the parent gets both results before it joins; it then
                  sleeps, its workers gone.
- ``unix_server`` a client waits for a reply on a Unix socket; the server process took the
                  request and is stuck in its handler (the sink).
- ``tcp_server``  the same over TCP on 127.0.0.1.
- ``flock``       two processes each hold one flock and block on the other's (a cycle).
- ``ofd``         the same with fcntl OFD locks (/proc/locks shows pid -1 for them).
- ``gil``         a thread calls libc sleep through ctypes.PyDLL (which keeps the GIL); the
                  main thread waits to take the GIL.
- ``lock_recv``   40 threads: one holds a lock while blocked in recv, 8 wait for the lock,
                  the rest idle in queue.get.
- ``fork_lock``   a thread holds a lock while the main thread forks; the child's only thread
                  waits on that lock forever.
- ``pool_lost``   a multiprocessing.Pool worker running the task is killed; the driver waits in
                  AsyncResult.get while the replacement and the other worker idle.
- ``prompt``      a child reads input() from a FIFO nobody writes; its launcher runs with
                  ``--local-ranks-filter 0``, which hides the child's output.
- ``store_get``  rank 1 waits in ``TCPStore.get`` for a key that rank 0, the store's owner,
                  never sets (torch, CPU only).
- ``asyncio_recv`` an asyncio loop's coroutine calls a blocking sock.recv on a socket whose
                  peer (a child) never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import multiprocessing as mp
import multiprocessing.connection
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

MODE, READY, WORKDIR = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def wait_for_line(tag: str, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = Path(READY).read_text()
        except FileNotFoundError:  # the harness does not create it: the first ready() does
            text = ""
        for line in text.splitlines():
            pid, _, name = line.partition(" ")
            if name == tag:
                return int(pid)
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {tag}")


def forever() -> None:
    while True:
        time.sleep(3600)


# -- pipes and children ----------------------------------------------------------------

def list_jobs() -> None:
    child = subprocess.Popen([sys.executable, __file__, "popen_child", READY, str(WORKDIR)],
                             stdout=subprocess.PIPE)
    wait_for_line("child")
    ready("parent")
    child.wait()  # never read: the child's stdout fills


def popen_child() -> None:
    ready("child")
    data = b"x" * (1 << 20)
    while data:  # os.write: a write that a ptrace stop cut short goes on with the rest
        data = data[os.write(1, data):]


def put_results(q: mp.Queue) -> None:
    q.put(b"r" * (1 << 20))
    ready("child")


def collect_results() -> None:
    q: mp.Queue = mp.Queue()
    worker = mp.Process(target=put_results, args=(q,))
    worker.start()
    wait_for_line("child")
    ready("parent")
    worker.join()  # before q.get(): the feeder cannot flush 1 MiB into the pipe
    q.get()


def put_big(q: mp.Queue, tag: str) -> None:
    q.put(b"r" * (1 << 20))  # returns at once: the queue's feeder thread writes the pipe
    ready(tag)


def queue_pair(method: str, drain: bool) -> None:
    ctx = mp.get_context(method)
    q = ctx.Queue()
    workers = [ctx.Process(target=put_big, args=(q, f"worker{i}")) for i in range(2)]
    for w in workers:
        w.start()
    wait_for_line("worker0")
    wait_for_line("worker1")
    if drain:  # the documented order: take what the workers put, then join them
        results = [q.get() for _ in workers]
        for w in workers:
            w.join()
        ready("parent")
        assert all(len(r) == 1 << 20 for r in results)
        forever()
    ready("parent")
    if method == "fork":
        for w in workers:
            w.join()
    else:  # torch.multiprocessing.spawn's ProcessContext.join: poll every sentinel
        alive = list(workers)
        while alive:
            multiprocessing.connection.wait([w.sentinel for w in alive])
            alive = [w for w in alive if w.is_alive()]
    for _ in workers:
        q.get()


# -- sockets -----------------------------------------------------------------------------

def handle(conn: socket.socket) -> None:
    conn.recv(64)
    ready("server")
    forever()  # the handler is stuck: the reply never comes


def ask(family: int, address: object) -> None:
    client = socket.socket(family, socket.SOCK_STREAM)
    client.connect(address)
    client.sendall(b"status?")
    ready("client")
    client.recv(64)


def serve(family: int) -> None:
    server = socket.socket(family, socket.SOCK_STREAM)
    address: object = str(WORKDIR / "sock") if family == socket.AF_UNIX else ("127.0.0.1", 0)
    server.bind(address)
    server.listen()
    address = server.getsockname()
    client = mp.Process(target=ask, args=(family, address))
    client.start()
    # The server's own log (as a launcher's --redirects gives each process one); its reply
    # thread dies with an exception, which the traceback in that log says.
    log = os.open(WORKDIR / "server.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    os.dup2(log, 1)
    replier = threading.Thread(target=reply_cache, name="replier")
    replier.start()
    replier.join()
    conn, _ = server.accept()
    handle(conn)


def reply_cache() -> None:
    raise RuntimeError("reply cache corrupted")


# -- file locks --------------------------------------------------------------------------

def _lock(fd: int, ofd: bool) -> None:
    if ofd:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))
    else:
        fcntl.flock(fd, fcntl.LOCK_EX)


def take_both(me: str, first: str, second: str, other: str, ofd: bool) -> None:
    a = os.open(WORKDIR / first, os.O_RDWR | os.O_CREAT)
    b = os.open(WORKDIR / second, os.O_RDWR | os.O_CREAT)
    _lock(a, ofd)
    ready(f"{me}_first")
    wait_for_line(f"{other}_first")
    ready(f"{me}_blocked")
    _lock(b, ofd)


def lock_pair(ofd: bool) -> None:
    peer = mp.Process(target=take_both, args=("b", "index.lock", "cache.lock", "a", ofd))
    peer.start()
    take_both("a", "cache.lock", "index.lock", "b", ofd)


# -- threads -----------------------------------------------------------------------------

def hold_gil() -> None:
    libc = ctypes.PyDLL(None)  # PyDLL: the call keeps the GIL
    ready("holder")
    libc.sleep(3600)


def gil_job() -> None:
    ready("main")
    threading.Thread(target=hold_gil, name="native-call").start()
    total = 0
    while True:  # needs the GIL for every bytecode
        total += 1


def lock_recv_job() -> None:
    lock = threading.Lock()
    ours, _theirs = socket.socketpair()  # _theirs: kept open, never written
    work: queue.Queue[int] = queue.Queue()
    entered = threading.Event()

    def refresh() -> None:
        with lock:
            entered.set()
            ours.recv(64)  # the reply never comes, and the lock stays held

    def idle() -> None:
        work.get()

    threading.Thread(target=refresh, name="refresher").start()
    entered.wait()
    for i in range(8):
        threading.Thread(target=refresh, name=f"caller-{i}").start()
    for i in range(30):
        threading.Thread(target=idle, name=f"prefetch-{i}", daemon=True).start()
    ready("threads")
    forever()


def fork_lock_job() -> None:
    lock = threading.Lock()
    held = threading.Event()

    def flush() -> None:
        with lock:
            held.set()
            forever()

    threading.Thread(target=flush, name="flusher", daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        ready("child")
        with lock:  # held by a thread that exists only in the parent
            pass
        os._exit(0)
    ready("parent")
    os.waitpid(pid, 0)


# -- pools -------------------------------------------------------------------------------

def slow_square(x: int) -> int:
    ready("busy")
    forever()
    return x * x


def pool_job() -> None:
    with mp.Pool(2) as pool:
        result = pool.apply_async(slow_square, (3,))
        busy = wait_for_line("busy")
        # The worker dies a while into its task (as a real one does): the pool's handler
        # starts the replacement at once, so it starts clearly after the first workers.
        time.sleep(0.3)
        os.kill(busy, signal.SIGKILL)
        # Wait for the pool to replace the killed worker, then wait for the lost result.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
                busy in [p.pid for p in pool._pool] or len(pool._pool) < 2):  # type: ignore[attr-defined]
            time.sleep(0.05)
        ready("driver")
        result.get()


# -- prompts and event loops -------------------------------------------------------------

def prompt_job() -> None:
    launcher = subprocess.Popen([sys.executable, __file__, "prompt_launcher", READY,
                                 str(WORKDIR), "--local-ranks-filter", "0"])
    launcher.wait()


def prompt_launcher() -> None:
    fifo = WORKDIR / "stdin"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR)  # opens without a writer; the child keeps it, we close it
    child = subprocess.Popen([sys.executable, __file__, "prompt_child", READY, str(WORKDIR)],
                             stdin=fd)
    os.close(fd)
    wait_for_line("child")
    ready("launcher")
    child.wait()


def prompt_child() -> None:
    ready("child")
    answer = input("Overwrite the checkpoint? [y/N] ")
    print(answer)


def peer(address: str) -> None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(address)
    ready("peer")
    forever()  # never answers


async def fetch_tokens(conn: socket.socket) -> bytes:
    ready("loop")
    return conn.recv(64)  # synchronous, inside a coroutine: the loop stops


def asyncio_job() -> None:
    address = str(WORKDIR / "tok.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen()
    child = mp.Process(target=peer, args=(address,))
    child.start()
    conn, _ = server.accept()
    wait_for_line("peer")

    async def main() -> None:
        await asyncio.gather(fetch_tokens(conn), asyncio.sleep(3600))

    asyncio.run(main())


# -- the c10d store ---------------------------------------------------------------------

def store_rank(rank: int, port: int) -> None:
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", port, 2, is_master=rank == 0)
    if rank == 0:
        ready("owner")
        forever()  # never sets "ready_to_train"
    ready("waiter")
    store.get("ready_to_train")


def store_job() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = [subprocess.Popen([sys.executable, __file__, "store_rank", READY, str(WORKDIR),
                               str(rank), str(port)]) for rank in (0, 1)]
    for rank in ranks:
        rank.wait()


MODES = {
    "popen_pipe": list_jobs, "popen_child": popen_child, "mp_queue": collect_results,
    "unix_server": lambda: serve(socket.AF_UNIX), "tcp_server": lambda: serve(socket.AF_INET),
    "flock": lambda: lock_pair(False), "ofd": lambda: lock_pair(True), "gil": gil_job,
    "lock_recv": lock_recv_job, "fork_lock": fork_lock_job, "pool_lost": pool_job,
    "store_get": store_job,
    "store_rank": lambda: store_rank(int(sys.argv[4]), int(sys.argv[5])),
    "prompt": prompt_job, "prompt_launcher": prompt_launcher, "prompt_child": prompt_child,
    "asyncio_recv": asyncio_job,
    "queue_pair_fork": lambda: queue_pair("fork", False),
    "queue_pair_spawn": lambda: queue_pair("spawn", False),
    "queue_pair_drained": lambda: queue_pair("fork", True),
}

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        MODES[MODE]()
