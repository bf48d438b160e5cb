"""Hung NCCL jobs for the collective evidence (issue 10): NCCL RAS and the Flight Recorder, live.

Runs on the device machine (torch with CUDA; hangscope's own deps are optional here)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        PYTHONPATH=. python demo/gpu/nccl_jobs.py --out "$OUT" [--only single,behind] [--no-dump]

Scenarios (each a real job: a launcher and one process per rank, ``RANK``/``WORLD_SIZE`` in
their environment, ``init_process_group("nccl", device_id=...)``, one warm-up all_reduce):

- one GPU: ``single`` (world size 1: a few all_reduces, then a spinning kernel and a sync);
- two GPUs: ``behind`` (rank 1 never reaches the second all_reduce: it blocks in a
  ``queue.get``), ``extra_op`` (rank 1 calls an extra all_gather first), ``wrong_op`` (rank 0
  all_reduce where rank 1 calls all_gather), ``subgroup`` (the hang is in a ``new_group``).

Each runs twice: ``plain`` (nothing set at launch: RAS alone) and ``fr`` (started with
``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` and ``TORCH_FR_DUMP_TEMP_FILE``: hangscope asks each rank
for a Flight Recorder dump). Two-GPU scenarios are recorded as ``blocked`` on one GPU.
Per run: hangscope's collectors and analysis (timed), the raw RAS answer and FR dumps, and
``hangscope dump --format json`` of the job (unless --no-dump). Everything goes to
``OUT/nccl_jobs.json`` and ``OUT/captures/<scenario>-<variant>/``; every process started is
killed at the end. Exit 0 when every scenario that ran gave the expected conclusion.
``--dry-run`` runs the same scenarios on CPU with gloo (the flow, the hang points and
``hangscope dump``; no NCCL evidence, so it exits 1 by design).
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
sys.path.insert(0, str(ROOT))

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
ONE_GPU = ("single",)
TWO_GPU = ("behind", "extra_op", "wrong_op", "subgroup", "size_mismatch", "dies", "capture",
           "ddp_uneven", "fsdp2", "lightning")
# Scenarios on real training libraries (demo/gpu/train_jobs.py): what they conclude is recorded,
# not required here (tests/unit/test_nccl_live.py checks the captures).
TRAINING = ("ddp_uneven", "fsdp2", "lightning")
# What the analysis must conclude (kind, suspect ranks) per scenario and variant.
EXPECTED = {
    ("behind", "plain"): ("behind", {1}), ("behind", "fr"): ("behind", {1}),
    ("extra_op", "plain"): ("behind", {0}), ("extra_op", "fr"): ("mismatch", {0, 1}),
    ("wrong_op", "plain"): ("mismatch", {0, 1}), ("wrong_op", "fr"): ("mismatch", {0, 1}),
    ("subgroup", "plain"): ("behind", {1}), ("subgroup", "fr"): ("behind", {1}),
    ("size_mismatch", "fr"): ("mismatch", {0, 1}), ("capture", "fr"): ("behind", {1}),
}


# The verdict `hangscope dump` must give for each conclusion kind (analyze/rules/collectives.py).
VERDICT_OF = {"behind": "straggler", "mismatch": "mismatched_collectives",
              "missing": "missing_rank"}


# --- the ranks (run in their own process) ----------------------------------------------------

def _ready(folder: str, rank: int) -> None:
    Path(folder, f"rank{rank}.tmp").write_text(str(os.getpid()))
    os.replace(Path(folder, f"rank{rank}.tmp"), Path(folder, f"rank{rank}"))


def _block_forever() -> None:
    import queue

    queue.Queue().get()  # a rank elsewhere in Python: never reaches the collective


def rank_main(scenario: str, ready: str) -> None:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gloo = os.environ.get("NCCL_JOBS_DRY_RUN") == "gloo"  # --dry-run: the flow on CPU
    sync = (lambda: None) if gloo else torch.cuda.synchronize
    if gloo:
        device = torch.device("cpu")
        if scenario in TRAINING:
            from demo.gpu import train_jobs

            getattr(train_jobs, scenario)(device, lambda: _ready(ready, rank))
            return
        dist.init_process_group("gloo")
    else:
        # Two ranks on one GPU: each has its own NCCL_HOSTID (set by the launcher), so NCCL
        # takes them for two nodes and talks over its socket transport (docs/gpu.md).
        index = 0 if os.environ.get("NCCL_JOBS_SHARED_GPU") else int(os.environ.get(
            "LOCAL_RANK", rank))
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        if scenario in TRAINING:
            from demo.gpu import train_jobs

            getattr(train_jobs, scenario)(device, lambda: _ready(ready, rank))
            return
        dist.init_process_group("nccl", device_id=device)
    x = torch.ones(1 << 20, device=device)
    dist.all_reduce(x)  # collective #1, every scenario
    sync()
    if scenario == "single":
        for _ in range(3):
            dist.all_reduce(x)
        sync()
        _ready(ready, rank)
        if gloo:
            _block_forever()
        torch.cuda._sleep(int(2e9 * 3600))  # a kernel that spins for an hour
        torch.cuda.synchronize()
        return
    if scenario == "size_mismatch":
        _ready(ready, rank)
        # Rank 0 gathers 1 MiB per rank, rank 1 64 KiB: over the socket transport NCCL checks
        # the sizes and fails ("message truncated") instead of hanging.
        part = x[: 1 << 18] if rank == 0 else x[: 1 << 14]
        dist.all_gather([torch.empty_like(part) for _ in range(world)], part)
        part.sum().item()
        _block_forever()
    if scenario == "dies":
        _ready(ready, rank)
        if rank == 1:  # killed inside its collective, as the OOM killer would
            import threading

            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGKILL)).start()
            dist.all_gather([torch.empty_like(x) for _ in range(world)], x)
            x.sum().item()
        else:
            time.sleep(3.0)  # rank 0 comes after rank 1 died
            dist.all_reduce(x)
            x.sum().item()
        _block_forever()
    if scenario == "capture":
        cpu = dist.new_group(backend="gloo")
        flag = torch.zeros(1)
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            dist.all_reduce(x)  # warm-up on the capture's stream
        torch.cuda.current_stream().wait_stream(side)
        sync()
        _ready(ready, rank)
        with torch.cuda.graph(g):
            dist.all_reduce(x)  # an NCCL all_reduce inside the capture
            if rank == 0:
                dist.all_reduce(flag, group=cpu)  # waits on the CPU group: rank 1 never comes
        _block_forever()
    if scenario == "subgroup":
        sub = dist.new_group([0, 1])
        dist.all_reduce(x, group=sub)  # the sub-group's #1, both ranks
        sync()
        _ready(ready, rank)
        if rank == 0:
            dist.all_reduce(x, group=sub)  # sub-group #2: rank 1 never comes
            x.sum().item()
        _block_forever()
    _ready(ready, rank)
    if scenario == "behind":
        if rank == 0:
            dist.all_reduce(x)
            x.sum().item()
        _block_forever()
    elif scenario == "extra_op":
        if rank == 1:
            dist.all_gather([torch.empty_like(x) for _ in range(world)], x)
        dist.all_reduce(x)
        x.sum().item()
        _block_forever()  # rank 0 stays alive: it is not a missing-rank case
    elif scenario == "wrong_op":
        if rank == 0:
            dist.all_reduce(x)
        else:
            dist.all_gather([torch.empty_like(x) for _ in range(world)], x)
        x.sum().item()
        _block_forever()


def _rank_env(env: dict[str, str], rank: int) -> dict[str, str]:
    out = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}
    if env.get("NCCL_JOBS_SHARED_GPU"):  # one GPU for every rank: a host id each
        out.update(NCCL_HOSTID=f"node{rank}", NCCL_SOCKET_IFNAME="lo", LOCAL_RANK="0",
                   NODE_RANK=str(rank), LOCAL_WORLD_SIZE="1")
    return out


def launcher_main(scenario: str, ready: str, world: int) -> None:
    env = dict(os.environ, WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=os.environ.get("MASTER_PORT", "29623"), **NO_MULTICAST)
    ranks = [subprocess.Popen([sys.executable, __file__, "rank", scenario, ready],
                              env=_rank_env(env, r))
             for r in range(world)]
    for proc in ranks:
        proc.wait()


# --- the orchestrator ------------------------------------------------------------------------

def _processes(launcher: int, ranks: list[int]):
    from hangscope.collect import procfs
    from hangscope.model import Process, RankInfo, Role

    table = procfs.read_listening()
    out = []
    for pid in [launcher, *ranks]:
        env = procfs.read_environ(pid) or {}
        inodes = procfs.read_fds(pid)[4]
        rank = int(env["RANK"]) if "RANK" in env and pid != launcher else None
        out.append(Process(
            pid=pid, python=True, role=Role.RANK if rank is not None else Role.LAUNCHER,
            rank=RankInfo(global_rank=rank) if rank is not None else None, environ=env,
            listening=tuple(table[i] for i in sorted(inodes) if i in table)))
    host_ports = sorted({s.port for s in table.values() if s.port})
    return out, host_ports


def _verdict_ok(scenario: str, variant: str, found) -> bool | None:
    if scenario == "single":
        return bool(found.communicators)
    if (scenario, variant) not in EXPECTED:
        return None
    kind, ranks = EXPECTED[(scenario, variant)]
    return any(c.kind == kind and ranks <= set(c.ranks) for c in found.conclusions)


def _extra_reads(scenario: str, cap: Path, ranks: list[int]) -> dict:
    """Raw reads kept as fixtures: py-spy --locals of a rank in capture, cuda-gdb's kernels."""
    took: dict = {}
    pyspy = os.environ.get("HANGSCOPE_PYSPY") or shutil.which("py-spy")
    if scenario == "capture" and pyspy:
        for r, pid in enumerate(ranks):
            res = subprocess.run([pyspy, "dump", "--json", "--native", "--locals", "--pid",
                                  str(pid)], capture_output=True, text=True, timeout=60)
            (cap / f"rank{r}.locals.json").write_text(res.stdout or res.stderr)
    gdb = os.environ.get("NCCL_JOBS_CUDA_GDB")
    if gdb and scenario in ("behind", "wrong_op"):
        t0 = time.monotonic()
        res = subprocess.run([gdb, "-batch", "-p", str(ranks[0]), "-ex", "info cuda kernels",
                              "-ex", "detach"], capture_output=True, text=True, timeout=90)
        took["cuda_gdb_s"] = round(time.monotonic() - t0, 2)
        (cap / "rank0.cuda-gdb.txt").write_text(res.stdout + "\n--- stderr\n" + res.stderr)
    return took


