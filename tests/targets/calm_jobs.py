"""Jobs that poll, compute, idle or pause: hung ones a poll must not hide, healthy ones that
must not read hung.

    python calm_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before it enters the call it stays
in (tests/targets/verdict_support.py waits for them). Modes:

- ``select_loop`` (hung) a client sends nothing and waits for the reply with
                ``select(..., 1.0)`` in a loop, while its server child waits in ``recv`` for a
                request: each waits for the other to speak first (CPython's ``select`` idiom of
                socketserver, the 1 s poll of cpython#90882-style shutdown loops).
- ``store_poll`` (hung) a c10d TCPStore owner waits in ``store.wait`` for a key and a second
                process polls ``store.check`` every 50 ms for another key that nobody sets
                (torchelastic's barrier loop; pytorch#83986 "hang polling the store").
- ``slow``      (healthy) a driver waits in ``Queue.get`` for a result while its worker
                computes in a Python loop for a long time: slow, not hung.
- ``idle``      (healthy) a ``socketserver`` server in ``serve_forever`` (a 0.5 s poll) with no
                request in flight, and a client process that sleeps between requests.
- ``paused``    (healthy) one process in a long ``time.sleep`` between two phases.
- ``family``    (hung) a script starts a server (another Python program, same process group)
                that runs ``cat`` on a pipe nobody writes and waits for its output; a client
                in a session of its own, reparented to init, waits for the server's reply over
                TCP (the launcher-script / sibling-service shape of issue 17 item 6, as in
                vllm-project/vllm#4293-style "API server waits on a stuck helper").
- ``pool``      (hung) a ``multiprocessing.Pool`` whose worker is killed while it runs a task:
                the pool replaces it, every worker idles and the driver waits for a result
                nobody computes (cpython#66587 / bpo-22393, "Pool hangs if a worker dies").
- ``threads``   (hung) one process of 1,000 threads: 966 prefetch threads idle in ``queue.get``,
                33 waiting for one lock, and one thread blocked in ``recv`` inside that lock's
                ``with`` block (a 13,018-line report in issue 17; the shape of
                pytorch/pytorch#1355-style thread-pool hangs behind one blocked reader).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import select
import socket
import socketserver
import sys
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def select_loop(ready_file: str) -> None:
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        ready(ready_file, "server")
        theirs.recv(1024)  # waits for a request the client never sends
        os._exit(0)
    theirs.close()
    ready(ready_file, "client")
    while True:  # the client waits for a reply it never asked for
        readable, _, _ = select.select([mine], [], [], 1.0)
        if readable:
            break


def store_poll(ready_file: str) -> None:
    import datetime

    from torch.distributed import TCPStore

    port_file = ready_file + ".port"
    pid = os.fork()
    if pid == 0:
        while not os.path.exists(port_file):
            time.sleep(0.05)
        with open(port_file) as f:
            port = int(f.read())
        client = TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(hours=1))
        ready(ready_file, "poller")
        while not client.check(["all_joined"]):  # set by a rank that never comes
            time.sleep(0.05)
        os._exit(0)
    store = TCPStore("127.0.0.1", 0, 2, True, datetime.timedelta(hours=1),
                     wait_for_workers=False)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(store.port))
    os.rename(port_file + ".tmp", port_file)
    ready(ready_file, "owner")
    store.wait(["go"])  # nobody sets it


def _compute(results: mp.Queue, ready_file: str) -> None:
    ready(ready_file, "worker")
    total = 0.0
    for step in range(10**12):  # long, but every line runs
        x = step * 0.5
        total += x * x
        if step % 1000 == 0:
            total %= 1e9
    results.put(total)


def slow(ready_file: str) -> None:
    results: mp.Queue = mp.Queue()
    worker = mp.Process(target=_compute, args=(results, ready_file))
    worker.start()
    ready(ready_file, "driver")
    print(results.get())


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(self.request.recv(1024))


def idle(ready_file: str) -> None:
    server = socketserver.TCPServer(("127.0.0.1", 0), _Echo)
    port = server.server_address[1]
    if os.fork() == 0:
        server.server_close()
        with socket.create_connection(("127.0.0.1", port)) as s:  # one request, answered
            s.sendall(b"ping")
            s.recv(1024)
        ready(ready_file, "client")
        time.sleep(3600)  # until the next request
        os._exit(0)
    ready(ready_file, "server")
    server.serve_forever()


def paused(ready_file: str) -> None:
    total = sum(i * i for i in range(10**5))  # phase one
    ready(ready_file, "sleeper")
    time.sleep(3600)  # between phases
    print(total)


def threads(ready_file: str) -> None:
    import queue
    import threading

    work: queue.Queue = queue.Queue()
    guard = threading.Lock()
    mine, theirs = socket.socketpair()

    def prefetch() -> None:
        work.get()  # nothing is ever queued

    def reader() -> None:
        with guard:
            mine.recv(1024)  # nobody writes: holds the lock forever

    def counter() -> None:
        with guard:
            pass

    started = [threading.Thread(target=reader, daemon=True)]
    started += [threading.Thread(target=counter, daemon=True) for _ in range(33)]
    started += [threading.Thread(target=prefetch, daemon=True) for _ in range(966)]
    for thread in started:
        thread.start()
        if thread is started[0]:
            while not guard.locked():
                time.sleep(0.01)
    ready(ready_file, "pool")
    started[0].join()
    print(theirs)


def _die(_: int) -> int:
    os.kill(os.getpid(), 9)  # the worker is killed (the OOM killer's part)
    return 0


def pool(ready_file: str) -> None:
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as workers:
        pending = workers.map_async(_die, [1])
        ready(ready_file, "driver")
        pending.get()  # the result of the killed worker's task never comes


def family(ready_file: str) -> None:
    import subprocess

    server = subprocess.Popen([sys.executable, __file__, "family_server", ready_file, "."])
    ready(ready_file, "script")
    server.wait()


def family_server(ready_file: str) -> None:
    import subprocess

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    first = os.fork()
    if first == 0:  # the client: detached, in a session of its own
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        listener.close()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"request")
            ready(ready_file, "client")
            s.recv(1024)  # the reply never comes
        os._exit(0)
    os.waitpid(first, 0)  # the intermediate exits at once: reaped, no zombie left
    conn, _ = listener.accept()
    conn.recv(1024)
    read_end, write_end = os.pipe()
    helper = subprocess.Popen(["cat"], stdin=read_end, stdout=subprocess.PIPE)
    ready(ready_file, "server")
    with open(ready_file, "a") as f:
        f.write(f"{helper.pid} helper\n")
    assert helper.stdout is not None
    helper.stdout.read()  # cat waits for input that never comes (write_end stays open)
    print(write_end)


MODES = {"pool": pool, "family": family, "family_server": family_server, "threads": threads,
         "select_loop": select_loop, "store_poll": store_poll, "slow": slow, "idle": idle,
         "paused": paused}

if __name__ == "__main__":
    mode, ready_file, workdir = sys.argv[1:4]
    os.chdir(workdir)
    MODES[mode](ready_file)
