"""``hangscope watch`` on real NCCL jobs (issue 21): a job that trains then hangs, and a healthy one

Runs on the device machine (torch with CUDA), two NCCL ranks on one GPU (a ``NCCL_HOSTID`` each,
sockets over ``lo``: NCCL treats them as two nodes)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        PYTHONPATH=. python demo/gpu/watch21.py --out "$OUT" [--healthy-s 300]

1. ``hang``: each rank trains (a bf16 matmul and an all_reduce per step), pauses 14 s while rank 0
   writes a checkpoint and rank 1 waits in a barrier, trains again, then hangs: rank 1 calls
   all_gather where rank 0 calls all_reduce. Watched with ``--after 20 --interval 2
   --exit-on-hang``: expected one capture, after the hang began and not during the pause, whose
   verdict is ``mismatched_collectives`` and whose collective evidence came from NCCL RAS.
2. ``healthy``: the same training forever, watched ``--healthy-s`` seconds with ``--after 30``:
   expected no capture, and exit 0 on SIGTERM.

Results: ``OUT/watch21.json`` (each run's exit code, lines, capture verdicts, RAS status, times)
and ``OUT/watch21/<run>/`` (the watcher's output and captures). Every process started is killed at
the end. Exit 0 when both runs gave what is expected.
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

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def mark(ready: str, what: str) -> None:
    with open(ready, "a") as fh:
        fh.write(f"{os.getpid()} {what} {time.time():.3f}\n")


def train(torch, dist, seconds: float) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        y = x
        for _ in range(8):
            y = (y @ x).tanh()
        grad = y.float().sum(dim=0)
        dist.all_reduce(grad)
        grad.sum().item()
        time.sleep(0.05)


def rank_main(mode: str, ready: str) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    rank, world = dist.get_rank(), dist.get_world_size()
    mark(ready, "training")
    if mode == "healthy":
        while True:
            train(torch, dist, 60)
    train(torch, dist, 20)
    mark(ready, "checkpoint")
    if rank == 0:
        time.sleep(14)  # a long torch.save of rank 0's shard; the others wait in the barrier
    dist.barrier()
    train(torch, dist, 10)
    t = torch.ones(1 << 16, device="cuda")
    mark(ready, "hang")
    if rank == world - 1:
        dist.all_gather([torch.empty_like(t) for _ in range(world)], t)
    else:
        dist.all_reduce(t)
    torch.cuda.synchronize()
    while True:
        time.sleep(3600)


def launcher_main(mode: str, ready: str, port: str) -> int:
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
               NCCL_SOCKET_IFNAME="lo", **NO_MULTICAST)
    ranks = [subprocess.Popen([sys.executable, __file__, "rank", mode, ready],
                              env={**env, "RANK": str(r), "LOCAL_RANK": "0",
                                   "NCCL_HOSTID": f"node{r}", "NODE_RANK": str(r),
                                   "LOCAL_WORLD_SIZE": "1"})
             for r in range(2)]
    return max(r.wait() for r in ranks)


def lines(path: Path) -> list[tuple[int, str, float]]:
    try:
        raw = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in raw:
        parts = line.split()
        if len(parts) == 3:
            out.append((int(parts[0]), parts[1], float(parts[2])))
    return out


def wait_for(path: Path, what: str, count: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hits = [t for _, w, t in lines(path) if w == what]
        if len(hits) >= count:
            return max(hits)
        time.sleep(0.2)
    raise TimeoutError(f"{what} x{count} not seen in {timeout:.0f} s")


def kill_tree(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=30)


def captures(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        colls = data.get("collectives") or [{}]
        out.append({"file": path.name, "mtime": path.stat().st_mtime,
                    "kind": data["verdict"]["kind"], "summary": data["verdict"]["summary"][:400],
                    "ras_status": colls[0].get("ras_status"),
                    "conclusions": [c.get("kind") for c in colls[0].get("conclusions", [])]})
    return out


def run(mode: str, out: Path, port: str, watch_args: list[str], healthy_s: float) -> dict:  # type: ignore[type-arg]
    folder = out / "watch21" / mode
    folder.mkdir(parents=True, exist_ok=True)
    ready = folder / "ready"
    with open(folder / "job.log", "wb") as log:
        job = subprocess.Popen([sys.executable, __file__, "launch", mode, str(ready), port],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    watcher = None
    result: dict = {"mode": mode}  # type: ignore[type-arg]
    try:
        wait_for(ready, "training", 2, 180)
        with open(folder / "watch.out", "wb") as log:
            watcher = subprocess.Popen(
                [sys.executable, "-m", "hangscope", "watch", str(job.pid), "--out", str(folder),
                 *watch_args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started = time.time()
        if mode == "hang":
            hang = wait_for(ready, "hang", 2, 240)
            result["pause_at"] = wait_for(ready, "checkpoint", 2, 1)
            result["hang_at"] = hang
            result["rc"] = watcher.wait(timeout=180)
        else:
            time.sleep(healthy_s)  # the length of the healthy watch under test
            watcher.send_signal(signal.SIGTERM)
            result["rc"] = watcher.wait(timeout=60)
        result["watched_s"] = round(time.time() - started, 1)
    except Exception as exc:  # recorded, never a traceback that leaves the job running
        result["error"] = repr(exc)
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.send_signal(signal.SIGINT)
            with contextlib.suppress(Exception):
                watcher.wait(timeout=30)
        kill_tree(job)
    result["captures"] = captures(folder)
    result["watch_out"] = (folder / "watch.out").read_text(errors="replace")[-3000:]
    if mode == "hang":
        caps = result["captures"]
        result["ok"] = (result.get("rc") == 8 and len(caps) == 1
                        and caps[0]["kind"] == "mismatched_collectives"
                        and caps[0]["mtime"] >= result.get("hang_at", 1e18)
                        and caps[0]["ras_status"] not in (None, "no_nccl"))
        if result["ok"]:
            result["captured_after_hang_s"] = round(caps[0]["mtime"] - result["hang_at"], 1)
    else:
        result["ok"] = result.get("rc") == 0 and result["captures"] == []
    return result


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        rank_main(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "launch":
        return launcher_main(sys.argv[2], sys.argv[3], sys.argv[4])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--healthy-s", type=float, default=300)
    parser.add_argument("--only", default="hang,healthy")
    args = parser.parse_args()
    os.environ.update(NO_MULTICAST)
    results = []
    for i, mode in enumerate(args.only.split(",")):
        watch_args = (["--after", "20", "--interval", "2", "--exit-on-hang"] if mode == "hang"
                      else ["--after", "30", "--interval", "5"])
        results.append(run(mode, args.out, str(29650 + i), watch_args, args.healthy_s))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "watch_out"}), flush=True)
    (args.out / "watch21.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
