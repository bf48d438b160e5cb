"""Synthetic Snapshots at scale: a job of N ranks "merged from many nodes", ~40 frames each.

    python benchmarks/synthetic.py [--ranks 8192 131072] [--scenario mismatch] [--repeats 3]

Every rank looks like a real gloo/NCCL training rank (the shape of the mismatch demo's dump):
a MainThread with ~40 frames (native c10d/NCCL frames under a deep Python training stack) and
four native-only threads from /proc (tcpstore, gloo loop, two runloops parked on futexes).
Eight ranks per host, PIDs unique across hosts. Raw (sampler) input: each rank's stack is its
``py-spy dump --json`` parsed afresh by the py-spy parse of the hangscope under test
(``collect.pyspy.parse_dump``, what the sampler runs on each dump), so frames are shared exactly
where that parse shares them (from scale-s10 on: equal stacks parse to one tuple; before, and in
this harness before scale-s10, every rank had its own frames and strings). The same addresses
in every rank's unresolved native frames: a real job's differ (ASLR), making its stacks
distinct. Classified (merge) input: each rank's stack is its node's JSON parsed afresh and
decoded by the decoder of the hangscope under test (``serialize.decode``, what ``hangscope
merge`` runs on each node's dump), so frames are shared exactly where that decoder shares them
(from scale-s9 on: equal stacks decode to one tuple; before, every rank had its own frames).

Scenarios (the diagnosis the analysis must reach):

- ``mismatch``: one rank calls all_gather while every other rank waits in all_reduce
  (verdict mismatched_collectives, suspect = that rank);
- ``straggler``: one rank runs Python on CPU while the others wait in all_reduce
  (verdict straggler, suspect = that rank);
- ``all_waiting``: every rank waits in the same all_reduce (verdict all_waiting).

Each run is pinned to one core (``sched_setaffinity``) and reports CPU seconds: the whole
``hangscope.analyze.analyze`` on a fresh snapshot (the goal: 8,192 ranks in 0.5 s, 131,072 in
5 s), then its stages on the same snapshot: classify (every thread, the roots and readings),
the wait-for graph, group + verdict (with the GPU evidence), the call tree, the findings.
``--baseline ROOT`` runs the same harness on another checkout (``git worktree add /tmp/base
5e1c12c``), each of its runs in a fresh interpreter interleaved with one of this checkout, and
prints the two side by side.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from hangscope.model import (
    Category,
    Frame,
    Host,
    Job,
    Process,
    RankInfo,
    Role,
    Snapshot,
    Thread,
    VerdictKind,
)

RANKS_PER_HOST = 8
TORCH = "/opt/venv/lib/python3.11/site-packages/torch"
LIBTORCH = f"{TORCH}/lib/libtorch_cpu.so"
LIBTORCH_PY = f"{TORCH}/lib/libtorch_python.so"
LIBNCCL = "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"
C10D = f"{TORCH}/distributed/distributed_c10d.py"
C10D_LOGGER = f"{TORCH}/distributed/c10d_logger.py"
TRAIN = "/home/user/project/train.py"
MODEL = "/home/user/project/model.py"

# (name, file, line, native): innermost first, as py-spy prints them.
_NATIVE_WAIT = (
    ("0x7fa9deca3f16", LIBC, None, True),
    ("pthread_cond_wait", LIBC, None, True),
    ("std::condition_variable::wait", LIBSTDCXX, None, True),
    ("ncclProxyProgress", LIBNCCL, None, True),
    ("c10d::ProcessGroupNCCL::WorkNCCL::wait", LIBTORCH, None, True),
    ("c10d::Work::wait", LIBTORCH, None, True),
    ("pybind11::cpp_function::dispatcher", LIBTORCH_PY, None, True),
)
_PYTHON_OUTER = (  # from the collective's caller out to <module>
    ("Trainer._sync", TRAIN, 212, False),
    ("Trainer.optimizer_step", TRAIN, 240, False),
    ("Trainer.training_step", TRAIN, 301, False),
    ("Trainer._run_batch", TRAIN, 333, False),
    ("Trainer._run_epoch", TRAIN, 360, False),
    ("Trainer.fit", TRAIN, 402, False),
    ("run", TRAIN, 455, False),
    ("main", TRAIN, 470, False),
    ("<module>", TRAIN, 480, False),
    ("_run_code", "<frozen runpy>", 88, False),
    ("_run_module_as_main", "<frozen runpy>", 198, False),
    ("0x7fa9dec4524a", LIBC, None, True),
    ("__libc_start_call_main", LIBC, None, True),
    ("__libc_start_main_impl", LIBC, None, True),
    ("_start", "/usr/bin/python3.11", None, True),
)
_PYTHON_MIDDLE = tuple(  # a deep model/optimizer stack between the caller and the collective
    (f"Block{i}.forward_hook", MODEL, 100 + 7 * i, False) for i in range(15))


def _collective(op: str, site: str, line: int) -> tuple[tuple[str, str | None, int | None, bool],
                                                        ...]:
    return (*_NATIVE_WAIT,
            (op, C10D, 3252 if op == "all_reduce" else 3720, False),
            ("_exception_logger.<locals>.wrapper", C10D_LOGGER, 83, False),
            (site, TRAIN, line, False),
            *_PYTHON_MIDDLE, *_PYTHON_OUTER)


STACKS = {
    "all_reduce": _collective("all_reduce", "sync_gradients", 57),
    "all_gather": _collective("all_gather", "gather_metrics", 68),
    "running": (("Trainer.compute_loss", TRAIN, 190, False),
                ("Trainer.training_step", TRAIN, 299, False),
                *_PYTHON_MIDDLE, *_PYTHON_OUTER[3:]),
}
_NATIVE_THREADS = (("pt_tcpstore_uv", "ep_poll"), ("gloo_tcp_loop", "ep_poll"),
                   ("pt_gloo_runloop", "futex_do_wait"), ("pt_gloo_runloop", "futex_do_wait"))


def _own(text: str | None) -> str | None:
    """A private copy of a string, as a JSON decoder would make it."""
    return None if text is None else (text + "\0")[:-1]


def _frames(stack: tuple[tuple[str, str | None, int | None, bool], ...]) -> tuple[Frame, ...]:
    return tuple(Frame(name=_own(name) or "?", file=_own(file), line=line, native=native,
                       module=_own(file) if native else None)
                 for name, file, line, native in stack)


def odd_rank(ranks: int) -> int:
    """The rank that does something different in the mismatch and straggler scenarios."""
    return (ranks * 2) // 3 + 1


_STACK_JSON: dict[str, str] = {}
_DUMP_JSON: dict[str, str] = {}


def _parsed_frames(kind: str) -> tuple[Frame, ...]:
    """A rank's stack as the sampler reads it: its ``py-spy dump --json`` (fresh strings)
    parsed by the hangscope under test (``--baseline``: the old one)."""
    from hangscope.collect.pyspy import parse_dump

    text = _DUMP_JSON.get(kind)
    if text is None:  # (py-spy: a native frame names its shared object as module, line 0)
        text = _DUMP_JSON[kind] = json.dumps([{
            "thread_id": 1, "os_thread_id": 1, "thread_name": "MainThread", "frames": [
                {"name": name, "filename": file, "module": file if native else None,
                 "line": line or 0} for name, file, line, native in STACKS[kind]]}])
    return parse_dump(1, text, native=True).threads[0].frames


def _decoded_frames(kind: str) -> tuple[Frame, ...]:
    """A rank's stack as ``hangscope merge`` reads it from its node's dump: the JSON parsed
    (fresh strings) and decoded by the hangscope under test (``--baseline``: the old one)."""
    from hangscope.model.serialize import decode, to_dict

    text = _STACK_JSON.get(kind)
    if text is None:
        text = _STACK_JSON[kind] = json.dumps(to_dict(_frames(STACKS[kind])))
    return decode(tuple[Frame, ...], json.loads(text))


def _rank_threads(pid: int, kind: str, samples: int, decoded: bool = False) -> list[Thread]:
    running = kind == "running"
    frames = _decoded_frames(kind) if decoded else _parsed_frames(kind)
    threads = [Thread(tid=pid, name=_own("MainThread"), state="R" if running else "S",
                      wchan=None if running else _own("futex_do_wait"), active=running,
                      owns_gil=running, frames=frames,
                      unchanged_samples=1 if running else samples, samples=samples)]
    for i, (name, wchan) in enumerate(_NATIVE_THREADS):
        threads.append(Thread(tid=pid + 1 + i, name=_own(name), state="S", wchan=_own(wchan),
                              python=False))
    return threads


_CLASSIFIED = ("category", "op", "site", "context", "hint", "helper")


def make_snapshot(ranks: int, scenario: str = "mismatch", samples: int = 3,
                  classified: bool = False) -> Snapshot:
    """A Snapshot of ``ranks`` ranks, as the sampler (unclassified) or a merge hands it over.

    ``classified``: every thread already carries the classification its node's ``hangscope
    dump`` gave it (what ``hangscope merge`` reads back from per-node JSON dumps).
    """
    from hangscope.analyze.evidence.classify import classify_process

    odd = odd_rank(ranks)
    processes = []
    hosts = []
    templates: dict[str, Process] = {}
    for rank in range(ranks):
        node, local = divmod(rank, RANKS_PER_HOST)
        host = f"node-{node:05d}"
        if local == 0:
            hosts.append(Host(name=host, cpus=128))
        pid = 100_000 + rank  # unique across hosts
        kind = "all_reduce"
        if rank == odd and scenario == "mismatch":
            kind = "all_gather"
        elif rank == odd and scenario == "straggler":
            kind = "running"
        running = kind == "running"
        threads = _rank_threads(pid, kind, samples, decoded=classified)
        working_tid = None
        if classified:
            template = templates.get(kind)
            if template is None:
                # (its stack decoded as the ranks' are: one tuple with theirs where the
                # decoder shares stacks, as a node's own dump classified them)
                template = templates[kind] = classify_process(Process(pid=pid, threads=tuple(
                    _rank_threads(pid, kind, samples, decoded=True))))
            threads = [replace(t, **{f: getattr(c, f) for f in _CLASSIFIED})
                       for t, c in zip(threads, template.threads, strict=True)]
            working_tid = pid
        processes.append(Process(
            pid=pid, ppid=1, host=host, role=Role.RANK,
            rank=RankInfo(global_rank=rank, local_rank=local, world_size=ranks, source="env"),
            title=_own("python train.py"), cmdline=("python", "train.py"),
            state="R" if running else "S", cpu_percent=100.0 if running else 0.0,
            rss=3 << 30, num_threads=len(threads), python=True, native_sampled=True,
            threads=tuple(threads), working_tid=working_tid,
            environ={"RANK": str(rank), "WORLD_SIZE": str(ranks), "LOCAL_RANK": str(local)}))
    job = Job(launcher=None, target=processes[0].pid, kind="torchrun", expected_ranks=ranks,
              expected_source=f"WORLD_SIZE={ranks}")
    return Snapshot(created="2025-01-01T00:00:00+00:00", hangscope="synthetic", hosts=tuple(hosts),
                    job=job, processes=tuple(processes), samples=samples, window_s=2.0)


EXPECTED = {
    "mismatch": VerdictKind.MISMATCHED_COLLECTIVES,
    "straggler": VerdictKind.STRAGGLER,
    "all_waiting": VerdictKind.ALL_WAITING,
}


def check(snap: Snapshot, scenario: str) -> None:
    """Raise AssertionError unless the analysed snapshot has the scenario's diagnosis."""
    ranks = len(snap.processes)
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is EXPECTED[scenario], verdict
    if scenario in ("mismatch", "straggler"):
        assert verdict.suspects == (100_000 + odd_rank(ranks),), verdict.suspects
        sizes = sorted(len(g.ranks) for g in snap.groups)
        assert sizes == [1, ranks - 1], sizes
    else:
        assert len(snap.groups) == 1 and len(snap.groups[0].ranks) == ranks
    main = snap.groups[-1 if scenario != "all_waiting" else 0]
    assert main.category in (Category.COLLECTIVE, Category.RUNNING)
    assert snap.call_tree and sum(len(n.ranks) for n in snap.call_tree) == ranks


