"""What reading NCCL RAS adds to a snapshot: a live RAS listener vs none.

    PYTHONPATH=. python benchmarks/ras_cost.py [--target gpu|replay] [--repeat 30] [--out DIR]

``gpu`` (the device machine; NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1): a real one-rank NCCL job hung on a spinning kernel
(demo/gpu/nccl_jobs.py's ``single``), once with RAS on (the default) and once with
``NCCL_RAS_ENABLE=0``. ``replay`` (anywhere): tests/targets/ras_server.py answering the real
captured answer, next to a plain Python process that listens on nothing. Measures the median
(and p90, max) wall time of ``collect.ras.read`` per snapshot, and counts the connections it
made where no RAS listens (target: none). Target: <= 50 ms added (median). Writes
``DIR/ras_cost.json`` and the last raw answer; kills every process it started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hangscope.collect import procfs, ras  # noqa: E402
from hangscope.model import Process, RankInfo, Role  # noqa: E402

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def _wait(path: Path, what: str, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return path.read_text()


def _as_job(pids: list[int]) -> tuple[list[Process], list[int]]:
    """The job's processes as the sampler sees them: environment and listening sockets."""
    table = procfs.read_listening()
    out = []
    for pid in pids:
        env = procfs.read_environ(pid) or {}
        inodes = procfs.read_fds(pid)[4]
        out.append(Process(pid=pid, python=True, role=Role.RANK,
                           rank=RankInfo(global_rank=int(env.get("RANK", 0))), environ=env,
                           listening=tuple(table[i] for i in sorted(inodes) if i in table)))
    return out, sorted({s.port for s in table.values() if s.port})


def _measure(pids: list[int], repeat: int) -> dict:
    calls = {"connects": 0}
    real = ras._exchange

    def counted(*args, **kwargs):
        calls["connects"] += 1
        return real(*args, **kwargs)

    ras._exchange = counted
    try:
        times, reading = [], None
        for _ in range(repeat):
            procs, ports = _as_job(pids)  # the sampler reads these anyway: not timed
            t0 = time.perf_counter()
            reading = ras.read(procs, ports)
            times.append(time.perf_counter() - t0)
    finally:
        ras._exchange = real
    times.sort()
    return {"median_ms": round(statistics.median(times) * 1000, 2),
            "p90_ms": round(times[int(len(times) * 0.9) - 1] * 1000, 2),
            "max_ms": round(times[-1] * 1000, 2), "connects": calls["connects"],
            "status": reading.status, "note": reading.note, "raw": reading.raw}


def _start_gpu(folder: Path, ras_on: bool) -> tuple[subprocess.Popen, list[int]]:
    ready = folder / ("on" if ras_on else "off")
    ready.mkdir()
    env = dict(os.environ, **NO_MULTICAST)
    if not ras_on:
        env["NCCL_RAS_ENABLE"] = "0"
    job = subprocess.Popen([sys.executable, str(ROOT / "demo" / "gpu" / "nccl_jobs.py"), "launch",
                            "single", str(ready), "1"], env=env, start_new_session=True)
    pid = int(_wait(ready / "rank0", "the NCCL rank to hang"))
    return job, [pid]


def _start_replay(folder: Path, ras_on: bool) -> tuple[subprocess.Popen, list[int]]:
    if ras_on:
        with socket.socket() as s:  # a free port, named in the server's NCCL_RAS_ADDR as a
            s.bind(("127.0.0.1", 0))  # job started with it would have it
            port = s.getsockname()[1]
        ready = folder / "port"
        job = subprocess.Popen([sys.executable, str(ROOT / "tests" / "targets" / "ras_server.py"),
                                "json", str(ready), "--port", str(port)], start_new_session=True,
                               env=dict(os.environ, NCCL_RAS_ADDR=f"127.0.0.1:{port}"))
        _wait(ready, "the replay server")
        return job, [job.pid]
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                           start_new_session=True)
    return job, [job.pid]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", choices=("gpu", "replay"), default="gpu")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = _start_gpu if args.target == "gpu" else _start_replay
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, on in (("ras", True), ("no_ras", False)):
            job, pids = start(Path(tmp), on)
            try:
                if args.target == "gpu" and on:  # RAS starts with the communicator
                    deadline = time.monotonic() + 30
                    while ras.read(_as_job(pids)[0]).status != "read":
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.2)
                results[label] = _measure(pids, args.repeat)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.pid, signal.SIGKILL)
                job.wait(timeout=30)
    raw = results["ras"].pop("raw", None)
    results["no_ras"].pop("raw", None)
    if raw:
        (out / "ras_cost_answer.txt").write_text(raw)
    added = results["ras"]["median_ms"] - results["no_ras"]["median_ms"]
    summary = {"target": args.target, "repeat": args.repeat, **results,
               "added_median_ms": round(added, 2), "goal_ms": 50,
               "met": added <= 50 and results["no_ras"]["connects"] == 0}
    (out / "ras_cost.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0 if summary["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
