"""Findings, GIVEN a real recorded snapshot re-analysed, THEN these findings say these things.

Real dumps only (tests/fixtures/snapshots, tests/fixtures/gpu/validation). The live checks
that need a real broken server, a stopped or a D-state process stay in
tests/integration/test_findings.py.
"""

from __future__ import annotations

import pytest
from support import reanalysed, recorded_names

from hangscope.model import Severity, Snapshot


def finding(snap: Snapshot, fid: str) -> str:
    found = [f.message for f in snap.findings if f.id == fid]
    assert len(found) == 1, f"{fid}: {[f.id for f in snap.findings]}"
    return found[0]


def test_idle_ranks_and_stuck_stacks_of_the_mismatch_demo() -> None:
    snap = reanalysed("mismatch")
    assert finding(snap, "activity.idle").startswith(
        "Every rank was idle on CPU for the whole 2.0 s window (the busiest used 0%)")
    assert finding(snap, "ranks.count") == (
        "Expected 4 ranks (--nproc-per-node 4) and found all 4.")
    assert finding(snap, "age.stacks") == (
        "No rank's stack changed during the 2.0 s window (3 samples): they are stuck, not slow.")
    assert finding(snap, "mem.usage").startswith("The job's 5 processes hold 871M resident")
    assert finding(snap, "age.job") == (
        "The job started 16 s before this dump (its launcher, PID 7698).")


def test_sglang_counts_tp_schedulers_against_tp_size() -> None:
    assert finding(reanalysed("sglang"), "ranks.count") == (
        "Expected 4 TP schedulers (--tp-size 4) and found all 4.")


def test_straggler_stack_moved_while_the_others_did_not() -> None:
    assert finding(reanalysed("straggler"), "age.stacks") == (
        "Rank 3 (PID 8035) changed stack during the 3.6 s window (3 samples); ranks 0-2 did not.")


def test_a_lone_process_is_named_once_and_holds_in_the_singular() -> None:
    snap = reanalysed("progressing")
    assert finding(snap, "age.job") == "The job started 2 s before this dump (PID 20065)."
    assert finding(snap, "mem.usage").startswith("The job's 1 process holds 12M resident")


def test_gpu_spinning_when_the_gpu_is_busy_and_the_host_waits() -> None:
    snap = reanalysed("sync")
    message = finding(snap, "gpu.spinning")
    assert message.startswith("GPU 0 100% busy while rank 0's host thread waits in "
                              "cudaDeviceSynchronize: a kernel is spinning")
    assert next(f for f in snap.findings if f.id == "gpu.spinning").severity is Severity.WARNING


def test_compiler_child_running_under_a_rank() -> None:
    snap = reanalysed("triton")
    assert finding(snap, "compile.running").startswith(
        "The compiler ptxas (PID 728) has been running for 28 s under rank 0 (PID 457)")
    assert "its compiler child ptxas (PID 728) runs" in finding(snap, "gpu.compiling")


def test_overcommit_is_address_space_not_use() -> None:
    message = finding(reanalysed("inductor"), "mem.overcommit")
    assert message.startswith("The job has reserved 289.7G of virtual memory, 2.3x the 125.9G")
    assert "That is address space, not use: only 7.3G is resident." in message


def test_gpu_idle_means_the_block_is_upstream() -> None:
    assert finding(reanalysed("nccl_init"), "gpu.idle").startswith(
        "GPU 0 idle while rank 0 waits (c10d::TCPStore::waitForWorkers): nothing runs there")


def test_busy_rank_among_idle_ones() -> None:
    assert finding(reanalysed("nccl_comm"), "activity.busy") == (
        "Rank 0 used CPU during the window while the others were idle.")


def test_listening_ports_of_a_training_job_are_not_said() -> None:
    # GIVEN ranks that listen (their store, gloo's pairs) WHEN the verdict is no idle server
    # THEN the ports bear on nothing: no finding (issue 20 item 10)
    snap = reanalysed("tie")
    assert snap.verdict is not None and snap.verdict.kind.value != "idle"
    assert all(f.id != "listen.ports" for f in snap.findings)


@pytest.mark.parametrize("name", recorded_names())
def test_findings_are_ordered_by_severity_and_never_repeat_an_id(name: str) -> None:
    snap = reanalysed(name)
    orders = [f.severity.order for f in snap.findings]
    assert orders == sorted(orders)
    ids = [f.id for f in snap.findings if f.id != "gpu.health"]
    assert len(ids) == len(set(ids))


def test_a_busy_process_that_is_no_rank_is_named_by_its_pid_not_as_a_rank() -> None:
    """Issue 19: "Rank 1792 used CPU" about a process with no rank: its PID was printed as a
    rank number."""
    from dataclasses import replace

    from hangscope.analyze import analyze
    from hangscope.model import Role

    snap = reanalysed("nccl_comm")
    procs = tuple(replace(p, rank=None, role=Role.OTHER) if p.role is Role.RANK else p
                  for p in snap.processes)
    message = finding(analyze(replace(snap, processes=procs, verdict=None, groups=(),
                                      findings=())), "activity.busy")
    busy = next(p for p in procs if (p.cpu_percent or 0) >= 50)
    assert message.startswith(f"PID {busy.pid}") and "Rank" not in message


def test_paging_on_a_machine_without_swap_does_not_blame_swap() -> None:
    from dataclasses import replace

    from hangscope.analyze import analyze

    snap = reanalysed("mismatch")
    rank = snap.rank_processes[0]
    procs = tuple(replace(p, major_faults_window=5000) if p.pid == rank.pid else p
                  for p in snap.processes)
    for swap_total, said in ((0, "the machine has no swap, so it re-reads mapped files"),
                             (None, "reading memory back from swap or disk")):
        hosts = tuple(replace(h, swap_total=swap_total) for h in snap.hosts)
        again = analyze(replace(snap, processes=procs, hosts=hosts, verdict=None, groups=(),
                                findings=()))
        message = finding(again, "mem.paging")
        assert said in message
        if swap_total == 0:
            assert "swap or disk" not in message


def test_a_compiler_started_during_the_dump_has_no_negative_age() -> None:
    """The recorded triton job with its compiler started 40 ms after the snapshot's stamp (a
    ptxas spawned while the dump ran, or within its start time's clock tick): age 0, never
    negative (a real run read -0.04 s)."""
    from dataclasses import replace
    from datetime import datetime

    from support import fixture_path

    from hangscope.analyze import analyze
    from hangscope.model.serialize import load

    raw = load(fixture_path("triton"))
    stamp = datetime.fromisoformat(raw.created).timestamp()
    late = tuple(replace(p, create_time=stamp + 0.04) if p.pid == 728 else p
                 for p in raw.processes)
    snap = analyze(replace(raw, processes=late))
    found = next(f for f in snap.findings if f.id == "compile.running")
    assert found.evidence["age_s"] == 0.0, found.evidence