def stages(snap: Snapshot, scenario: str, findings: bool) -> dict[str, float]:
    """CPU seconds of each stage of ``hangscope.analyze.analyze``, chained the same way.

    Runs against whichever hangscope is importable (``--baseline`` runs it on the old code):
    the collector pause is used where that hangscope's ``analyze`` has one.
    """
    import contextlib

    import hangscope.analyze as analysis
    from hangscope.analyze.evidence.classify import classify_process
    from hangscope.analyze.evidence.group import merged_call_tree
    from hangscope.analyze.evidence.roles import renumber_spawn_order
    from hangscope.analyze.evidence.roots import working_roots
    from hangscope.analyze.findings.checks import find_all
    from hangscope.analyze.patterns.calm.calm import calm_progress, waiting_progress
    from hangscope.analyze.patterns.waitpatterns import wait_graph
    from hangscope.analyze.readings import judge_readings
    from hangscope.analyze.verdict import diagnose, with_gpu_evidence

    paused = getattr(analysis, "collector_paused", contextlib.nullcontext)
    clock = time.process_time
    times = {}
    with paused():
        t = clock()
        processes = tuple(classify_process(p) for p in snap.processes)
        done = judge_readings(replace(snap, processes=working_roots(renumber_spawn_order(
            processes))))
        times["classify"] = clock() - t
        t = clock()
        done = replace(done, wait_graph=wait_graph(done))
        times["wait graph"] = clock() - t
        done = analysis._without_collectives(replace(  # the chain analyze() runs
            done, progress=waiting_progress(calm_progress(done))))
        t = clock()
        verdict, groups = diagnose(done)
        verdict = with_gpu_evidence(verdict, done.processes, done.hosts)
        times["group+verdict"] = clock() - t
        t = clock()
        tree = merged_call_tree(done.subjects)
        times["call tree"] = clock() - t
        done = replace(done, groups=groups, call_tree=tree, verdict=verdict)
        check(done, scenario)
        if findings:
            t = clock()
            find_all(done)
            times["findings"] = clock() - t
    return times


