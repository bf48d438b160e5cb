"""The collective-evidence verdict rules, GIVEN snapshots built from real captures.

Each hung 2-GPU NCCL job of tests/fixtures/nccl (its README: what each rank's host did) becomes a
snapshot whose ranks carry real H200 host stacks of the same kind (tests/fixtures/gpu/validation:
``launch``, a rank blocked in cudaLaunchKernel; ``sync``, a rank in cudaStreamSynchronize;
``nccl_comm``'s rank 1, a rank parked in a Python wait) and whose ``collectives`` is the real RAS
answer and Flight Recorder dumps of that job, analysed as the sampler does. The gloo job is a
whole real dump taken through the CLI (tests/fixtures/nccl/gloo_mismatch.dump.json).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import FIXTURES, fixture_path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.collectives import node_evidence
from hangscope.collect import flightrec
from hangscope.collect.ras_format import parse
from hangscope.model import Job, Process, RankInfo, Role, Snapshot, VerdictKind
from hangscope.model import nccl as ev
from hangscope.model.serialize import load

NCCL = FIXTURES / "nccl"


def _ras(case: str) -> ev.RasReading:
    return ev.RasReading(ev.READ, f"NCCL RAS read ({case})",
                         report=parse((NCCL / "ras" / f"{case}.json").read_text()))


def _fr(case: str) -> ev.FrReading:
    dumps = tuple(flightrec.parse_dump(flightrec.load_bytes(p.read_bytes()),
                                       int(p.name.rsplit("_", 1)[1]), str(p))
                  for p in sorted((NCCL / "flight_recorder" / case).iterdir()))
    return ev.FrReading(ev.READ, f"Flight Recorder read ({case})", dumps=dumps)


def _captured(name: str, role: Role, index: int = 0) -> Process:
    snap = load(fixture_path(name))
    return [p for p in snap.processes if p.role is role][index]


def _as_rank(proc: Process, pid: int, rank: int) -> Process:
    """A real captured rank, numbered as the NCCL job's rank ``rank`` of 2 (its PID from RAS)."""
    env = {**proc.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "2"}
    return replace(proc, pid=pid, environ=env, rank=RankInfo(
        global_rank=rank, local_rank=rank, world_size=2, source="env"))


def _job(case: str, ranks: list[Process], extra: list[Process] = (),  # type: ignore[assignment]
         ras: bool = True, fr: bool = True) -> Snapshot:
    base = load(fixture_path("launch"))
    launcher = _captured("launch", Role.LAUNCHER)
    procs = (launcher, *ranks, *extra)
    evidence = node_evidence(_ras(case) if ras else None, _fr(case) if fr else None, procs,
                             base.hosts[0].name)
    return analyze(replace(base, processes=procs, collectives=(evidence,),
                           job=Job(launcher=launcher.pid, target=launcher.pid, kind="torchrun",
                                   expected_ranks=2, expected_source="WORLD_SIZE=2"),
                           verdict=None, groups=(), findings=()))


def _names(snap: Snapshot) -> list[str]:
    assert snap.verdict is not None
    return [p.name for pid in snap.verdict.suspects if (p := snap.process(pid)) is not None]


@pytest.mark.parametrize("fr", [False, True])
def test_behind_is_a_straggler_named_by_nccl_with_where_each_host_waits(fr: bool) -> None:
    """Rank 0 launched a 2nd all_reduce and blocks in a kernel launch; rank 1 never got there."""
    snap = _job("behind", [_as_rank(_captured("launch", Role.RANK), 622, 0),
                           _as_rank(_captured("nccl_comm", Role.RANK, 1), 623, 1)], fr=fr)
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.STRAGGLER
    assert _names(snap) == ["rank 1"]
    summary = verdict.summary
    if fr:  # the Flight Recorder names the op and rank 0's call site; RAS agrees
        assert "decode_step (serve.py:107)" in summary and "NCCL RAS agrees" in summary
    else:
        assert "rank 1 has launched AllReduce up to #1" in summary
    # ... and where each host waits, from its stack
    assert "Host stacks: rank 0 is blocked launching a CUDA kernel at read_result" in summary
    assert "rank 1 waits on a lock at forever (hangs.py:57)" in summary
    assert any(line.startswith("the host stacks agree") for line in verdict.evidence)


def test_extra_op_missing_rank_never_suspects_the_resource_tracker() -> None:
    """Rank 0 exited and was reaped; rank 1 syncs under .item(); a resource tracker idles."""
    tracker = _captured("sglang", Role.RESOURCE_TRACKER)
    snap = _job("extra_op", [_as_rank(_captured("sync", Role.RANK), 757, 1)], [tracker])
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISSING_RANK
    assert tracker.pid not in verdict.suspects and _names(snap) == []  # rank 0 has no process
    assert verdict.summary.startswith("Missing rank: NCCL RAS has no data from communicator "
                                      "rank 0")
    assert "PID 756, GPU 0 on 192.0.2.2" in verdict.summary
    assert "Host stacks: rank 1 waits for the GPU (CUDA sync) at wait_for_gpu" in verdict.summary


