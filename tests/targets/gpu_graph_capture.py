"""GPU capture for the CUDA-graph-capture rule: a thread blocked *inside* torch's capture API.

    python tests/targets/gpu_graph_capture.py --run OUT_DIR

Starts this file as a target that calls ``torch.cuda.make_graphed_callables`` on a module
whose forward, once the stream is capturing, waits on an Event forever (a peer that never
answers). The blocked stack then holds ``make_graphed_callables (torch/cuda/graphs.py)``: the
library frame the capture rule keys on (a user's ``with torch.cuda.graph():`` body leaves none).
Writes to OUT_DIR: ``graphed.native.json`` and ``graphed.py.json`` (py-spy), ``graphed.dump.json``
(hangscope), ``graphed.proc.txt`` (tid, comm, state, wchan per thread), ``run.log``; then kills
the target. Exit status 0 when every file was written.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def target(ready_file: str) -> None:
    import torch

    class Blocked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)
            self.peer = threading.Event()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if torch.cuda.is_current_stream_capturing():
                with open(ready_file, "a") as f:
                    f.write(f"{os.getpid()} capturing\n")
                self.peer.wait()  # never set: blocked inside the capture
            return self.lin(x)

    module = Blocked().cuda()
    x = torch.randn(4, 16, device="cuda", requires_grad=True)
    torch.cuda.make_graphed_callables(module, (x,))


def _proc_txt(pid: int) -> str:
    lines = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        base = f"/proc/{pid}/task/{tid}"
        try:
            comm = Path(f"{base}/comm").read_text().strip()
            state = Path(f"{base}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"{base}/wchan").read_text().strip() or "0"
        except OSError:
            continue
        lines.append(f"{tid} {comm} {state} {wchan}")
    return "\n".join(lines) + "\n"


def run(out: Path) -> int:
    from hangscope.collect.pyspy import find_pyspy

    out.mkdir(parents=True, exist_ok=True)
    ready = out / "ready"
    ready.write_text("")
    log = open(out / "run.log", "wb")  # noqa: SIM115  (closed in finally)
    proc = subprocess.Popen([sys.executable, __file__, "--target", str(ready)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "capturing" not in ready.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                print("the target never reached the capture; see run.log", file=sys.stderr)
                return 1
            time.sleep(0.05)
        time.sleep(1.0)  # let the wait settle into Event.wait
        pyspy = find_pyspy()
        for kind, flags in (("native", ["--native"]), ("py", [])):
            done = subprocess.run([pyspy, "dump", "--json", *flags, "--pid", str(proc.pid)],
                                  capture_output=True, text=True, timeout=60, check=False)
            (out / f"graphed.{kind}.json").write_text(done.stdout)
        (out / "graphed.proc.txt").write_text(_proc_txt(proc.pid))
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "hangscope", "dump", str(proc.pid),
                               "--format", "json"], capture_output=True, text=True,
                              timeout=120, env=env, check=False)
        (out / "graphed.dump.json").write_text(done.stdout)
        return 0 if all((out / f"graphed.{k}.json").stat().st_size for k in
                        ("native", "py", "dump")) else 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=30)
        log.close()


if __name__ == "__main__":
    if sys.argv[1] == "--target":
        target(sys.argv[2])
    else:
        sys.exit(run(Path(sys.argv[2])))
