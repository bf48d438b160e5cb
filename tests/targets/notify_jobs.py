"""Real jobs whose waits end only when somebody acts: a FIFO's other end, a notify, a lock, a
task_done(), a client's next request.

    python notify_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before it blocks for good (the
handshake of tests/support.py ``running_target``). Modes, each the mechanism of a real report
(the tests cite it):

- ``fifo_names``  an indexer creates ``spool/feed-<its pid>.fifo`` and opens it to write; the
                  merger it started creates and opens ``spool/feed-main.fifo`` to read: two
                  names, so both ``open()`` calls wait for a partner forever.
- ``lost_notify`` a renderer notifies its Condition, then starts 5 threads that each wait on it
                  without a predicate; the main thread waits for their frames on a queue.Queue.
- ``held_wait``   a catalogue whose loader thread waits on an Event inside ``with self.mu:``;
                  the publisher that would set it and two readers wait for ``self.mu``.
- ``served_idle`` a socketserver front end connected to two shard servers (one over TCP, one
                  over a Unix socket) that accepted its connection and wait for its next request;
                  no request ever comes: idle, not hung.
- ``join_dead``   a crawler's 3 threads drain a queue.Queue; one task raises a BaseException the
                  worker loop does not catch, the thread dies before task_done(), and the main
                  thread waits in Queue.join() forever.
- ``idle_exporter`` an HTTP-ish front end (socketserver) with a generator thread idle in
                  ``queue.Queue.get``, a metrics exporter child in a plain ``accept()`` loop and
                  a worker child reading its task pipe: idle, not hung.
- ``dead_setter`` a daemon's main thread waits on an Event its warm-up thread was to set; that
                  thread died of an exception; an acceptor thread sits in ``accept()`` and a
                  client waits for its reply.
- ``cycle_behind`` an archiver holds an flock on ``state.lock`` while it waits for a child
                  whose stdout pipe (which it never reads) is full; a reporter waits for that
                  flock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

MODE, READY, WORKDIR = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _child(mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, mode, READY, str(WORKDIR)])


# -- fifo_names ------------------------------------------------------------------------


def fifo_names() -> None:
    spool = WORKDIR / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    _child("fifo_merger")
    path = spool / f"feed-{os.getpid()}.fifo"
    os.mkfifo(path)
    ready("indexer")
    with open(path, "wb") as feed:  # blocks: the merger opens another name
        feed.write(b"doc\n")


def fifo_merger() -> None:
    path = WORKDIR / "spool" / "feed-main.fifo"
    os.mkfifo(path)
    ready("merger")
    with open(path, "rb") as feed:
        feed.read()


# -- lost_notify -----------------------------------------------------------------------


def lost_notify() -> None:
    frames: queue.Queue[int] = queue.Queue()
    cv = threading.Condition()
    waiting = [0]

    def render(n: int) -> None:
        with cv:
            waiting[0] += 1
            if waiting[0] == 5:
                ready("renderer")
            cv.wait()  # no predicate: the notify below came first
        frames.put(n)

    with cv:
        cv.notify_all()  # the scene is ready: before anyone waits
    for n in range(5):
        threading.Thread(target=render, args=(n,), name=f"render-{n}", daemon=True).start()
    for _ in range(5):
        frames.get()


# -- held_wait -------------------------------------------------------------------------


class Catalogue:
    def __init__(self) -> None:
        self.mu = threading.Lock()
        self.loaded = threading.Event()
        self.items: list[str] = []

    def load(self) -> None:
        with self.mu:
            self.loaded.wait()  # holds mu while it waits for publish()
            self.items.sort()

    def publish(self) -> None:
        with self.mu:
            self.items.append("x")
            self.loaded.set()

    def count(self) -> int:
        with self.mu:
            return len(self.items)


def held_wait() -> None:
    cat = Catalogue()
    loader = threading.Thread(target=cat.load, name="loader")
    loader.start()
    while not cat.mu.locked():
        time.sleep(0.01)
    others = [threading.Thread(target=cat.publish, name="publisher"),
              *(threading.Thread(target=cat.count, name=f"reader-{i}") for i in range(2))]
    for t in others:
        t.start()
    ready("catalogue")
    loader.join()


# -- served_idle -----------------------------------------------------------------------


def served_idle() -> None:
    path = str(WORKDIR / "shard-u.sock")
    _child("shard_unix")
    tcp = _child("shard_tcp")
    port_file = WORKDIR / "shard-t.port"
    deadline = time.monotonic() + 30
    while not (os.path.exists(path + ".up") and port_file.exists()):
        if time.monotonic() > deadline or tcp.poll() is not None:
            raise SystemExit("shards did not start")
        time.sleep(0.02)
    unix = socket.socket(socket.AF_UNIX)
    unix.connect(path)
    inet = socket.create_connection(("127.0.0.1", int(port_file.read_text())))

    class Front(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            unix.sendall(self.request.recv(1024))
            self.request.sendall(unix.recv(1024))

    server = socketserver.TCPServer(("127.0.0.1", 0), Front)
    ready("front")
    try:
        server.serve_forever()
    finally:
        inet.close()


def shard_unix() -> None:
    path = str(WORKDIR / "shard-u.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    Path(path + ".up").write_text("up")
    conn, _ = listener.accept()
    ready("shard-u")
    while conn.recv(1024):  # the front end's next request
        conn.sendall(b"ok")


def shard_tcp() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    tmp = WORKDIR / "shard-t.port.tmp"
    tmp.write_text(str(listener.getsockname()[1]))
    tmp.rename(WORKDIR / "shard-t.port")
    conn, _ = listener.accept()
    ready("shard-t")
    while conn.recv(1024):
        conn.sendall(b"ok")


# -- join_dead -------------------------------------------------------------------------


class Cancelled(BaseException):
    """Raised by a task the crawler's worker loop (``except Exception``) does not catch."""


