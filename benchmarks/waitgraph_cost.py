"""What the wait-for graph adds to a snapshot: its collector and its analysis, two jobs, one run.

    PYTHONPATH=. python benchmarks/waitgraph_cost.py [--repeat 30] [--out DIR]

Jobs, both real and hung, measured side by side and interleaved round by round so that load on
the machine hits both alike:

- ``8 ranks``: benchmarks/barrier_job.py --ranks 8 (a launcher and 8 ranks in one barrier);
- ``1,000 threads``: one process (this script, ``--threads-job``) with 1,000 threads: one holds
  a lock while blocked in recv, 33 wait for that lock, 966 idle in queue.get (issue 17's case).

One snapshot of each is taken with the sampler (its classification is what the graph reads);
then each round times ``procfs.read_kernel_waits`` over the job's PIDs as collect/waits.py
calls it (the collector: fds, fdinfo, the syscalls of threads not parked on a futex, sock_diag
peers) and ``waitpatterns.wait_graph`` on the snapshot
(the analysis: edges and patterns). Goals (issue 17): at most 50 ms (median) on 8 ranks, at
most 200 ms on 1,000 threads. Prints and writes ``DIR/waitgraph_cost.json``; kills the jobs.
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
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hangscope.analyze.patterns.waitpatterns import wait_graph  # noqa: E402
from hangscope.collect import procfs  # noqa: E402
from hangscope.collect.waits import syscall_tids  # noqa: E402
from hangscope.live.sampler import SampleOptions, Sampler  # noqa: E402


def threads_job(ready: str) -> None:
    """1,000 threads: a lock held by a thread in recv, 33 waiters, 966 idle readers."""
    import queue

    lock = threading.Lock()
    ours, _theirs = socket.socketpair()  # _theirs stays open and is never written
    work: queue.Queue[int] = queue.Queue()
    entered = threading.Event()

    def refresh() -> None:
        with lock:
            entered.set()
            ours.recv(64)

    threading.Thread(target=refresh, daemon=True).start()
    entered.wait()
    for _ in range(33):
        threading.Thread(target=refresh, daemon=True).start()
    for _ in range(966):
        threading.Thread(target=work.get, daemon=True).start()
    Path(ready).write_text("ready\n")
    while True:
        time.sleep(3600)


def _start(cmd: list[str], ready: Path, lines: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (ready.exists() and len(ready.read_text().splitlines()) >= lines):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"job {cmd} not ready")
        time.sleep(0.05)
    return proc


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered) * 1e3, 2),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e3, 2),
            "max_ms": round(ordered[-1] * 1e3, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--threads-job", metavar="READY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads_job:
        threads_job(args.threads_job)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="waitgraph-bench-"))
    jobs = {
        "8 ranks": _start([sys.executable, str(ROOT / "benchmarks" / "barrier_job.py"),
                           "--ranks", "8", "--ready-file", str(tmp / "ranks")],
                          tmp / "ranks", 8),
        "1,000 threads": _start([sys.executable, __file__, "--threads-job",
                                 str(tmp / "threads")], tmp / "threads", 1),
    }
    try:
        options = SampleOptions(samples=2, window=0.5, progress=False)
        snaps = {name: Sampler(p.pid, options).snapshot() for name, p in jobs.items()}
        pids = {name: [q.pid for q in s.processes if not q.is_exited]
                for name, s in snaps.items()}
        tids = {name: {q.pid: syscall_tids(q) for q in s.processes} for name, s in snaps.items()}
        times: dict[str, dict[str, list[float]]] = {
            name: {"collect": [], "analyse": [], "total": []} for name in jobs}
        for _ in range(args.repeat):
            for name, snap in snaps.items():
                t0 = time.perf_counter()
                kernel = procfs.read_kernel_waits(pids[name], tids[name])  # as collect/waits.py
                t1 = time.perf_counter()
                assert snap.waits is not None
                graph = wait_graph(replace(snap, waits=replace(snap.waits, kernel=kernel)))
                t2 = time.perf_counter()
                times[name]["collect"].append(t1 - t0)
                times[name]["analyse"].append(t2 - t1)
                times[name]["total"].append(t2 - t0)
        result = {name: {"processes": len(pids[name]),
                         "threads": sum(len(p.threads) for p in snaps[name].processes),
                         "edges": len(graph.edges) if (graph := snaps[name].wait_graph) else 0,
                         "patterns": [p.kind for p in graph.patterns] if graph else [],
                         **{part: _stats(v) for part, v in times[name].items()}}
                  for name in jobs}
        result["goals_ms"] = {"8 ranks": 50, "1,000 threads": 200}
        result["repeat"] = args.repeat
        text = json.dumps(result, indent=2)
        print(text)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "waitgraph_cost.json").write_text(text + "\n")
    finally:
        for proc in jobs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
