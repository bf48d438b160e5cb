"""Busy or progressing? The progress watcher on real GPU workloads, healthy and hung.

Runs on a machine with an NVIDIA GPU and torch (the device machine; docs/gpu.md)::

    NCCL_NVLS_ENABLE=0 PYTHONPATH=. python demo/gpu/healthy.py --out "$OUT" [--quick] [--runs 10]

Each workload is a real process (``python demo/gpu/healthy.py worker NAME``) that appends
``"<pid> <name>"`` to a ready file once in its steady state; the script polls that file with a
deadline, then runs ``ProgressWatcher`` + ``decide`` over ``--runs`` windows of ``--window``
seconds, one workload at a time (so the GPU's GPM counters belong to it), and kills it.

Healthy: ``matmul`` (bf16 8192² matmul loop), ``train`` (a small MLP's forward/backward/AdamW
loop, ``loss.item()`` each step), ``decode`` (a loop of tiny kernels with ``.item()`` per token).
Hung: ``spin`` (``torch.cuda._sleep`` for an hour, then ``torch.cuda.synchronize()``) and
``spin_flag`` (a Triton kernel on every SM spinning on a flag nobody sets; skipped without
Triton). Results: ``OUT/progress_gpu.json`` (decisions, reasons, GPM metrics, classic
``utilization.gpu``, timings), ``OUT/fixtures/gpu_NAME.json`` (the first run's evidence, for
tests/fixtures/progress/) and a table on stdout. Exit 0 when every healthy workload reads
progressing and every hung one stuck in every run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HEALTHY = ("matmul", "train", "decode")
HUNG = ("spin", "spin_flag")
SPIN_CYCLES = int(2e9 * 3600)  # ~1 h of GPU spinning at ~2 GHz


def _ready(path: str, what: str) -> None:
    with open(path, "a") as fh:
        fh.write(f"{os.getpid()} {what}\n")


# --- the workloads (run in their own process) ------------------------------------------------

def matmul_loop(ready: str) -> None:
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    step = 0
    while True:
        for _ in range(10):
            c = a @ b
        torch.cuda.synchronize()  # a sync every 10 matmuls, as a benchmark loop does
        step += 1
        if step == 3:
            _ready(ready, "matmul")
        del c


def train_loop(ready: str) -> None:
    import torch

    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
        torch.nn.GELU(), torch.nn.Linear(4096, 1024),
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, 1024, device="cuda")
    step = 0
    while True:
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the usual logging sync, every step
        step += 1
        if step == 20:
            _ready(ready, "train")


def decode_loop(ready: str) -> None:
    import torch

    weights = [torch.randn(256, 256, device="cuda") / 16 for _ in range(24)]
    x = torch.randn(1, 256, device="cuda")
    step = 0
    while True:
        h = x
        for w in weights:  # one tiny kernel per "layer"
            h = torch.relu(h @ w)
        token = int(h.argmax().item())  # the next token goes back to the host
        x = x.roll(token % 7)
        step += 1
        if step == 50:
            _ready(ready, "decode")


def spin_forever(ready: str) -> None:
    import torch

    torch.cuda._sleep(SPIN_CYCLES)
    _ready(ready, "spin")
    torch.cuda.synchronize()  # HANG: the kernel spins for an hour


def spin_flag(ready: str) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def wait_flag(flag_ptr, out_ptr):  # type: ignore[no-untyped-def]
        value = tl.load(flag_ptr, volatile=True)
        while value == 0:
            value = tl.load(flag_ptr, volatile=True)
        tl.store(out_ptr + tl.program_id(0), value)

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flag = torch.zeros(1, device="cuda", dtype=torch.int32)
    out = torch.zeros(sms * 4, device="cuda", dtype=torch.int32)
    wait_flag[(sms * 4,)](flag, out)  # every SM busy polling, like a stuck NCCL kernel
    _ready(ready, "spin_flag")
    torch.cuda.synchronize()  # HANG: nobody sets the flag


WORKERS = {"matmul": matmul_loop, "train": train_loop, "decode": decode_loop,
           "spin": spin_forever, "spin_flag": spin_flag}


# --- the driver ------------------------------------------------------------------------------

def _wait_ready(ready: Path, proc: subprocess.Popen[bytes], deadline_s: float) -> int | None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().strip():
            return int(ready.read_text().split()[0])
        if proc.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_workload(name: str, runs: int, window: float, folder: Path) -> dict[str, object]:
    from hangscope.analyze.progress import decide
    from hangscope.collect import nvml
    from hangscope.collect.progress import watch
    from hangscope.progress_evidence import evidence_to_dict

    ready = folder / f"ready-{name}"
    log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, __file__, "worker", name, "--ready-file", str(ready)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    result: dict[str, object] = {"workload": name, "healthy": name in HEALTHY, "runs": []}
    try:
        t0 = time.monotonic()
        pid = _wait_ready(ready, proc, 240.0)
        result["ready_s"] = round(time.monotonic() - t0, 2)
        if pid is None:
            result["error"] = f"not ready (exit {proc.poll()}); see {name}.log"
            return result
        time.sleep(1.0)  # past the first steps' allocations
        reading = nvml.read_gpus()
        uses = nvml.gpus_of_process(pid, {}, reading)
        indices = [u.gpu_index for u in uses] or [g.index for g in reading.gpus]
        result["gpus"] = indices
        for _ in range(runs):
            timed = watch([pid], window, gpu_indices=indices)
            evidence = timed.evidence
            classic = nvml.read_gpus()
            decision = decide(evidence.processes[0], evidence.seconds, evidence.gpus)
            result["runs"].append({  # type: ignore[union-attr]
                "decision": decision.decision, "evidence": decision.evidence,
                "reason": decision.reason, "gpu": decision.gpu,
                "start_s": round(timed.start_s, 3), "stop_s": round(timed.stop_s, 3),
                "window_s": evidence.seconds, "sampler_cpu_s": evidence.sampler_cpu_s,
                "gpm": [{"index": g.index, "error": g.error, **g.metrics} for g in evidence.gpus],
                "gpu_error": evidence.gpu_error,
                "utilization_gpu": [g.utilization for g in classic.gpus],
                "evidence_data": evidence_to_dict(evidence),
            })
        _write_fixture(folder, name, result)
    finally:
        _kill(proc)
        log.close()
    return result


def _write_fixture(folder: Path, name: str, result: dict[str, object]) -> None:
    """The first run's evidence as a test fixture (tests/fixtures/progress/gpu_NAME.json)."""
    runs = result.get("runs") or []
    if not runs:
        return
    fixtures = folder / "fixtures"
    fixtures.mkdir(exist_ok=True)
    data = dict(runs[0]["evidence_data"])  # type: ignore[index]
    data["expected"] = "progressing" if name in HEALTHY else "stuck"
    data["workload"] = name
    (fixtures / f"gpu_{name}.json").write_text(json.dumps(data, indent=1))


