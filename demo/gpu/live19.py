"""The device run of issues 19 and 24: every live NCCL scenario on one GPU, the training-library
jobs, and the kernels that ``hangscope dump --kernels`` must name.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        PYTHONPATH=. python demo/gpu/live19.py --out "$OUT/live" [--kernels-only|--nccl-only]

Kernel targets (demo/gpu/kernel_jobs.py) run one at a time, each with a deadline: cuda-gdb's
raw ``info cuda kernels`` (timed), the process state afterwards, ``hangscope dump --kernels``
(JSON and text); the finite kernel must still print its result. Then demo/gpu/nccl_jobs.py runs
every scenario (plain and fr) with ``--jobs`` at once. Every process started is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
ENV = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
           NVSHMEM_DISABLE_NVLS="1", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def cuda_gdb() -> str | None:
    found = shutil.which("cuda-gdb")
    if found:
        return found
    for base in ("/usr/local/cuda", *sorted(map(str, Path("/usr/local").glob("cuda-*")))):
        if Path(base, "bin", "cuda-gdb").exists():
            return str(Path(base, "bin", "cuda-gdb"))
    return None


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _children(pid: int) -> list[dict]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                comm = Path(f"/proc/{child}/comm").read_text().strip()
                out.append({"pid": int(child), "comm": comm, "state": _state(int(child))})
    return out


def _dump(pid: int, folder: Path, name: str, args: list[str]) -> dict:
    row: dict = {}
    for fmt in ("json", "text"):
        t0 = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "hangscope", "dump", "--format", fmt, *args,
                              str(pid)], capture_output=True, text=True, timeout=150,
                             cwd=ROOT, env=ENV)
        row[f"{fmt}_s"] = round(time.monotonic() - t0, 2)
        row[f"{fmt}_rc"] = res.returncode
        (folder / f"{name}.dump.{fmt}").write_text(res.stdout + ("\n" + res.stderr[-3000:]
                                                                  if res.returncode else ""))
        if fmt == "json":
            with contextlib.suppress(ValueError):
                data = json.loads(res.stdout)
                row["verdict"] = {k: data["verdict"].get(k) for k in ("kind", "summary")}
                row["kernels"] = [p.get("kernels") for p in data.get("processes", ())
                                  if p.get("kernels")]
        if name != "item":
            break  # the text form once (each form pauses the rank again)
    return row


def kernel_target(mode: str, out: Path, gdb: str | None, kernels: bool) -> dict:
    folder = out / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    ready = folder / f"{mode}.ready"
    ready.unlink(missing_ok=True)
    log = open(folder / f"{mode}.log", "w")  # noqa: SIM115 (closed in the finally)
    proc = subprocess.Popen([sys.executable, str(ROOT / "demo/gpu/kernel_jobs.py"), mode,
                             str(ready)], env=ENV, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    row: dict = {"mode": mode, "pid": proc.pid}
    t_start = time.monotonic()
    try:
        deadline = time.monotonic() + 90
        while not ready.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                row["error"] = "not ready"
                return row
            time.sleep(0.1)
        time.sleep(1.5)  # the kernel is running, the host is in its wait
        if gdb and not kernels:  # raw cuda-gdb; with --kernels hangscope runs it
            t0 = time.monotonic()
            try:
                res = subprocess.run([gdb, "-batch", "-p", str(proc.pid), "-ex",
                                      "info cuda kernels", "-ex", "detach"],
                                     capture_output=True, text=True, timeout=60)
                (folder / f"{mode}.cuda-gdb.txt").write_text(
                    res.stdout + "\n--- stderr\n" + res.stderr + f"\n--- rc {res.returncode}\n")
            except subprocess.TimeoutExpired:
                row["cuda_gdb"] = "timeout"
            row["cuda_gdb_s"] = round(time.monotonic() - t0, 2)
            row["state_after"] = _state(proc.pid)
            row["children_after"] = _children(proc.pid)  # what cuda-gdb's attach left behind
        if kernels and mode != "finite":
            row["dump"] = _dump(proc.pid, folder, mode, ["--kernels"])
            if mode == "item":  # the timeout path, live: cuda-gdb killed, the rank runs on
                row["timeout_dump"] = _dump(proc.pid, folder, "item_timeout",
                                            ["--kernels", "--kernels-timeout", "3"])
                time.sleep(0.5)
                row["state_after_timeout"] = _state(proc.pid)
        elif kernels:
            row["dump"] = _dump(proc.pid, folder, mode, ["--kernels", "--samples", "2"])
        if mode == "finite":
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                row["finished"] = False
            log.flush()
            text = (folder / f"{mode}.log").read_text()
            row["finished"] = "RESULT 42.0" in text
            row["rc"] = proc.returncode
            row["total_s"] = round(time.monotonic() - t_start, 1)
        return row
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernels", action="store_true", help="hangscope dump --kernels too")
    parser.add_argument("--skip", default="", help="kernels,nccl")
    parser.add_argument("--only", default="", help="nccl_jobs scenarios")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--modes", default="item,triton_flag,finite", help="kernel targets")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gdb = cuda_gdb()
    summary: dict = {"cuda_gdb": gdb, "kernels": []}
    if gdb:
        summary["cuda_gdb_version"] = subprocess.run(
            [gdb, "--version"], capture_output=True, text=True, timeout=30).stdout[:300]
    if "kernels" not in args.skip:
        for mode in args.modes.split(","):
            row = kernel_target(mode, out, gdb, args.kernels)
            summary["kernels"].append(row)
            print("KERNEL", json.dumps(row)[:600], flush=True)
    if "nccl" not in args.skip:
        env = dict(ENV, NCCL_JOBS_CUDA_GDB="" if args.kernels else (gdb or ""))
        if args.kernels:
            env["NCCL_JOBS_DUMP_ARGS"] = "--kernels"
        t0 = time.monotonic()
        cmd = [sys.executable, str(ROOT / "demo/gpu/nccl_jobs.py"), "--out", str(out / "nccl"),
               "--jobs", str(args.jobs)]
        if args.only:
            cmd += ["--only", args.only]
        res = subprocess.run(cmd, env=env, timeout=400)
        summary["nccl_rc"] = res.returncode
        summary["nccl_s"] = round(time.monotonic() - t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
