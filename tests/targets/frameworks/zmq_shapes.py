"""Shapes of hangs over pyzmq that have nothing to do with a framework's own code, each with
its healthy twin.

    python zmq_shapes.py MODE READY_FILE WORKDIR

- ``dead_rep``: a trainer drives two rollout workers over REQ/REP (ipc://); worker 0 is killed
  (SIGKILL, as the OOM killer does) while it handles a request and its parent reaps it; the
  trainer's REQ waits for that reply forever, while worker 1, which answered, waits for its
  next request (zeromq/libzmq#1227, zeromq/pyzmq#51: REQ has no timeout and zmq reconnects to
  a dead endpoint silently).
- ``rep_ok``: the twin: both workers answer, round after round (progressing).
- ``term_linger``: a sender child PUSHes results to a collector that has gone, then calls
  ``ctx.term()``: with the default LINGER (-1) term waits for its queued messages forever and
  the parent joining the child waits with it (zeromq/pyzmq#102).
- ``term_linger0``: the twin: the same with ``LINGER=0``: term returns, the child exits, and
  the parent sleeps between phases (paused).
- ``aborted``: a front end (an asyncio HTTP server) hands each request to a worker child over
  PUSH/PULL and awaits its answer; the worker aborts (SIGABRT, as a C++ fatal error or an NCCL
  watchdog's terminate leaves it) on its first request and is never reaped; the client waits
  forever and /health still answers (sgl-project/sglang#18421).
- ``served``: the twin: the worker answers; the front end idles with no request open (idle).
- ``slow_joiner``: a TP scheduler PUBlishes the first batch to its two TP workers and waits on
  a PULL socket for each one's ack; its handshake (re-publish until acked) covers rank 0 only,
  and rank 1, loading its shard, subscribes after the batch went out: a PUB drops what it
  sends before a SUB joins, so rank 1 waits at its first receive while rank 0, acked, waits
  inside its steady-state loop (zeromq/libzmq#2267, libzmq#4656: the "slow joiner").
- ``joined``: the twin: the handshake waits for both ranks, then a step every 50 ms
  (progressing).
- ``go_lost``: an evaluation coordinator, straight-line code with no loop, binds a PUB for
  its "go" and a PULL for the score (TCP), starts an evaluator child that connects to both
  and waits for commands in its loop, publishes "go" at once and waits for the score: the
  "go" went out before the child's SUB joined, so each waits to receive from the other
  (zeromq/pyzmq#1911, zeromq/libzmq#2267: the slow joiner; the coordinator's one receive on
  its bound PULL is no server's wait for its next request).
- ``forwarder``: the healthy twin of a bound socket's wait: a PUB/SUB forwarder
  (``zmq.proxy`` of an XSUB and an XPUB, both bound) whose publishers have all left and whose
  two subscribers wait for their next event: idle, waiting for a publisher to come
  (zeromq/cppzmq#115: "proxy hangs" reports of a quiet broker).

- ``push_unjoined``: a dispatcher binds a PUSH for its work items and starts a worker child
  that should connect a PULL to it; the worker fails at startup (an exception before it
  connects, exit code 1, never reaped) and the dispatcher's first send waits forever: a bound
  PUSH with no peer blocks its send (zeromq/libzmq#179; libzmq#4917, an SGLang scheduler's
  PUSH blocked in ``send_pyobj``).
- ``push_joined``: the twin: the worker connects and takes each item in turn (20 ms of work
  each); the dispatcher, with a high-water mark of 4, spends most of its time in a send that
  waits for room (progressing).
- ``sole_rep_died``: a client starts its one embedding server child (REP over TCP) and sends
  it a batch; the server aborts on input it cannot handle (exit code 3) after taking the
  request, before its reply, and is never reaped: the client's REQ has no peer left at all
  and waits for the reply forever (zeromq/libzmq#1227; blind round 20's 02).
- ``rep_first_client``: the twin: a REP server bound and waiting for its first client, beside
  a set-up child that ran to its end (exit code 0) and was never reaped (idle).
- ``router_worker_died``: an engine core binds a ROUTER and starts two workers (DEALER,
  never reaped, as a vLLM-shaped engine's executor leaves them); it sends both a step and waits
  for both replies: worker 0 answers and waits for its next step, worker 1 raises on the step
  and exits (code 1): the engine's receive still has a peer, which owes it nothing
  (huggingface/trl#3433, vllm-project/vllm#2050: an engine waiting forever on a dead worker;
  blind round 21's 03).
- ``router_worker_slow``: the twin: worker 1 computes the step for minutes before it answers
  (progressing).

Each process appends ``"<pid> <tag>"`` to READY_FILE once it is in its final wait.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import zmq


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def rollout_worker(rank: int, address: str, ready_file: str, die: bool) -> None:
    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    rep.bind(address)
    ready(ready_file, f"worker{rank}")
    while True:
        msg = rep.recv_json()
        if die and rank == 0 and msg["op"] == "update_weights":
            os.kill(os.getpid(), signal.SIGKILL)
        rep.send_json({"rank": rank, "op": msg["op"]})


def trainer(mode: str, ready_file: str, ipc: str) -> None:
    die = mode == "dead_rep"
    workers = [subprocess.Popen([sys.executable, __file__, "worker", ready_file, ipc, str(r),
                                 str(int(die))]) for r in range(2)]

    def reaper() -> None:  # notices an exit and only says so
        while True:
            for rank, proc in enumerate(workers):
                if proc.poll() is not None and not getattr(proc, "said", False):
                    print(f"rollout worker {rank} exited rc={proc.returncode}", flush=True)
                    proc.said = True  # type: ignore[attr-defined]
            time.sleep(0.2)

    threading.Thread(target=reaper, name="reaper", daemon=True).start()
    ctx = zmq.Context()
    socks = []
    for rank in range(2):
        sock = ctx.socket(zmq.REQ)
        sock.connect(f"ipc://{ipc}/rollout{rank}")
        socks.append(sock)
    rounds = 0
    while True:
        op = "update_weights" if die and rounds == 2 else "generate"
        for sock in socks:
            sock.send_json({"op": op})
        if op == "update_weights":
            # ready once worker 0 is gone: the request died with it
            while workers[0].poll() is None:
                time.sleep(0.05)
            ready(ready_file, "trainer")
        for sock in socks:
            sock.recv_json()
        rounds += 1
        if rounds == 3 and not die:
            ready(ready_file, "trainer")


def sender(address: str, linger: int, ready_file: str) -> None:
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, linger)
    push.connect(address)
    for i in range(3):
        push.send_json({"result": i})  # queued: nobody takes them
    push.close()
    ready(ready_file, "sender")
    ctx.term()


def collector_gone(mode: str, ready_file: str, ipc: str) -> None:
    # The collector bound its endpoint, and went away before the sender's results came.
    address = f"ipc://{ipc}/results"
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(address)
    pull.close(linger=0)
    ctx.term()
    child = mp.get_context("spawn").Process(
        target=sender, args=(address, -1 if mode == "term_linger" else 0, ready_file))
    child.start()
    if mode == "term_linger":
        ready(ready_file, "parent")
        child.join()  # waits with it
        return
    child.join()
    ready(ready_file, "parent")
    time.sleep(3600)  # between phases


def worker(ipc: str, abort: bool) -> None:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.connect(f"ipc://{ipc}/requests")
    push.connect(f"ipc://{ipc}/answers")
    while True:
        request = pull.recv()
        if abort:
            os.abort()
        push.send(b"answer to " + request)


def front_end(mode: str, ready_file: str, ipc: str, workdir: str) -> None:
    import asyncio

    import zmq.asyncio

    ctx = zmq.asyncio.Context()
    to_worker, answers = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    to_worker.bind(f"ipc://{ipc}/requests")
    answers.bind(f"ipc://{ipc}/answers")
    child = mp.get_context("spawn").Process(target=worker, args=(ipc, mode == "aborted"))
    child.start()  # never joined: a child that dies stays a zombie

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        await to_worker.send(line.strip())
        answer = await answers.recv()
        writer.write(answer + b"\n")
        await writer.drain()
        writer.close()

    async def run() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with open(os.path.join(workdir, "port"), "w") as f:
            f.write(str(port))
        ready(ready_file, "front")
        async with server:
            await server.serve_forever()

    asyncio.run(run())


def tp_worker(rank: int, ipc: str, ready_file: str, late: bool) -> None:
    ctx = zmq.Context()
    if late:  # its shard loads until the scheduler has published
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(ipc, "published")) and time.monotonic() < deadline:
            time.sleep(0.02)
    sub = ctx.socket(zmq.SUB)
    sub.connect(f"ipc://{ipc}/bcast")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    ack = ctx.socket(zmq.PUSH)
    ack.connect(f"ipc://{ipc}/ack")
    if late:
        ready(ready_file, f"tp{rank}")
    first = sub.recv_json()  # the first batch
    ack.send_json({"rank": rank, "step": first["step"]})
    if not late:
        ready(ready_file, f"tp{rank}")
    while True:
        batch = sub.recv_json()  # the steady state: the next batch
        ack.send_json({"rank": rank, "step": batch["step"]})


def tp_scheduler(mode: str, ready_file: str, ipc: str) -> None:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(f"ipc://{ipc}/bcast")
    acks = ctx.socket(zmq.PULL)
    acks.bind(f"ipc://{ipc}/ack")
    late = mode == "slow_joiner"
    for r in range(2):
        subprocess.Popen([sys.executable, __file__, "tp_worker", ready_file, ipc, str(r),
                          str(int(late and r == 1))])
    got: set[int] = set()
    while len(got) < (1 if late else 2):  # the handshake: re-publish until acked
        pub.send_json({"step": 0})
        if acks.poll(50):
            got.add(acks.recv_json()["rank"])
    open(os.path.join(ipc, "published"), "w").close()
    ready(ready_file, "scheduler")
    step, acked = 0, {0: got}
    while True:
        msg = acks.recv_json()  # slow_joiner: rank 1's ack of step 0 never comes
        acked.setdefault(msg["step"], set()).add(msg["rank"])
        if len(acked.get(step, ())) == 2:
            step += 1
            time.sleep(0.05)
            pub.send_json({"step": step})


def evaluator(ports: str, ready_file: str) -> None:
    ctx = zmq.Context()
    go = ctx.socket(zmq.SUB)
    go.setsockopt(zmq.SUBSCRIBE, b"")
    score = ctx.socket(zmq.PUSH)
    time.sleep(0.3)  # its model loads: the coordinator's "go" goes out before it subscribes
    go_port, score_port = ports.split(",")
    go.connect(f"tcp://127.0.0.1:{go_port}")
    score.connect(f"tcp://127.0.0.1:{score_port}")
    ready(ready_file, "evaluator")
    while True:
        command = go.recv()  # its next command
        if command == b"go":
            score.send_json({"accuracy": 0.5})


def go_lost(ready_file: str) -> None:
    ctx = zmq.Context()
    go = ctx.socket(zmq.PUB)
    go_port = go.bind_to_random_port("tcp://127.0.0.1")
    score = ctx.socket(zmq.PULL)
    score_port = score.bind_to_random_port("tcp://127.0.0.1")
    subprocess.Popen([sys.executable, __file__, "evaluator", ready_file,
                      f"{go_port},{score_port}"])
    go.send(b"go")  # before the evaluator has subscribed: dropped
    ready(ready_file, "coordinator")
    print(score.recv_json())


def subscriber(ipc: str, ready_file: str, rank: int) -> None:
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"ipc://{ipc}/out")
    ready(ready_file, f"subscriber{rank}")
    while True:
        sub.recv()  # the next event


def forwarder(ready_file: str, ipc: str) -> None:
    ctx = zmq.Context()
    front = ctx.socket(zmq.XSUB)
    front.bind(f"ipc://{ipc}/in")
    back = ctx.socket(zmq.XPUB)
    back.bind(f"ipc://{ipc}/out")
    for rank in range(2):
        subprocess.Popen([sys.executable, __file__, "subscriber", ready_file, ipc, str(rank)])
    # a publisher that came, sent its events and left
    publisher = subprocess.Popen([sys.executable, "-c", (
        "import zmq, time; s = zmq.Context().socket(zmq.PUB); "
        f"s.connect('ipc://{ipc}/in'); time.sleep(0.3); s.send(b'tick'); s.close(0)")])


    def left() -> None:  # ready once the publisher has gone (the proxy runs by then)
        publisher.wait()
        ready(ready_file, "forwarder")

    threading.Thread(target=left, daemon=True).start()
    zmq.proxy(front, back)


def puller(port: str, ready_file: str, fail: bool) -> None:
    if fail:  # its start fails before it connects (a missing device, a bad config)
        raise RuntimeError("worker start failed: no device")
    pull = zmq.Context().socket(zmq.PULL)
    pull.connect(f"tcp://127.0.0.1:{port}")
    ready(ready_file, "worker")
    while True:
        pull.recv_json()
        end = time.monotonic() + 0.02
        while time.monotonic() < end:
            pass


def dispatcher(mode: str, ready_file: str) -> None:
    push = zmq.Context().socket(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, 4)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    subprocess.Popen([sys.executable, __file__, "puller", ready_file, str(port),
                      str(int(mode == "push_unjoined"))])
    ready(ready_file, "dispatcher")
    item = 0
    while True:
        push.send_json({"item": item})  # blocks while no peer has room for it
        item += 1


def embed_server(port: str, ready_file: str) -> None:
    rep = zmq.Context().socket(zmq.REP)
    rep.connect(f"tcp://127.0.0.1:{port}")
    ready(ready_file, "server")
    rep.recv_json()
    print("embed_server: unsupported input, aborting", flush=True)
    os._exit(3)  # the request taken, no reply sent


def embed_client(ready_file: str) -> None:
    req = zmq.Context().socket(zmq.REQ)
    port = req.bind_to_random_port("tcp://127.0.0.1")
    server = subprocess.Popen([sys.executable, __file__, "embed_server", ready_file, str(port)])
    req.send_json({"texts": ["caf\u00e9"]})
    # ready once the server is gone, without reaping it (WNOWAIT): the request died with it
    while os.waitid(os.P_PID, server.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        time.sleep(0.05)
    ready(ready_file, "client")
    req.recv_json()


def rep_first_client(ready_file: str) -> None:
    # a set-up step run as a child and never waited for: a zombie that ended well
    subprocess.Popen([sys.executable, "-c", "pass"])
    rep = zmq.Context().socket(zmq.REP)
    rep.bind_to_random_port("tcp://127.0.0.1")
    ready(ready_file, "server")
    while True:
        rep.send_json(rep.recv_json())


def step_worker(rank: int, ipc: str, ready_file: str, mode: str) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(f"ipc://{ipc}/engine")
    sock.send(b"hello")
    ready(ready_file, f"worker{rank}")
    while True:
        step = sock.recv()
        if rank == 1 and mode == "router_worker_died":
            print(f"worker {rank}: execute_model failed on {step!r}: out of memory", flush=True)
            sys.exit(1)
        total = 0
        if rank == 1:  # router_worker_slow: a step of minutes, computed in Python
            for item in range(10**10):
                total += item * item % 7
        sock.send(str(total).encode())


def engine(mode: str, ready_file: str, ipc: str) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(f"ipc://{ipc}/engine")
    workers = [subprocess.Popen([sys.executable, __file__, "step_worker", ready_file, ipc,
                                 str(rank), mode]) for rank in range(2)]
    idents = [router.recv_multipart()[0] for _ in workers]
    for ident in idents:
        router.send_multipart([ident, b"step 1"])
    router.recv_multipart()  # the first reply: worker 0's (worker 1 dies, or computes)
    if mode == "router_worker_died":  # ready once worker 1 is gone, left unreaped
        os.waitid(os.P_PID, workers[1].pid, os.WEXITED | os.WNOWAIT)
    ready(ready_file, "engine")
    router.recv_multipart()


def main(mode: str, ready_file: str, workdir: str) -> None:
    # A short directory under /tmp: a Unix socket path holds at most 107 bytes.
    ipc = tempfile.mkdtemp(prefix="hs-zmqs-")
    with open(os.path.join(workdir, "ipc_dir"), "w") as f:
        f.write(ipc)
    if mode in ("dead_rep", "rep_ok"):
        trainer(mode, ready_file, ipc)
    elif mode in ("aborted", "served"):
        front_end(mode, ready_file, ipc, workdir)
    elif mode in ("slow_joiner", "joined"):
        tp_scheduler(mode, ready_file, ipc)
    elif mode == "go_lost":
        go_lost(ready_file)
    elif mode == "forwarder":
        forwarder(ready_file, ipc)
    elif mode in ("push_unjoined", "push_joined"):
        dispatcher(mode, ready_file)
    elif mode == "sole_rep_died":
        embed_client(ready_file)
    elif mode == "rep_first_client":
        rep_first_client(ready_file)
    elif mode in ("router_worker_died", "router_worker_slow"):
        engine(mode, ready_file, ipc)
    else:
        collector_gone(mode, ready_file, ipc)


if __name__ == "__main__":
    if sys.argv[1] == "evaluator":
        evaluator(sys.argv[3], sys.argv[2])
    elif sys.argv[1] == "embed_server":
        embed_server(sys.argv[3], sys.argv[2])
    elif sys.argv[1] == "puller":
        puller(sys.argv[3], sys.argv[2], sys.argv[4] == "1")
    elif sys.argv[1] == "subscriber":
        subscriber(sys.argv[3], sys.argv[2], int(sys.argv[4]))
    elif sys.argv[1] == "step_worker":
        step_worker(int(sys.argv[4]), sys.argv[3], sys.argv[2], sys.argv[5])
    elif sys.argv[1] == "tp_worker":
        _, _, ready_file, ipc, rank, late = sys.argv
        tp_worker(int(rank), ipc, ready_file, late == "1")
    elif sys.argv[1] == "worker":
        _, _, ready_file, ipc, rank, die = sys.argv
        rollout_worker(int(rank), f"ipc://{ipc}/rollout{rank}", ready_file, die == "1")
    else:
        main(*sys.argv[1:4])
