"""What the collective-evidence collectors add to a whole snapshot, on a real hung gloo job.

    PYTHONPATH=. python benchmarks/collectives_snapshot_cost.py [--repeat 5] [--out DIR]

The job is tests/targets/gloo_fr_mismatch.py (2 gloo ranks hung in all_reduce vs all_gather,
started with TORCH_NCCL_DEBUG_INFO_PIPE_FILE and TORCH_FR_DUMP_TEMP_FILE, so its ranks answer a
debug-info pipe). Modes, interleaved round by round so that load on the machine hits all alike:

- ``none``: the sampler with the collectors replaced by an answer that is already there (what a
  snapshot cost before they existed);
- ``disk``: the collectors, ``--no-fr-trigger`` (RAS finds no NCCL; FR reads the dumps on disk);
- ``trigger``: the collectors as ``hangscope dump`` runs them: a new Sampler each time, which
  writes to both ranks' pipes and waits (3 s deadline) for fresh dumps.

Default sampling (3 samples over 2 s). Prints and writes ``DIR/collectives_snapshot_cost.json``
with the median, p90 and max wall time per mode and the medians' differences; kills the job.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hangscope.live import sampler as sampler_module  # noqa: E402
from hangscope.live.sampler import SampleOptions, Sampler  # noqa: E402
from hangscope.model import nccl as ev  # noqa: E402

TARGET = ROOT / "tests" / "targets" / "gloo_fr_mismatch.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(condition, what: str, timeout: float = 180.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def _nothing(*_args: object, **_kwargs: object) -> Future:
    done: Future = Future()
    done.set_result((ev.RasReading(ev.NO_NCCL, "not read (benchmark: collectors off)"),
                     ev.FrReading(ev.NONE_FOUND, "not read (benchmark: collectors off)")))
    return done


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_s": round(statistics.median(ordered), 3),
            "p90_s": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
            "max_s": round(ordered[-1], 3), "runs": len(ordered)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hangscope-collcost-"))
    ready = work / "ready"
    ready.mkdir()
    env = dict(os.environ, MASTER_PORT=str(_free_port()),
               TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(work / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(work / "nccl_trace_rank_"), TORCH_FR_BUFFER_SIZE="100")
    job = subprocess.Popen([sys.executable, str(TARGET), str(ready)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    real_start = sampler_module.collectives.start
    times: dict[str, list[float]] = {"none": [], "disk": [], "trigger": []}
    read: dict[str, str | None] = {}
    try:
        _wait(lambda: all((ready / n).exists() for n in ("launcher", "rank0", "rank1")),
              "both ranks to hang")
        _wait(lambda: all((work / f"frpipe_{r}.pipe").exists() for r in (0, 1)), "the pipes")
        Sampler(job.pid).snapshot()  # warm-up: imports, the first dumps on disk
        for _ in range(args.repeat):
            for mode in times:
                sampler_module.collectives.start = _nothing if mode == "none" else real_start
                # A new Sampler each time (as `hangscope dump`): none reuses a warm cache.
                sampler = Sampler(job.pid, SampleOptions(fr_trigger=mode != "disk"))
                t0 = time.monotonic()
                snap = sampler.snapshot()
                times[mode].append(time.monotonic() - t0)
                item = snap.collectives[0]
                read[mode] = item.fr_status
    finally:
        sampler_module.collectives.start = real_start
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)  # the pipes and the dumps the job wrote
    result = {mode: {**_stats(v), "fr_status": read.get(mode)} for mode, v in times.items()}
    base = result["none"]["median_s"]
    result["added_median_ms"] = {m: round(1000 * (result[m]["median_s"] - base), 1)
                                 for m in ("disk", "trigger")}
    text = json.dumps(result, indent=2)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "collectives_snapshot_cost.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
