"""Real hung jobs whose wait chain crosses processes to the right suspect (issue 17).

    python chain_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in. Modes,
each the mechanism of a real report (the tests cite it):

- ``daemon_output`` a tool reads a shell script's output with ``check_output``; the script
                    starts a daemon with ``&`` (it inherits the stdout pipe) and exits: the
                    tool waits for an EOF the daemon never gives; the shell is a zombie.
- ``heartbeat_output`` the same, but the daemon is a live heartbeat: it writes a line to its
                    own file every 0.1 s (its counters move) and never touches the pipe.
- ``heartbeat_busy`` its healthy twin: the script computes and prints a line every 0.1 s
                    while a heartbeat daemon (its stdout sent to /dev/null) beats beside it.
- ``asker``         a driver starts a child with ``stdin=PIPE`` it never writes and waits for
                    it to exit; the child asks ``input()``; a peer waits on the driver's
                    Unix socket for the child's answer.
- ``early_store``   3 gloo ranks; rank 1 runs out of batches a step early and, its loop done,
                    waits with ``store.get`` for a "finished" key of the TCPStore that rank 0
                    serves, while ranks 0 and 2 wait in their next all_reduce.
- ``early_pair``    the same with 2 ranks: rank 0 in all_reduce, rank 1 in the store get.
- ``early_barrier`` 3 gloo ranks; rank 1, its loop done early, enters ``dist.barrier()``
                    while ranks 0 and 2 wait in their next all_reduce (of a different size).
- ``pool_chain``    a 2-worker Pool runs ``starmap`` over three tasks: the first two wait on a
                    Manager Event that only the third sets, queued behind them.
- ``callback``      two single-threaded servers on 127.0.0.1: A's handler asks B, B's handler
                    asks A back, which cannot accept while in its handler; a client asks A.
- ``prefixed_key`` 3 gloo ranks; rank 0 saves step 2 and marks it through a PrefixStore
                    (its key gains the prefix), then waits in all_reduce; ranks 1 and 2
                    ``store.wait`` for the unprefixed key on the raw TCPStore.
- ``both_send``     a mirror sync over loopback TCP: each side pushes its whole snapshot with
                    ``sendall`` before it reads the other's; both socket buffers fill up.
- ``half_close``    a threaded report server (TCP, or ``half_close unix``: a Unix socket) whose
                    handler thread reads each upload until EOF; an uploader sends its report
                    and, without shutting down its write half, waits for the receipt.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

MODE, READY, WORKDIR = sys.argv[1], sys.argv[2], Path(sys.argv[3])
PY = sys.executable


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def wait_for_line(tag: str, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            for line in Path(READY).read_text().splitlines():
                pid, _, name = line.partition(" ")
                if name == tag:
                    return int(pid)
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {tag}")


def me(mode: str, *extra: str) -> list[str]:
    return [PY, __file__, mode, READY, str(WORKDIR), *extra]


# -- a daemon that keeps its parent's output pipe ----------------------------------------

def daemon_output() -> None:
    script = WORKDIR / "bring_up.sh"
    daemon = " ".join(me("daemon"))
    script.write_text(f"#!/bin/sh\n{daemon} &\necho \"$$ shell\" >> {READY}\nexit 0\n")
    ready("tool")
    out = subprocess.check_output(["sh", str(script)])  # reads stdout until EOF
    print(out)


def daemon() -> None:
    ready("daemon")
    threading.Event().wait()  # a long-lived agent: it never writes or closes stdout


def heartbeat_output(busy: bool = False) -> None:
    script = WORKDIR / "bring_up.sh"
    beat = " ".join(me("heartbeat"))
    # The twin's script works (a line every 0.1 s, for ever) and its heartbeat's stdout goes
    # to /dev/null; the hung one's script exits and its heartbeat keeps the pipe.
    work = (f"{beat} > /dev/null &\necho \"$$ shell\" >> {READY}\n"
            "while true; do echo step; i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; "
            "sleep 0.1; done\n") if busy else \
        f"{beat} &\necho \"$$ shell\" >> {READY}\nexit 0\n"
    script.write_text(f"#!/bin/sh\n{work}")
    ready("tool")
    with subprocess.Popen(["sh", str(script)], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        for _ in proc.stdout:  # reads the script's output until EOF
            pass


def heartbeat() -> None:
    """A monitor's heartbeat: a timestamp in its own file every 0.1 s, nothing else."""
    ready("heartbeat")
    with open(WORKDIR / "heartbeat.log", "a") as log:
        while True:
            log.write(f"{time.time():.3f} alive\n")
            log.flush()
            time.sleep(0.1)


