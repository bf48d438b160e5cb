"""Real jobs whose state is decided by a kernel fact under an ordinary-looking Python stack.

    python kernelfact_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE once it is where it stays. Modes:

- ``self_connect``  a ``rollout-client`` connects to 127.0.0.1:P from port P itself (a TCP
                    self-connect: the socket is its own peer) and waits for the server's
                    greeting; the ``policy-server`` then cannot bind P and retries, its log
                    saying "Address already in use" (hung: the client is the suspect).
- ``import_join``   a process imports a module whose body starts a thread that imports that
                    same module, then joins it (cpython#125037: hung, one process).
- ``native_busy``   a packer waits for its ``sha256sum`` child, which hashes /dev/zero on a
                    full CPU (healthy: a non-Python child computing).
- ``tty_paused``    a ``console-relay`` runs a ``rollout-actor`` on a pty and writes ^S (XOFF)
                    into the master; the actor blocks printing, the relay waits to read (hung:
                    the relay is the suspect).
- ``shared_conn``   a ``feature-trainer`` connects to its ``kv-broker`` and forks a
                    ``feature-sampler`` that uses the same connection: the sampler's blocking
                    pop holds the broker's handler, the trainer's push is queued behind it on
                    the one socket (hung: the trainer is the suspect).
- ``held``          a ``job-scheduler`` SIGSTOPs its two ``embed-job`` children for a
                    reservation and polls in a sleep (healthy: paused).
- ``held_waited``   the same stop, but the scheduler waits for its first child to exit (hung:
                    nobody sends SIGCONT while the parent waits).
- ``drop_folder``   a service reads an inotify fd watching an empty directory while two
                    workers wait on its task queue (healthy: idle, waiting for a file).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _has(path: str, tag: str) -> bool:
    file = Path(path)
    return file.exists() and tag in file.read_text().split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client(ready_file: str, port: int) -> None:
    setproctitle.setproctitle("rollout-client")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))  # what a retried connect is given by chance, made certain
    sock.connect(("127.0.0.1", port))  # simultaneous open with itself
    ready(ready_file, "client")
    sock.recv(4)  # the server's greeting, which only this socket could send


def server(ready_file: str, port: int) -> None:
    setproctitle.setproctitle(f"policy-server :{port}")
    told = False
    while True:
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
                s.listen()
                s.accept()
        except OSError as e:
            print(f"bind 127.0.0.1:{port} failed ({e}); retry in 5s", flush=True)
        if not told:
            ready(ready_file, "server")
            told = True
        time.sleep(5)


def self_connect(ready_file: str, workdir: str) -> None:
    port = _free_port()
    first = subprocess.Popen([sys.executable, __file__, "client", ready_file, str(port)])
    while not _has(ready_file, "client"):
        time.sleep(0.02)
    with open(Path(workdir) / "server.log", "w") as log:
        second = subprocess.Popen([sys.executable, __file__, "server", ready_file, str(port)],
                                  stdout=log, stderr=log)
    ready(ready_file, "launcher")
    first.wait()
    second.wait()


_MODULE = '''import threading
import {name}_helpers

warm = threading.Thread(target={name}_helpers.build, name="table-warmup")
warm.start()
{name}_helpers.ready()
warm.join()
'''

_HELPERS = '''import os
import sys


def ready():
    with open(sys.argv[2], "a") as f:
        f.write(f"{{os.getpid()}} importer\\n")


def build():
    import {name}  # the module whose body is still running, in the main thread
    return {name}
'''


def import_join(ready_file: str, workdir: str) -> None:
    setproctitle.setproctitle("eval-runner")
    Path(workdir, "scoring.py").write_text(_MODULE.format(name="scoring"))
    Path(workdir, "scoring_helpers.py").write_text(_HELPERS.format(name="scoring"))
    sys.path.insert(0, workdir)
    import scoring  # noqa: F401  (never returns)


def native_busy(ready_file: str, workdir: str) -> None:
    setproctitle.setproctitle("shard-packer")
    child = subprocess.Popen(["sha256sum", "/dev/zero"], stdout=subprocess.DEVNULL)
    ready(ready_file, "packer")
    child.wait()


def actor(ready_file: str) -> None:
    setproctitle.setproctitle("rollout-actor")
    ready(ready_file, "actor")
    step = 0
    while True:  # the output fills the stopped terminal's buffer, then write() blocks
        print(f"step {step} reward 0.{step % 97:02d}", flush=True)
        step += 1


def tty_paused(ready_file: str, workdir: str) -> None:
    import pty

    setproctitle.setproctitle("console-relay")
    master, slave = pty.openpty()
    os.write(master, b"\x13")  # XOFF, as a "pause the console" would
    subprocess.Popen([sys.executable, __file__, "actor", ready_file], stdout=slave,
                     stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    ready(ready_file, "relay")
    while True:
        os.read(master, 4096)


def broker(ready_file: str, port: int) -> None:
    setproctitle.setproctitle(f"kv-broker :{port}")
    items: list[str] = []
    cond = threading.Condition()
    server = socket.create_server(("127.0.0.1", port))
    ready(ready_file, "broker")

    def serve(conn: socket.socket) -> None:
        lines = conn.makefile("rwb")
        for raw in lines:  # one connection, its requests in order
            verb, _, value = raw.decode().strip().partition(" ")
            with cond:
                if verb == "PUSH":
                    items.append(value)
                    cond.notify_all()
                else:  # POP blocks until an item is there
                    cond.wait_for(lambda: bool(items))
                    value = items.pop(0)
            lines.write(f"OK {value}\n".encode())
            lines.flush()

    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), name="conn-handler", daemon=True).start()


def shared_conn(ready_file: str, workdir: str) -> None:
    setproctitle.setproctitle("feature-trainer")
    port = _free_port()
    subprocess.Popen([sys.executable, __file__, "broker", ready_file, str(port)])
    while not _has(ready_file, "broker"):
        time.sleep(0.02)
    conn = socket.create_connection(("127.0.0.1", port))  # opened before the fork
    if os.fork() == 0:
        setproctitle.setproctitle("feature-sampler")
        conn.sendall(b"POP\n")
        ready(ready_file, "sampler")
        conn.recv(64)
        os._exit(0)
    while not _has(ready_file, "sampler"):
        time.sleep(0.02)
    time.sleep(0.2)  # the pop reaches the broker first (its handler then waits in it)
    conn.sendall(b"PUSH batch-0\n")
    ready(ready_file, "trainer")
    conn.recv(64)


def embed_job(ready_file: str) -> None:
    setproctitle.setproctitle("embed-job")
    ready(ready_file + ".jobs", f"job{os.getpid()}")  # not READY_FILE: they end up stopped
    while True:
        time.sleep(0.5)


def held(ready_file: str, workdir: str, wait: bool = False) -> None:
    import signal

    setproctitle.setproctitle("job-scheduler")
    jobs = [subprocess.Popen([sys.executable, __file__, "embed_job", ready_file])
            for _ in range(2)]
    while not all(_has(ready_file + ".jobs", f"job{j.pid}") for j in jobs):
        time.sleep(0.02)
    for job in jobs:
        os.kill(job.pid, signal.SIGSTOP)
    ready(ready_file, "scheduler")
    if wait:
        jobs[0].wait()
    while True:
        time.sleep(15)  # re-check the reservation


def _drain(tasks: mp.Queue, ready_file: str, n: int) -> None:
    setproctitle.setproctitle(f"convert-worker-{n}")
    ready(ready_file, f"worker{n}")
    while True:
        tasks.get()


def drop_folder(ready_file: str, workdir: str) -> None:
    setproctitle.setproctitle("drop-converter --inbox inbox/")
    inbox = Path(workdir, "inbox")
    inbox.mkdir(parents=True, exist_ok=True)
    tasks: mp.Queue = mp.Queue()
    for n in range(2):
        mp.Process(target=_drain, args=(tasks, ready_file, n), daemon=True).start()
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    libc.inotify_add_watch(fd, str(inbox).encode(), 0x8 | 0x80)  # CLOSE_WRITE | MOVED_TO
    threading.Thread(target=lambda: time.sleep(3600), name="heartbeat", daemon=True).start()
    ready(ready_file, "converter")
    while True:
        os.read(fd, 4096)
        tasks.put("work")


if __name__ == "__main__":
    if sys.argv[1] == "actor":
        actor(sys.argv[2])
    elif sys.argv[1] == "embed_job":
        embed_job(sys.argv[2])
    elif sys.argv[1] == "broker":
        broker(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]))
    else:
        Path(sys.argv[3]).mkdir(parents=True, exist_ok=True)
        modes = {"self_connect": self_connect, "import_join": import_join,
                 "native_busy": native_busy, "drop_folder": drop_folder, "tty_paused": tty_paused,
                 "shared_conn": shared_conn, "held": held,
                 "held_waited": lambda r, w: held(r, w, wait=True)}
        modes[sys.argv[1]](sys.argv[2], sys.argv[3])
