"""Busy or progressing? The progress watcher on real GPU workloads, healthy and hung.

Runs on a machine with an NVIDIA GPU and torch (the device machine; docs/gpu.md)::

    NCCL_NVLS_ENABLE=0 PYTHONPATH=. python demo/gpu/healthy.py --out "$OUT" [--quick] [--runs 10]
        [--cli-runs 10] [--budget SECONDS]

Each workload is a real process (``python demo/gpu/healthy.py worker NAME``) that appends
``"<pid> <name>"`` to a ready file once in its steady state; the script polls that file with a
deadline, then runs ``ProgressWatcher`` + ``decide`` over ``--runs`` windows of ``--window``
seconds, one workload at a time (so the GPU's GPM counters belong to it), and kills it.

Healthy: ``matmul`` (bf16 8192² matmul loop), ``train`` (a small MLP's forward/backward/AdamW
loop, ``loss.item()`` each step), ``decode`` (a loop of tiny kernels with ``.item()`` per token).
Hung: ``spin`` (``torch.cuda._sleep`` for an hour, then ``torch.cuda.synchronize()``) and
``spin_flag`` (a Triton kernel on every SM spinning on a flag nobody sets; skipped without
Triton). Then, on the same running workload, the integrated CLI ``python -m hangscope dump
PID --format json`` ``--cli-runs`` times (default 10): its verdict kind, summary and measured
progress. Results: ``OUT/progress_gpu.json`` (decisions, reasons, GPM metrics, classic
``utilization.gpu``, timings, the CLI's verdicts), ``OUT/fixtures/gpu_NAME.json`` (the first
run's evidence, for tests/fixtures/progress/), ``OUT/cli/NAME.json`` (the first CLI dump of
each) and a table on stdout. Exit 0 when every healthy workload reads progressing and every
hung one stuck in every run, through the watcher and through the CLI. ``--budget`` (seconds)
skips the CLI runs left once the script has run that long (said in the results).
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

REPO = Path(__file__).resolve().parent.parent.parent
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


def launch_flag_spin(blocks_per_sm: int = 4) -> None:
    """A Triton kernel whose every block polls a flag nobody sets (a stuck NCCL or custom
    all-reduce kernel's shape), ``blocks_per_sm`` blocks per SM; returns once launched."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def wait_flag(flag_ptr, out_ptr):  # type: ignore[no-untyped-def]
        value = tl.load(flag_ptr, volatile=True)
        while value == 0:
            value = tl.load(flag_ptr, volatile=True)
        tl.store(out_ptr + tl.program_id(0), value)

    blocks = torch.cuda.get_device_properties(0).multi_processor_count * blocks_per_sm
    flag = torch.zeros(1, device="cuda", dtype=torch.int32)
    out = torch.zeros(blocks, device="cuda", dtype=torch.int32)
    wait_flag[(blocks,)](flag, out)
    launch_flag_spin.keep = (flag, out)  # type: ignore[attr-defined]  # alive while it spins


def spin_flag(ready: str) -> None:
    import torch

    launch_flag_spin(4)  # every SM busy polling, like a stuck NCCL kernel
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


def cli_dump(pid: int, folder: Path, name: str, keep: bool) -> dict[str, object]:
    """``python -m hangscope dump PID --format json``: the verdict and the measured progress."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "hangscope", "dump", str(pid), "--format",
                               "json"], capture_output=True, text=True, timeout=120, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": "hangscope dump did not finish in 120 s"}
    row: dict[str, object] = {"exit": done.returncode, "wall_s": round(time.monotonic() - t0, 2)}
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return row
    if keep:
        (folder / "cli").mkdir(parents=True, exist_ok=True)
        (folder / "cli" / f"{name}.json").write_text(done.stdout)
    verdict, progress = data.get("verdict") or {}, data.get("progress") or {}
    row.update(kind=verdict.get("kind"), summary=verdict.get("summary"),
               progress=progress.get("decision"), notes=data.get("notes"),
               ranks=[{k: r.get(k) for k in ("pid", "decision", "evidence", "gpu_state", "gpu")}
                      for r in progress.get("ranks", [])])
    return row


def run_workload(name: str, runs: int, window: float, folder: Path, cli_runs: int = 0,
                 deadline: float = float("inf")) -> dict[str, object]:
    from hangscope.analyze.evidence.progress import decide
    from hangscope.collect import nvml
    from hangscope.collect.progress import watch
    from hangscope.model.serialize import to_dict

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
                "evidence_data": to_dict(evidence),
            })
        _write_fixture(folder, name, result)
        cli: list[dict[str, object]] = []
        result["cli"] = cli
        for k in range(cli_runs):
            if time.monotonic() > deadline:
                result["cli_skipped"] = f"{cli_runs - k} CLI runs skipped: --budget reached"
                break
            cli.append(cli_dump(pid, folder, name, keep=k == 0))
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


def _cli_passed(row: dict[str, object], healthy: bool) -> bool:
    """Healthy: the verdict is progressing. Hung: not progressing, and measured stuck."""
    if healthy:
        return row.get("kind") == "progressing"
    return row.get("kind") not in (None, "progressing") and row.get("progress") == "stuck"


def _passed(result: dict[str, object]) -> bool:
    want = "progressing" if result["healthy"] else "stuck"
    runs = result.get("runs") or []
    cli = result.get("cli") or []
    return (bool(runs) and all(r["decision"] == want for r in runs)  # type: ignore[index, union-attr]
            and all(_cli_passed(row, bool(result["healthy"])) for row in cli))  # type: ignore[union-attr]


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
    parser.add_argument("--cli-runs", type=int, default=10,
                        help="hangscope dump runs per workload (default 10; 0: none)")
    parser.add_argument("--budget", type=float, default=float("inf"), metavar="SECONDS",
                        help="skip the CLI runs left once the script has run this long")
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
    deadline = time.monotonic() + args.budget
    for name in names:
        t0 = time.monotonic()
        result = run_workload(name, runs, args.window, out, args.cli_runs, deadline)
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
        cli = result.get("cli") or []
        kinds = [row.get("kind") for row in cli]  # type: ignore[union-attr]
        good = sum(_cli_passed(row, bool(result["healthy"])) for row in cli)  # type: ignore[arg-type]
        print(f"{'':10} cli {good}/{len(cli)} as expected, kinds {sorted(set(map(str, kinds)))}"
              f" {result.get('cli_skipped') or ''}  "
              f"{(cli[0].get('summary') or cli[0].get('error')) if cli else ''}",  # type: ignore[union-attr]
              flush=True)
    optional_missing = [r for r in results if r["workload"] == "spin_flag" and r.get("error")]
    required = [r for r in results if r not in optional_missing]
    return 0 if all(_passed(r) for r in required) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