# -- a prompt on a stdin pipe nobody writes ----------------------------------------------

def asker_driver() -> None:
    path = str(WORKDIR / "answers.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    subprocess.Popen(me("asker_peer", path))
    conn, _ = server.accept()
    child = subprocess.Popen(me("asker_child"), stdin=subprocess.PIPE)
    wait_for_line("child")
    ready("driver")
    child.wait()  # never writes the child's stdin
    conn.sendall(b"done")


def asker_child() -> None:
    ready("child")
    answer = input("Replace the existing index? [y/N] ")
    print(answer)


def asker_peer(path: str) -> None:
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(path)
    ready("peer")
    conn.recv(16)  # the driver answers after its child exits


# -- a rank that left its loop early -------------------------------------------------------

def early_job(world: int, then: str = "store") -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = [subprocess.Popen(me("early_rank", str(rank), str(port), str(world), then),
                              env={**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world)})
             for rank in range(world)]
    for rank in ranks:
        rank.wait()


def early_rank(rank: int, port: int, world: int) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0,
                          timeout=datetime.timedelta(hours=1))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=1))
    batches = 3 if rank == 1 else 4  # uneven shards: rank 1 has one batch fewer
    grad = torch.ones(8)
    for step in range(batches):
        if step == batches - 1 and rank != 1:
            ready(f"rank{rank}")
        dist.all_reduce(grad)
    ready(f"rank{rank}")
    if sys.argv[7] == "barrier":
        dist.barrier()  # the others' all_reduce moves 8 floats: gloo never pairs the two
    store.get("finished")  # nobody sets it: the others are still in the loop


# -- a pool saturated by tasks that wait for a task ------------------------------------------

def stitch(kind: str, index: int, done: object) -> int:
    if kind == "wait":
        ready(f"task_{index}")
        done.wait()  # type: ignore[attr-defined]  # a Manager Event proxy: set by a later task
    else:
        done.set()  # type: ignore[attr-defined]
    return index


def pool_chain() -> None:
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Manager() as manager, ctx.Pool(2) as pool:
        done = manager.Event()
        ready("driver")
        pool.starmap(stitch, [("wait", 0, done), ("wait", 1, done), ("set", 2, done)],
                     chunksize=1)


# -- two single-threaded servers that call each other ------------------------------------

def callback_job() -> None:
    ports = {}
    for name in ("a", "b"):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports[name] = probe.getsockname()[1]
    servers = [subprocess.Popen(me("callback_server", name, str(ports[name]),
                                   str(ports["b" if name == "a" else "a"])))
               for name in ("a", "b")]
    wait_for_line("server_a")
    wait_for_line("server_b")
    client = subprocess.Popen(me("callback_client", str(ports["a"])))
    client.wait()
    for server in servers:
        server.wait()


def ask(port: int, what: bytes) -> bytes:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(what + b"\n")
    return conn.makefile("rb").readline()


def callback_server(name: str, port: int, other: int) -> None:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            what = self.rfile.readline().strip()
            if name == "a" and what == b"lookup":
                ready("a_asks_b")
                reply = ask(other, b"resolve")  # B calls A back: A is still here
            elif name == "b":
                ready("b_asks_a")
                reply = ask(other, b"version")
            else:
                reply = b"v1"
            self.wfile.write(reply + b"\n")

    server = socketserver.TCPServer(("127.0.0.1", port), Handler)  # one thread serves
    ready(f"server_{name}")
    server.serve_forever()


def callback_client(port: int) -> None:
    ready("client")
    print(ask(port, b"lookup"))


# -- a key set under a prefix, waited for without it ----------------------------------------

def prefixed_job() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = [subprocess.Popen(me("prefixed_rank", str(rank), str(port)),
                              env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "3"})
             for rank in range(3)]
    for rank in ranks:
        rank.wait()


