"""Programs whose GPU runs one known kernel while the host waits: for ``hangscope dump --kernels``.

Run on the device machine (torch with CUDA, Triton)::

    PYTHONPATH=. python demo/gpu/kernel_jobs.py MODE READY_FILE

- ``item``: ``torch.cuda._sleep`` spins for an hour, then ``(x * 2).sum().item()`` waits.
- ``triton_flag``: a Triton kernel on every SM polls a flag nobody sets (a stuck custom
  all-reduce's shape), then ``torch.cuda.synchronize()``.
- ``finite``: one long but finite kernel (``torch.cuda._sleep`` of about 25 s), then
  ``.item()``; prints ``RESULT 42.0`` when it finishes: an inspection mid-run must not harm it.

Each writes READY_FILE (its PID) once the kernel is queued.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _ready(path: str) -> None:
    Path(path + ".tmp").write_text(str(os.getpid()))
    os.replace(path + ".tmp", path)


def item(ready: str) -> None:
    import torch

    x = torch.ones(1024, device="cuda")
    torch.cuda._sleep(int(2e9 * 3600))  # about an hour of clock cycles
    _ready(ready)
    print((x * 2).sum().item())  # HANG: waits behind the spinning kernel


def triton_flag(ready: str) -> None:
    import torch

    from demo.gpu.healthy import launch_flag_spin

    launch_flag_spin(1)  # one block per SM
    _ready(ready)
    torch.cuda.synchronize()  # HANG: nobody sets the flag


def finite(ready: str) -> None:
    import torch

    x = torch.full((1024,), 42.0, device="cuda")
    torch.cuda._sleep(int(1.98e9 * float(os.environ.get("FINITE_SECONDS", "25"))))
    _ready(ready)
    print("RESULT", x.max().item(), flush=True)


if __name__ == "__main__":
    {"item": item, "triton_flag": triton_flag, "finite": finite}[sys.argv[1]](sys.argv[2])