def pin_one_core() -> int | None:
    """Run on one core (the lowest this process may use); return it."""
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def bench(ranks: int, scenario: str, repeats: int, classified: bool = False,
          findings_max: int = 1 << 30) -> dict[str, object]:
    """Median CPU seconds of the analysis of a fresh synthetic snapshot, whole and by stage.

    ``analyze`` = ``hangscope.analyze.analyze`` as a whole, timed first on the fresh snapshot
    (the goal); the stages are timed after it on the same snapshot. ``diagnose`` = classify
    + group + verdict + call tree (without the wait graph and the findings).
    """
    from hangscope.analyze import analyze

    # Its imports are not the analysis. The same input: a merge's process classifies the
    # stacks its decoder gave (one tuple per stack where it shares them), not others first.
    analyze(make_snapshot(2, scenario, classified=classified))
    rows = []
    for _ in range(repeats):
        snap = make_snapshot(ranks, scenario, classified=classified)
        row: dict[str, float] = {}
        with_findings = ranks <= findings_max
        if with_findings:
            gc.collect()
            t = time.process_time()
            result = analyze(snap)
            row["analyze"] = time.process_time() - t
            check(result, scenario)
            del result
        gc.collect()
        row.update(stages(snap, scenario, findings=with_findings))
        row["diagnose"] = row["classify"] + row["group+verdict"] + row["call tree"]
        rows.append(row)
        del snap
    keys = list(rows[0])
    return {
        "ranks": ranks, "scenario": scenario, "classified": classified,
        "frames": len(STACKS["all_reduce"]), "threads_per_rank": 1 + len(_NATIVE_THREADS),
        **{k: statistics.median(r[k] for r in rows) for k in keys},
        "runs": [round(r.get("analyze", r["diagnose"]), 3) for r in rows],
    }