def prefixed_rank(rank: int, port: int) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, 3, is_master=rank == 0,
                          timeout=datetime.timedelta(hours=1))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=3,
                            timeout=datetime.timedelta(hours=1))
    step = 2
    if rank == 0:
        dist.PrefixStore("ckpt", store).set(f"step{step}/saved", "1")  # "ckpt/step2/saved"
        ready("rank0")
        dist.all_reduce(torch.ones(4))  # the others never come: they wait for the marker
    else:
        ready(f"rank{rank}")
        store.wait([f"step{step}/saved"])


# -- both ends of one connection wait to read it ----------------------------------------

def half_close_job(family: str) -> None:
    path = WORKDIR / "reports.sock"
    if family == "unix":
        address: str = str(path)
    else:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            address = str(probe.getsockname()[1])
    server = subprocess.Popen(me("half_close_server", family, address))
    wait_for_line("server")
    uploader = subprocess.Popen(me("half_close_uploader", family, address))
    uploader.wait()
    server.wait()


def _connect(family: str, address: str) -> socket.socket:
    if family == "unix":
        conn = socket.socket(socket.AF_UNIX)
        conn.connect(address)
        return conn
    return socket.create_connection(("127.0.0.1", int(address)))


def half_close_server(family: str, address: str) -> None:
    class Upload(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            ready("reader")
            report = self.rfile.read()  # the upload ends at EOF
            self.wfile.write(b"receipt %d\n" % len(report))

    server: socketserver.BaseServer
    if family == "unix":
        server = socketserver.ThreadingUnixStreamServer(address, Upload)
    else:
        server = socketserver.ThreadingTCPServer(("127.0.0.1", int(address)), Upload)
    ready("server")
    server.serve_forever()


def half_close_uploader(family: str, address: str) -> None:
    conn = _connect(family, address)
    conn.sendall(b'{"step": 7, "loss": 0.25}\n')
    wait_for_line("reader")
    time.sleep(0.2)  # the reader is in its read, past the bytes sent
    ready("uploader")
    print(conn.recv(64))  # no conn.shutdown(socket.SHUT_WR): the reader never sees EOF


# -- both ends of one connection wait to write it ---------------------------------------

SNAPSHOT = b"x" * (64 << 20)  # far more than both socket buffers hold


def both_send_job() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    peer = subprocess.Popen(me("both_send_peer", str(listener.getsockname()[1])))
    conn, _ = listener.accept()
    ready("primary")
    conn.sendall(SNAPSHOT)  # reads the replica's snapshot only after sending its own
    conn.recv(1)
    peer.wait()


def both_send_peer(port: int) -> None:
    conn = socket.create_connection(("127.0.0.1", port))
    ready("replica")
    conn.sendall(SNAPSHOT)
    conn.recv(1)


MODES = {
    "daemon_output": daemon_output, "daemon": daemon,
    "heartbeat_output": heartbeat_output, "heartbeat": heartbeat,
    "heartbeat_busy": lambda: heartbeat_output(busy=True),
    "asker": asker_driver, "asker_child": asker_child,
    "asker_peer": lambda: asker_peer(sys.argv[4]),
    "early_store": lambda: early_job(3), "early_pair": lambda: early_job(2),
    "early_barrier": lambda: early_job(3, "barrier"),
    "early_rank": lambda: early_rank(int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])),
    "pool_chain": pool_chain,
    "callback": callback_job,
    "callback_server": lambda: callback_server(sys.argv[4], int(sys.argv[5]), int(sys.argv[6])),
    "callback_client": lambda: callback_client(int(sys.argv[4])),
    "prefixed_key": prefixed_job,
    "prefixed_rank": lambda: prefixed_rank(int(sys.argv[4]), int(sys.argv[5])),
    "both_send": both_send_job,
    "both_send_peer": lambda: both_send_peer(int(sys.argv[4])),
    "half_close": lambda: half_close_job(sys.argv[4] if len(sys.argv) > 4 else "tcp"),
    "half_close_server": lambda: half_close_server(sys.argv[4], sys.argv[5]),
    "half_close_uploader": lambda: half_close_uploader(sys.argv[4], sys.argv[5]),
}

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        MODES[MODE]()