def test_wrong_op_missing_rank_is_the_exited_zombie_from_ras_alone() -> None:
    """Rank 1's all_gather completed and it exited (a zombie, code 0); rank 0 blocks launching."""
    gone = Process(pid=891, role=Role.RANK, state="Z", exit_code=0, python=True,
                   rank=RankInfo(global_rank=1, local_rank=1, world_size=2, source="env"))
    snap = _job("wrong_op", [_as_rank(_captured("launch", Role.RANK), 890, 0), gone], fr=False)
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISSING_RANK
    assert verdict.suspects == (891,)
    assert "(PID 891, GPU 1 on 192.0.2.2)" in verdict.summary
    assert verdict.summary.endswith("rank 1 has exited (zombie).")


def test_gloo_mismatch_from_a_real_cli_dump_names_both_call_sites() -> None:
    snap = analyze(load(NCCL / "gloo_mismatch.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES
    assert sorted(_names(snap)) == ["rank 0", "rank 1"]
    assert "at collective #2" in verdict.summary
    for site in ("rank_main (gloo_fr_mismatch.py:49)", "rank_main (gloo_fr_mismatch.py:51)"):
        assert verdict.summary.count(site) == 2  # what FR recorded, and where the host waits
    assert any(line.startswith("the host stacks agree") for line in verdict.evidence)


def test_stacks_decide_and_collective_evidence_that_disagrees_is_said() -> None:
    """The gloo dump's stacks name a mismatch; RAS evidence (from another node's read) says a
    rank is behind: the stack verdict stands, and its evidence says that they disagree."""
    snap = load(NCCL / "gloo_mismatch.dump.json")
    other = node_evidence(_ras("behind"), None, (), "elsewhere")
    item = replace(snap.collectives[0], conclusions=(), communicators=())
    verdict = analyze(replace(snap, collectives=(item, other))).verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES
    assert verdict.summary.startswith("Mismatched collectives: rank 0 waits in all_reduce")
    assert verdict.evidence[0].startswith(
        "the collective evidence disagrees: Communicator 0x44cd76c5ebeff4b7: communicator rank 1 "
        "has launched AllReduce up to #1")


def test_counts_of_a_job_that_progresses_are_not_a_hang() -> None:
    """A real progressing gloo job given RAS's 'behind' answer: its ranks moved, so NCCL's
    counts would be a moment of an asynchronous pipeline; the stacks decide, and say so."""
    snap = load(fixture_path("progressing"))
    evidence = node_evidence(_ras("behind"), None, snap.processes, "vm")
    verdict = analyze(replace(snap, collectives=(evidence,))).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING
    assert verdict.evidence[0].startswith("the collective evidence disagrees: Communicator "
                                          "0x44cd76c5ebeff4b7")


def _spawned(proc: Process, pid: int) -> Process:
    """A real captured rank as ``mp.spawn`` starts it: no RANK in its environment, no number."""
    env = {k: v for k, v in proc.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    return replace(proc, pid=pid, environ=env, rank=None, role=Role.OTHER)


@pytest.mark.parametrize("fr", [False, True])
def test_mp_spawn_ranks_are_numbered_by_nccl_ras_in_every_table_and_the_verdict(fr: bool) -> None:
    """Issue 19: ranks with no RANK in their environment were "PID 623", role other; RAS places
    PID 622 at rank 0 and PID 623 at rank 1 of the world communicator."""
    from hangscope.analyze.evidence.flightrec.rank_evidence import with_collective_ranks
    from hangscope.render.output import render

    procs = with_collective_ranks(
        [_spawned(_captured("launch", Role.RANK), 622),
         _spawned(_captured("nccl_comm", Role.RANK, 1), 623)], _ras("behind"))
    assert [(p.pid, p.role, p.rank.global_rank if p.rank else None) for p in procs] == [
        (622, Role.RANK, 0), (623, Role.RANK, 1)]
    snap = _job("behind", list(procs), fr=fr)
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.STRAGGLER
    assert _names(snap) == ["rank 1"]
    text = render(snap, "text")
    assert "PID 623 " not in text.replace("(PID 623)", "") and "rank 1" in text
    assert not any(m.reason and "exited" in m.reason for c in snap.collectives[0].communicators
                   for m in c.missing)


def test_ranks_from_the_environment_are_kept_whatever_ras_says() -> None:
    from hangscope.analyze.evidence.flightrec.rank_evidence import with_collective_ranks

    named = _as_rank(_captured("launch", Role.RANK), 622, 1)  # RANK=1 in its environment
    (kept,) = with_collective_ranks([named], _ras("behind"))
    assert kept.rank is not None and kept.rank.global_rank == 1 and kept.rank.source == "env"