def join_dead() -> None:
    todo: queue.Queue[str] = queue.Queue()
    done: list[str] = []

    def fetch(url: str) -> None:
        if url.endswith("/7"):
            raise Cancelled(url)
        done.append(url)

    def crawl() -> None:
        while True:
            url = todo.get()
            with contextlib.suppress(Exception):  # the bug: Cancelled is a BaseException
                fetch(url)
            todo.task_done()

    for i in range(12):
        todo.put(f"https://site.example/{i}")
    workers = [threading.Thread(target=crawl, name=f"crawl-{i}", daemon=True) for i in range(3)]
    for t in workers:
        t.start()
    while sum(t.is_alive() for t in workers) == 3 or todo.qsize():
        time.sleep(0.01)
    ready("crawler")
    todo.join()


# -- cycle_behind ----------------------------------------------------------------------


def cycle_behind() -> None:
    with open(WORKDIR / "state.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _child("reporter")
        spam = "import sys\nwhile True: sys.stdout.write('x' * 4096)"
        child = subprocess.Popen([sys.executable, "-c", spam], stdout=subprocess.PIPE)
        ready("archiver")
        child.wait()  # never reads child.stdout: the pipe fills, the child blocks


def reporter() -> None:
    with open(WORKDIR / "state.lock", "w") as lock:
        ready("reporter")
        fcntl.flock(lock, fcntl.LOCK_EX)


# -- idle_exporter ---------------------------------------------------------------------


def idle_exporter() -> None:
    import multiprocessing as mp

    jobs: queue.Queue[str] = queue.Queue()
    threading.Thread(target=jobs.get, name="generator", daemon=True).start()
    tasks_r, tasks_w = mp.Pipe(duplex=False)
    worker = mp.Process(target=_task_worker, args=(tasks_r,), name="task-worker")
    exporter = mp.Process(target=_exporter, name="exporter")
    worker.start()
    exporter.start()
    server = socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    ready("front")
    server.serve_forever()
    tasks_w.send("never")


def _task_worker(tasks) -> None:  # type: ignore[no-untyped-def]
    ready("task-worker")
    while True:
        tasks.recv()


def _exporter() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    ready("exporter")
    while True:
        conn, _ = listener.accept()
        conn.sendall(b"metric 1\n")
        conn.close()


# -- dead_setter -----------------------------------------------------------------------


def dead_setter() -> None:
    warmed = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def warm_up() -> None:
        raise RuntimeError("model file missing")  # before warmed.set()

    pending: list[socket.socket] = []

    def acceptor() -> None:
        while True:  # connections queue until the main thread serves them
            pending.append(listener.accept()[0])

    threading.Thread(target=warm_up, name="warm-up").start()
    threading.Thread(target=acceptor, name="acceptor", daemon=True).start()
    subprocess.Popen([sys.executable, __file__, "probe", READY, str(WORKDIR), str(port)])
    while threading.active_count() > 2:  # the warm-up thread has died
        time.sleep(0.01)
    ready("daemon")
    warmed.wait()


def probe() -> None:
    conn = socket.create_connection(("127.0.0.1", int(sys.argv[4])))
    conn.sendall(b"status\n")
    ready("probe")
    conn.recv(64)


MODES = {f.__name__: f for f in (fifo_names, fifo_merger, lost_notify, held_wait, served_idle,
                                 shard_unix, shard_tcp, join_dead, cycle_behind, reporter,
                                 idle_exporter, dead_setter, probe)}

if __name__ == "__main__":
    MODES[MODE]()
