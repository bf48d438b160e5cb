"""pyzmq sockets left connected to nothing, each with its healthy twin:

    python zmq_unconnected.py MODE READY_FILE WORKDIR

- ``ipc_twins``: two replicas of one model, each a front end that binds its PUSH and PULL on
  ``ipc://`` paths named after the model (as SGLang- and vLLM-shaped servers name theirs) and
  an engine that connects to them. The second front end's bind takes the paths over silently,
  both engines connect to it, and the first front end's PUSH has no peer: its first send waits
  forever (zeromq/libzmq#2059, zeromq/pyzmq#209; blind round 34's 05).
- ``ipc_unique``: the twin: each replica's paths carry its own name; both serve their batch
  and wait for the next (idle).
- ``req_bare``: two REQ front ends ask a ROUTER scheduler; it answers ``[identity, body]``,
  without the empty delimiter frame a REQ expects: each REQ drops the reply and its
  connection, and waits in ``recv`` forever (zeromq/zguide#797; blind round 34's 02).
- ``req_enveloped``: the twin: the scheduler answers ``[identity, b"", body]``; the front ends
  ask again and again (progressing).
- ``sub_dials``: a router's ``kv-events`` thread subscribes to an engine's events with a SUB
  that connects to a TCP port, its main thread waiting for the first batch; the engine's
  publisher (a child) connects its PUB to the same port, as vLLM's KV-events publisher does
  for any endpoint that is not a wildcard: nobody binds, both retry their connects, the
  batches are dropped and the router waits forever (vllm PR #33120; blind round 43's 04).
- ``sub_served``: the twin: the publisher binds the port; the router receives a batch every
  0.2 s (progressing).
- ``sub_alone``: the router alone, its SUB dialling a port on which nothing listens (the
  engine not started, or started elsewhere); it says the endpoint in its output.

READY_FILE gets ``"<pid> <tag>"`` from each process once it is in its final state.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _paths(run: str, replica: str, mode: str) -> tuple[str, str]:
    name = "tinylm" if mode == "ipc_twins" else f"tinylm-{replica}"
    return f"ipc://{run}/{name}-in", f"ipc://{run}/{name}-out"


def front_end(replica: str, mode: str, ready_file: str, run: str) -> None:
    import zmq

    ctx = zmq.Context()
    prompts, results = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    into, out = _paths(run, replica, mode)
    prompts.bind(into)
    results.bind(out)
    ready(ready_file, f"{replica}-bound")
    while "engines" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)
    for n in range(4):
        if n == 0:  # a send with no peer never returns: said ready just after it began
            threading.Timer(0.5, ready, (ready_file, replica)).start()
        prompts.send_pyobj({"replica": replica, "prompt": n})
    for _ in range(4):
        results.recv_pyobj()
    while True:  # the next batch
        prompts.send_pyobj({"replica": replica, "prompt": results.recv_pyobj()})


def engine(replica: str, mode: str, ready_file: str, run: str) -> None:
    import zmq

    ctx = zmq.Context()
    prompts, results = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    into, out = _paths(run, replica, mode)
    prompts.connect(into)
    results.connect(out)
    ready(ready_file, f"engine-{replica}")
    while True:
        results.send_pyobj({"done": prompts.recv_pyobj()})


def scheduler(port: int, mode: str, ready_file: str) -> None:
    import zmq

    router = zmq.Context().socket(zmq.ROUTER)
    router.bind(f"tcp://127.0.0.1:{port}")
    ready(ready_file, "scheduler")
    while True:
        identity, _empty, body = router.recv_multipart()
        reply = [identity, body] if mode == "req_bare" else [identity, b"", body]
        router.send_multipart(reply)


def client(port: int, ready_file: str, tag: str) -> None:
    import zmq

    req = zmq.Context().socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")
    threading.Timer(1.0, ready, (ready_file, tag)).start()  # inside recv by then
    while True:
        req.send(b"rerank 3 documents")
        req.recv()
        time.sleep(0.05)


def publisher(port: int, mode: str) -> None:
    import zmq

    pub = zmq.Context().socket(zmq.PUB)
    if mode == "sub_served":
        pub.bind(f"tcp://127.0.0.1:{port}")
    else:  # a concrete address: connected, as the subscriber's is
        pub.connect(f"tcp://127.0.0.1:{port}")
    while True:  # a batch of block events per scheduler step
        pub.send_multipart([b"kv", b"BlockStored 2 blocks"])
        time.sleep(0.2)


def subscriber(port: int, mode: str, ready_file: str) -> None:
    import zmq

    first = threading.Event()

    def events() -> None:
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.connect(f"tcp://127.0.0.1:{port}")
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        while True:
            sub.recv_multipart()
            first.set()

    threading.Thread(target=events, name="kv-events", daemon=True).start()
    print(f"subscribed to tcp://127.0.0.1:{port}", flush=True)
    if mode in ("sub_dials", "sub_alone"):  # its state: both threads asleep in waits for 2.5 s
        threading.Timer(2.5, ready, (ready_file, "router")).start()
    first.wait()  # the engine is routable once its first batch came
    ready(ready_file, "router")
    while True:
        time.sleep(0.5)  # routing, from the events the other thread keeps


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    # an ipc:// path holds at most 107 bytes (sockaddr_un): a short directory, not the test's
    # (WORKDIR/run_dir names it, for the test to remove)
    run = tempfile.mkdtemp(prefix="hs-ipc-")
    with open(os.path.join(workdir, "run_dir"), "w") as f:
        f.write(run)
    me = [sys.executable, __file__]
    kids = []
    if mode.startswith("sub_"):  # this process is the router
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if mode != "sub_alone":
            kids.append(subprocess.Popen([*me, "publisher", str(port), mode]))
        subscriber(port, mode, ready_file)
    if mode.startswith("ipc_"):
        for replica in ("blue", "green"):  # green binds second
            kids.append(subprocess.Popen([*me, "front", replica, mode, ready_file, run]))
            while not os.path.exists(ready_file) or \
                    f"{replica}-bound" not in open(ready_file).read():  # noqa: SIM115
                time.sleep(0.05)
        for replica in ("blue", "green"):
            kids.append(subprocess.Popen([*me, "engine", replica, mode, ready_file, run]))
        while open(ready_file).read().count("engine-") < 2:  # noqa: SIM115
            time.sleep(0.05)
        ready(ready_file, "engines")
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        kids.append(subprocess.Popen([*me, "scheduler", str(port), mode, ready_file]))
        while not os.path.exists(ready_file) or "scheduler" not in open(ready_file).read():  # noqa: SIM115
            time.sleep(0.05)
        kids += [subprocess.Popen([*me, "client", str(port), ready_file, f"front{n}"])
                 for n in range(2)]
    for kid in kids:
        kid.wait()


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "front":
        front_end(*sys.argv[2:6])
    elif role == "engine":
        engine(*sys.argv[2:6])
    elif role == "publisher":
        publisher(int(sys.argv[2]), sys.argv[3])
    elif role == "scheduler":
        scheduler(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif role == "client":
        client(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        main()