def scale_table(rows: list[dict[str, object]]) -> str:
    """Markdown rows of ``bench`` results (CPU seconds on one core)."""
    lines = ["| ranks | input | classify s | group+verdict s | call tree s | "
             "diagnose total s |", "|---|---|---|---|---|---|"]
    for row in rows:
        kind = "classified (merge)" if row.get("classified") else "raw (sampler)"
        if "error" in row:
            lines.append(f"| {row['ranks']} | {kind} | failed: {row['error']} | | | |")
            continue
        lines.append(f"| {row['ranks']:,} | {kind} | {row['classify']:.3f} | "
                     f"{row['group+verdict']:.3f} | {row['call tree']:.3f} | "
                     f"{row['diagnose']:.3f} |")
    return "\n".join(lines)


STAGES = ("classify", "wait graph", "group+verdict", "call tree", "findings", "diagnose",
          "analyze")
#: The goals of issue 36 (one core; issue 22 asked 5 s at 131,072): the whole analysis.
GOALS = {8192: 0.5, 131072: 3.0}


def _child(root: str | None, ranks: int, scenario: str, classified: bool) -> dict[str, object]:
    """One ``bench`` run in a fresh interpreter pinned to one core, on the hangscope under
    ``root`` (None: this checkout): its heap, memo and imports are its own."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import synthetic, hangscope; "
            "synthetic.pin_one_core(); "
            "row = synthetic.bench(int(sys.argv[2]), sys.argv[3], 1, sys.argv[4] == '1'); "
            "print(json.dumps({**row, 'hangscope': hangscope.__file__}))")
    checkout = root or str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = checkout
    # Run from the checkout: ``python -c`` puts the working directory first on sys.path, and
    # from another checkout it would import that one's hangscope.
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent),
                          str(ranks), scenario, "1" if classified else "0"],
                         capture_output=True, text=True, check=False, timeout=1800, env=env,
                         cwd=checkout)
    try:
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if not str(row["hangscope"]).startswith(str(Path(checkout).resolve())):
            return {"error": f"imported {row['hangscope']}, not the one under {checkout}"}
        return row
    except (ValueError, IndexError):
        return {"error": (out.stderr or out.stdout)[-400:]}


def side_by_side(ranks: int, scenario: str, repeats: int, classified: bool,
                 baseline: str) -> dict[str, dict[str, float]]:
    """Median seconds of each stage, baseline and now, their runs interleaved (the machine
    is shared: what load there is hits both alike)."""
    runs: dict[str, list[dict[str, object]]] = {"baseline": [], "now": []}
    for _ in range(repeats):
        for label, root in (("baseline", baseline), ("now", None)):
            row = _child(root, ranks, scenario, classified)
            if "error" in row:
                raise SystemExit(f"{label} at {ranks} ranks failed: {row['error']}")
            runs[label].append(row)
    return {label: {k: statistics.median(float(r[k]) for r in rows)  # type: ignore[arg-type]
                    for k in STAGES if k in rows[0]} for label, rows in runs.items()}


def side_by_side_table(results: list[tuple[int, bool, dict[str, dict[str, float]]]]) -> str:
    """Markdown: per size and input, each stage's baseline and current median seconds."""
    lines = ["| ranks | input | stage | baseline s | now s | speed-up | goal s |",
             "|---|---|---|---|---|---|---|"]
    for ranks, classified, result in results:
        kind = "classified (merge)" if classified else "raw (sampler)"
        for stage in STAGES:
            if stage not in result["now"]:
                continue
            old, new = result["baseline"][stage], result["now"][stage]
            goal = f"{GOALS[ranks]:.1f}" if stage == "analyze" and ranks in GOALS else ""
            lines.append(f"| {ranks:,} | {kind} | {stage} | {old:.3f} | {new:.3f} | "
                         f"{old / new:.1f}x | {goal} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the analysis on synthetic jobs of many ranks")
    parser.add_argument("--ranks", type=int, nargs="+", default=[8192, 131072])
    parser.add_argument("--scenario", choices=sorted(EXPECTED), default="mismatch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--classified", action="store_true",
                        help="threads arrive classified, as `hangscope merge` reads them")
    parser.add_argument("--both", action="store_true", help="raw and classified input")
    parser.add_argument("--baseline", metavar="ROOT",
                        help="a checkout of the code to compare with (e.g. `git worktree add "
                             "/tmp/base 5e1c12c`): each run of it is interleaved with one of "
                             "this checkout, each in its own interpreter pinned to one core")
    parser.add_argument("--findings-max", type=int, default=1 << 30,
                        help="run the whole analyze() (with findings) up to this many ranks")
    args = parser.parse_args(argv)
    cpu = pin_one_core()
    print(f"analysis on one core (CPU {cpu}), CPU seconds, scenario {args.scenario}, "
          f"{len(STACKS['all_reduce'])} frames in each MainThread, "
          f"{1 + len(_NATIVE_THREADS)} threads per rank"
          + (", input already classified" if args.classified else ""))
    inputs = (False, True) if args.both else (args.classified,)
    if args.baseline:
        results = []
        for ranks in args.ranks:
            for classified in inputs:
                result = side_by_side(ranks, args.scenario, args.repeats, classified,
                                      args.baseline)
                results.append((ranks, classified, result))
                print(f"{ranks:>7} ranks{' (classified)' if classified else ''}: "
                      + "; ".join(f"{k} {result['baseline'][k]:.3f} -> {result['now'][k]:.3f}"
                                  for k in STAGES if k in result["now"]), flush=True)
        print()
        print(side_by_side_table(results))
        return 0
    for ranks in args.ranks:
        for classified in inputs:
            row = bench(ranks, args.scenario, args.repeats, classified, args.findings_max)
            parts = ", ".join(f"{k} {row[k]:.3f}" for k in STAGES[:5] if k in row)
            whole = f"; analyze() {row['analyze']:.3f}" if "analyze" in row else ""
            print(f"{ranks:>7} ranks{' (classified)' if classified else ''}: diagnose "
                  f"{row['diagnose']:.3f} s (runs {row['runs']}; {parts}){whole}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
