"""An SGLang-shaped pipeline (tokenizer manager -> scheduler -> detokenizer, pyzmq PUSH/PULL over
``ipc://`` paths named as SGLang's ``PortArgs.init_new()`` names them: a fresh temporary file's
name per channel), its two children started with multiprocessing's ``spawn``:

    python zmq_names.py MODE READY_FILE WORKDIR

- ``names_at_import``: the names are made at import, in a module-level "global args" object;
  ``spawn`` imports the module again in each child, which makes names of its own: every
  process binds a path nobody dials and dials paths nobody binds, and the tokenizer manager's
  ``generate`` waits for its output forever (zeromq/pyzmq#153: a connect to an ipc path nobody
  binds never fails; blind round 37's 01).
- ``names_passed``: the twin: the names are made once, in the parent, and passed to the
  children; the request is answered and every process waits for the next (idle).

READY_FILE gets ``"<pid> <tag>"`` from each process once it is in its final state; WORKDIR
gets ``run_dir``, the short directory of the ipc paths (for the test to remove).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

#: The directory of the ipc paths, handed to the spawned children in the environment.
RUN_DIR = "HS_ZMQ_NAMES_DIR"


@dataclass
class PortArgs:
    tokenizer: str
    scheduler_input: str
    detokenizer: str

    @staticmethod
    def init_new() -> PortArgs:
        def name() -> str:
            return "ipc://" + tempfile.NamedTemporaryFile(dir=os.environ[RUN_DIR],
                                                          delete=False).name
        return PortArgs(name(), name(), name())


if RUN_DIR not in os.environ:  # the launcher, before it sets the directory up
    os.environ[RUN_DIR] = tempfile.mkdtemp(prefix="hs-names-")
PORT_ARGS = PortArgs.init_new()  # made again in every spawned child: the bug


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def run_stage(ports: PortArgs | None, ready_file: str, stage: str) -> None:
    """The scheduler (its input from the tokenizer manager, its outputs to the detokenizer)
    or the detokenizer (outputs in, texts to the tokenizer manager): a PULL it binds, a PUSH
    it connects, a loop handing each message on."""
    import zmq

    ports = ports or PORT_ARGS
    bind, connect = ((ports.scheduler_input, ports.detokenizer) if stage == "scheduler"
                     else (ports.detokenizer, ports.tokenizer))
    ctx = zmq.Context()
    inbox, outbox = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    inbox.bind(bind)
    outbox.connect(connect)
    ready(ready_file, stage)
    while True:
        message = inbox.recv_pyobj()
        outbox.send_pyobj({"rid": message["rid"], stage: [1, 2, 3]})


def generate(texts: object, requests: object, ready_file: str | None) -> object:
    requests.send_pyobj({"rid": "req-0", "input_ids": [1, 2]})  # type: ignore[attr-defined]
    if ready_file:  # inside the receive a moment later
        threading.Timer(0.5, ready, (ready_file, "tokenizer")).start()
    return texts.recv_pyobj()  # type: ignore[attr-defined]


def main() -> None:
    import zmq

    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "run_dir"), "w") as f:
        f.write(os.environ[RUN_DIR])
    mp.set_start_method("spawn")
    passed = PORT_ARGS if mode == "names_passed" else None
    kids = [mp.Process(target=run_stage, args=(passed, ready_file, stage), name=stage)
            for stage in ("scheduler", "detokenizer")]
    for kid in kids:
        kid.start()
    while not os.path.exists(ready_file) or open(ready_file).read().count(" ") < 2:  # noqa: SIM115
        time.sleep(0.05)  # the children's ready lines (the test's start deadline bounds it)
    ctx = zmq.Context()
    texts, requests = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    texts.bind(PORT_ARGS.tokenizer)
    requests.connect(PORT_ARGS.scheduler_input)
    passing = mode == "names_passed"
    generate(texts, requests, None if passing else ready_file)  # names_at_import: never returns
    ready(ready_file, "tokenizer")
    while True:  # the next request's output
        texts.recv_pyobj()


if __name__ == "__main__":
    main()
