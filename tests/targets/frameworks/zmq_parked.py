"""A trainer and a curriculum service over pyzmq (REQ to ROUTER, TCP): the service builds
batch k from the losses the trainer reports for batch k-1, and parks a request for a batch
until those losses came (blind round 38's 05: Accelerate's DataLoaderShard asks one batch
ahead; huggingface/accelerate#2884, pytorch/pytorch#3356).

    python zmq_parked.py MODE READY_FILE WORKDIR

- ``ahead``     the trainer asks for batch 1 before it reports batch 0's losses (a loader that
                looks one batch ahead): the service took the request and holds it, waiting for
                a report the trainer sends only after its answer.
- ``reported``  the twin: the trainer reports each batch's losses, then asks for the next one
                (progressing).

READY_FILE gets ``"<pid> service"`` once the service is bound and ``"<pid> trainer"`` once the
trainer has its first batch (``ahead``: just before it asks for the second).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def ready(path: str, role: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {role}\n")


def service(ready_file: str, port_file: str) -> None:
    import zmq

    router = zmq.Context().socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(port_file + ".tmp", port_file)
    ready(ready_file, "service")
    reported = {-1}
    parked: dict[int, bytes] = {}
    while True:
        who, _, raw = router.recv_multipart()
        kind, k = raw.decode().split()
        step = int(k)
        if kind == "report":
            reported.add(step)
            router.send_multipart([who, b"", b"ok"])
            step += 1
            who = parked.pop(step, b"")
            if not who:
                continue
        elif step - 1 not in reported:
            parked[step] = who  # answered once the losses of the batch before it come
            continue
        router.send_multipart([who, b"", f"batch {step}".encode()])


def trainer(mode: str, ready_file: str, port: int) -> None:
    import zmq

    req = zmq.Context().socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")

    def ask(message: str) -> bytes:
        req.send(message.encode())
        return req.recv()

    ask("get 0")
    step = 0
    while True:
        time.sleep(0.02)  # the step's forward and backward
        if mode == "ahead":
            ready(ready_file, "trainer")
            ask(f"get {step + 1}")  # the look-ahead: before this batch's losses are reported
        ask(f"report {step}")
        ask(f"get {step + 1}")
        if step == 5:
            ready(ready_file, "trainer")
        step += 1


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    port_file = os.path.join(workdir, "port")
    if mode == "service":
        service(ready_file, port_file)
        return
    subprocess.Popen([sys.executable, __file__, "service", ready_file, workdir])
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file):
        if time.monotonic() > deadline:
            raise SystemExit("the service did not start")
        time.sleep(0.02)
    with open(port_file) as f:
        port = int(f.read())
    trainer(mode, ready_file, port)


if __name__ == "__main__":
    main()