def _passed(result: dict[str, object]) -> bool:
    want = "progressing" if result["healthy"] else "stuck"
    runs = result.get("runs") or []
    return bool(runs) and all(r["decision"] == want for r in runs)  # type: ignore[index, union-attr]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd")
    worker = sub.add_parser("worker")
    worker.add_argument("name", choices=sorted(WORKERS))
    worker.add_argument("--ready-file", required=True)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/hangscope-progress-gpu"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--window", type=float, default=2.0)
    parser.add_argument("--quick", action="store_true", help="one run per workload")
    parser.add_argument("--only", help="comma-separated workloads")
    args = parser.parse_args(argv)
    if args.cmd == "worker":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive the driver
        WORKERS[args.name](args.ready_file)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = 1 if args.quick else args.runs
    names = args.only.split(",") if args.only else [*HEALTHY, *HUNG]
    results = []
    for name in names:
        t0 = time.monotonic()
        result = run_workload(name, runs, args.window, out)
        result["seconds"] = round(time.monotonic() - t0, 1)
        results.append(result)
        (out / "progress_gpu.json").write_text(json.dumps(results, indent=1))
        decisions = [r["decision"] for r in result.get("runs", [])]  # type: ignore[union-attr]
        first = (result.get("runs") or [{}])[0]  # type: ignore[index]
        print(f"{name:10} {'PASS' if _passed(result) else 'FAIL'} {decisions.count('progressing')}"
              f" progressing / {decisions.count('stuck')} stuck / {len(decisions)} runs"
              f"  {result.get('error') or first.get('reason', '')}", flush=True)
        print(f"{'':10} gpm {first.get('gpm')} util.gpu {first.get('utilization_gpu')}",
              flush=True)
    optional_missing = [r for r in results if r["workload"] == "spin_flag" and r.get("error")]
    required = [r for r in results if r not in optional_missing]
    return 0 if all(_passed(r) for r in required) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