def run_one(scenario: str, variant: str, out: Path, dump: bool, port: int = 29623) -> dict:
    from hangscope.analyze.evidence.collectives import analyze, live_ranks
    from hangscope.collect.collectives import collect
    from hangscope.model import nccl as ev
    from hangscope.model.serialize import to_dict

    world = 1 if scenario == "single" else 2
    cap = out / "captures" / f"{scenario}-{variant}"
    ready = cap / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MASTER_PORT=str(port), **NO_MULTICAST)
    if variant == "fr":
        env.update(TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(cap / "frpipe_"),
                   TORCH_FR_DUMP_TEMP_FILE=str(cap / "nccl_trace_rank_"))
    started = time.time()
    with open(cap / "job.log", "w") as log:
        job = subprocess.Popen(
            [sys.executable, __file__, "launch", scenario, str(ready), str(world)], env=env,
            start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    record: dict = {"scenario": scenario, "variant": variant, "world": world}
    try:
        deadline = time.monotonic() + 180
        while not all((ready / f"rank{r}").exists() for r in range(world)):
            if time.monotonic() > deadline or job.poll() is not None:
                record["error"] = "the ranks did not reach their hang point (see job.log)"
                return record
            time.sleep(0.1)
        ranks = [int((ready / f"rank{r}").read_text()) for r in range(world)]
        procs, host_ports = _processes(job.pid, ranks)
        attempts = []
        found = None
        # NCCL's counts settle within a second or two; a scenario with no expected conclusion
        # (a failing rank, a training library) is read twice, a few seconds apart.
        deadline = time.monotonic() + (20 if (scenario, variant) in EXPECTED else 4)
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            ras_r, fr_r = collect(procs, host_ports, job_start=started)
            took = time.monotonic() - t0
            found = analyze(ras_r, fr_r, live_ranks(procs))
            attempts.append({"collect_s": round(took, 3), "ras_s": round(ras_r.elapsed_s, 3),
                             "fr_s": round(fr_r.elapsed_s, 3), "ras": ras_r.status,
                             "fr": fr_r.status})
            if _verdict_ok(scenario, variant, found):
                break
            time.sleep(1)
        if ras_r.raw:
            suffix = "json" if ras_r.report and ras_r.report.format.startswith("json") else "txt"
            (cap / f"ras.{suffix}").write_text(ras_r.raw)
        for d in fr_r.dumps:
            dest = cap / Path(d.path).name
            if Path(d.path).resolve() != dest.resolve():  # the FR prefix may point into cap
                shutil.copy(d.path, dest)
        ok = _verdict_ok(scenario, variant, found)
        record.update(_extra_reads(scenario, cap, ranks))
        if variant == "fr" and ok is not None:  # the dumps must have come through the pipe too
            ok = ok and fr_r.status == ev.READ and bool(fr_r.triggered)
        record.update(ok=ok, attempts=attempts,
                      ras_note=ras_r.note, fr_note=fr_r.note, fr_notes=list(fr_r.notes),
                      conclusions=[to_dict(c) for c in found.conclusions],
                      evidence=to_dict(found), pids={"launcher": job.pid, "ranks": ranks})
        if dump:
            t0 = time.monotonic()
            extra = os.environ.get("NCCL_JOBS_DUMP_ARGS", "").split()
            res = subprocess.run([sys.executable, "-m", "hangscope", "dump", "--format", "json",
                                  *extra, str(job.pid)], capture_output=True, text=True,
                                 timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            (cap / "hangscope_dump.json").write_text(res.stdout)
            record["dump"] = {"rc": res.returncode, "s": round(time.monotonic() - t0, 2),
                              "stderr": res.stderr[-2000:]}
            with contextlib.suppress(ValueError):
                data = json.loads(res.stdout)
                record["dump"]["verdict"] = verdict = data.get("verdict")
                # The CLI's verdict comes from its own collective conclusions (the first kind
                # in the rule table's order: a rank may exit between the two reads), and its
                # suspects are rank processes only.
                kinds = {c["kind"] for item in data.get("collectives", ())
                         for c in item["conclusions"]}
                first = next((k for k in ("mismatch", "missing", "behind") if k in kinds), None)
                if scenario != "single" and (scenario, variant) in EXPECTED:
                    record["dump"]["ok"] = dump_ok = (
                        bool(verdict) and first is not None
                        and verdict["kind"] == VERDICT_OF[first]
                        and set(verdict["suspects"]) <= set(ranks))
                    record["dump"]["as_expected"] = first == EXPECTED[(scenario, variant)][0]
                    record["ok"] = record["ok"] and dump_ok
        return record
    finally:
        with contextlib.suppress(ProcessLookupError):  # the job may have died on its own
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        rank_main(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "launch":
        launcher_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    try:  # hangscope's collectors read sockets through collect/procfs.py, which needs psutil
        import psutil  # noqa: F401
    except ImportError:
        print("psutil is missing: pip install psutil (hangscope's dependency), then rerun.",
              file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/nccl_jobs"))
    parser.add_argument("--only", default="", help="comma-separated scenarios")
    parser.add_argument("--variants", default="plain,fr")
    parser.add_argument("--no-dump", action="store_true", help="skip hangscope dump")
    parser.add_argument("--jobs", type=int, default=1, help="scenarios run at once")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the scenarios' flow on CPU with gloo (no NCCL evidence)")
    args = parser.parse_args()
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count()
    if args.dry_run:
        os.environ["NCCL_JOBS_DRY_RUN"] = "gloo"
        gpus = 2
    if gpus == 1 and not args.dry_run:
        os.environ["NCCL_JOBS_SHARED_GPU"] = "1"  # both ranks on cuda:0, a NCCL_HOSTID each
    wanted = [s for s in (*ONE_GPU, *TWO_GPU) if not args.only or s in args.only.split(",")]
    runs = [(s, v) for s in wanted for v in args.variants.split(",")
            if not (s in TRAINING and v == "plain" and "fr" in args.variants)]
    from concurrent.futures import ThreadPoolExecutor

    def one(item: tuple[int, tuple[str, str]]) -> dict:
        i, (scenario, variant) = item
        if scenario in TWO_GPU and gpus < 1:
            return {"scenario": scenario, "variant": variant, "blocked": "no GPU visible"}
        t0 = time.monotonic()
        rec = run_one(scenario, variant, out, not args.no_dump, port=29623 + 7 * i)
        rec["wall_s"] = round(time.monotonic() - t0, 1)
        said = [(c["kind"], c["ranks"], c["ops"], c["source"])
                for c in rec.get("conclusions", [])]
        verdict = (rec.get("dump") or {}).get("verdict") or {}
        print(f"{scenario:13} {variant:5} ok={rec.get('ok')} {rec['wall_s']}s {said} "
              f"verdict={verdict.get('kind')}: {str(verdict.get('summary'))[:160]} "
              f"{rec.get('error', '')}", flush=True)
        return rec

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, enumerate(runs)))
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    (out / "nccl_jobs.json").write_text(json.dumps(
        {"gpus": gpus, "torch": torch.__version__, "nccl": nccl, "results": results}, indent=2))
    ran = [r for r in results if "blocked" not in r]
    return 0 if ran and all(r.get("ok") for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
