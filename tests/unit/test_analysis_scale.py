"""The analysis of many ranks copies and caches: what it derives must stay what it would
derive from scratch (real recorded snapshots, GIVEN / WHEN / THEN)."""

from __future__ import annotations

from dataclasses import replace

from hangscope.analyze import analyze
from hangscope.analyze.evidence.classify import classify_process, pick_working_thread
from hangscope.model.serialize import dumps, load
from tests.support import fixture_path


def _unclassified(name: str):
    """The recorded snapshot's raw facts: every thread and process without a conclusion."""
    snap = load(fixture_path(name))
    procs = tuple(replace(p, working_tid=None, threads=tuple(
        replace(t, category=None, op=None, site=None, context=None, hint=None, helper=False)
        for t in p.threads)) for p in snap.processes)
    return replace(snap, processes=procs, groups=(), call_tree=(), verdict=None, findings=())


def test_given_a_process_whose_working_thread_was_asked_then_classify_gives_the_new_one() -> None:
    # GIVEN raw processes of a real mismatch whose (cached) working thread was read: none yet
    snap = _unclassified("mismatch")
    for proc in snap.processes:
        assert proc.working_thread is None
        assert proc.category is not None  # asked, and cached, before classification
    # WHEN they are classified (a copy of each process with its working thread named)
    done = [classify_process(p) for p in snap.processes]
    # THEN each copy answers for itself, as a process built from scratch would
    for proc in done:
        fresh = replace(proc)  # dataclasses.replace: built by __init__, nothing cached
        assert proc.working_tid is not None
        assert proc.working_thread is fresh.working_thread
        assert proc.working_thread is pick_working_thread(proc.threads)
        assert proc.category is fresh.category
        assert proc.key == fresh.key


def test_given_the_same_job_twice_then_the_second_analysis_says_the_same() -> None:
    # GIVEN a recorded job, analysed once (the memo now holds its stacks)
    first = dumps(analyze(load(fixture_path("straggler"))))
    # WHEN it is loaded again (new objects, equal stacks) and analysed
    second = dumps(analyze(load(fixture_path("straggler"))))
    # THEN every conclusion is the same
    assert second == first


def test_given_an_unclassified_copy_then_the_analysis_equals_the_recorded_one() -> None:
    # GIVEN a recorded job stripped of every conclusion, and the recording itself
    raw = _unclassified("deadlock")
    recorded = analyze(load(fixture_path("deadlock")))
    # WHEN the raw copy is analysed
    again = analyze(raw)
    # THEN the verdict, groups and call tree are those of the recording
    assert again.verdict == recorded.verdict
    assert again.groups == recorded.groups
    assert again.call_tree == recorded.call_tree


def test_given_a_paused_collector_when_it_resumes_then_what_was_made_waits_for_no_young_pass(
) -> None:
    import gc

    from hangscope.gcpause import collector_paused

    # GIVEN the collector on, and work that keeps many objects while it is paused (as an
    # analysis keeps the job it returns)
    assert gc.isenabled()
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(seen)
    try:
        with collector_paused():
            kept = [[i] for i in range(20_000)]
        # WHEN the program makes a few objects after it
        few = [[i] for i in range(10)]
    finally:
        gc.callbacks.remove(seen)
    # THEN the collector is back on, and no young collection walked the 20,000 lists (they
    # sit in the oldest generation: only full collections walk them, as before)
    assert gc.isenabled() and len(kept) == 20_000 and len(few) == 10
    assert collections == []
    assert gc.get_freeze_count() == 0
    # AND objects the program froze itself stay frozen (the move is skipped)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            made = [[i] for i in range(1000)]
        assert gc.get_freeze_count() == frozen and len(made) == 1000
    finally:
        gc.unfreeze()


def test_given_rank_numbers_in_runs_when_compacted_then_each_run_is_one_range() -> None:
    from hangscope.words import compact_ranks

    # GIVEN every rank of a large job but one, unsorted and repeated; and small odd sets
    everyone = [*range(131_072), 5, 7]
    everyone.remove(87_382)
    # WHEN they are compacted THEN each run of consecutive ranks is one range, in order
    assert compact_ranks(reversed(everyone)) == "0-87381,87383-131071"
    assert compact_ranks([]) == "-"
    assert compact_ranks([4]) == "4"
    assert compact_ranks([9, 1, 2, 3, 7, 8, -1, 0]) == "-1-3,7-9"
    assert compact_ranks([0, 2, 4, 5]) == "0,2,4-5"


def test_given_ranks_that_alternate_stacks_then_the_stack_index_groups_them_as_by_key() -> None:
    from hangscope.analyze.graph.stackindex import StackIndex
    from hangscope.model import Frame, Process, Thread

    # GIVEN ranks whose threads hold two interned stacks, in runs and alternating, and one
    # rank with an extra thread (the neighbour test must not take it for the run before)
    wait, run = (Frame("wait", "a.py", 1),), (Frame("run", "b.py", 2),)

    def rank(pid: int, *stacks: tuple[Frame, ...]) -> Process:
        return Process(pid=pid, threads=tuple(Thread(tid=pid + i, frames=s)
                                              for i, s in enumerate(stacks)))

    procs = (rank(1, wait, ()), rank(2, wait, ()), rank(3, run, ()), rank(4, wait, ()),
             rank(5, wait, (), ()), rank(6, run, ()), rank(7, wait, ()))
    # WHEN they are indexed
    index = StackIndex(procs)
    groups = index.groups()
    # THEN each set of stacks is one group, its members in snapshot order, as keyed by id
    assert [[p.pid for p in members] for _, members in groups] == [[1, 2, 4, 7], [3, 6], [5]]
    assert [stacks for stacks, _ in groups] == [(wait, ()), (run, ()), (wait, (), ())]
    assert [p.pid for p in index.having(lambda frames: frames is run)] == [3, 6]
    assert [p.pid for p in index.having(lambda frames: frames is wait)] == [1, 2, 4, 5, 7]


def test_given_ranks_of_equal_sizes_then_the_memory_finding_says_each_as_before() -> None:
    from hangscope.analyze.findings.kernel import check_memory
    from hangscope.model import Host, Job, Process, Snapshot

    # GIVEN one host's ranks, most with the same sizes, one larger
    procs = tuple(Process(pid=10 + i, host="n0", rss=(2 if i == 2 else 1) << 30, vms=4 << 30)
                  for i in range(4))
    snap = Snapshot(created="", hangscope="", hosts=(Host(name="n0", mem_total=64 << 30),),
                    job=Job(), processes=procs)
    # WHEN the memory is checked
    usage = next(f for f in check_memory(snap) if f.id == "mem.usage")
    # THEN every process has its own sizes (equal ones may be one object: read-only evidence)
    per = usage.evidence["processes"]
    assert per == {p.pid: {"rss": p.rss, "vms": p.vms, "swap": None} for p in procs}
    assert per[10] is per[11] and per[12]["rss"] == 2 << 30


def test_given_more_nodes_than_lines_a_report_reads_then_memory_in_use_is_one_finding() -> None:
    from hangscope.analyze.findings.kernel import USAGE_PER_NODE_MAX, check_memory
    from hangscope.model import Host, Job, Process, Severity, Snapshot

    # GIVEN a job of many nodes, 2 ranks each, node 7 holding the most and rank 15 the largest,
    # and one node nearly out of memory
    nodes = USAGE_PER_NODE_MAX + 4
    hosts = tuple(Host(name=f"n{i:02d}", mem_total=64 << 30 if i != 3 else 5 << 29)
                  for i in range(nodes))
    procs = tuple(Process(pid=100 + i, host=f"n{i // 2:02d}",
                          rss=(5 if i == 15 else 3 if i == 14 else 1) << 30, vms=2 << 30)
                  for i in range(2 * nodes))
    snap = Snapshot(created="", hangscope="", hosts=hosts, job=Job(), processes=procs)
    # WHEN the memory is checked
    found = list(check_memory(snap))
    # THEN the memory in use is one line for the job, not one per node
    (usage,) = (f for f in found if f.id == "mem.usage")
    assert usage.message == (
        f"The job's {2 * nodes} processes hold 46.0G resident on {nodes} nodes; n07 holds the "
        "most, 8.0G (2 processes); the largest is PID 115 on n07 with 5.0G."), usage.message
    assert usage.evidence["nodes"]["n07"] == 8 << 30 and len(usage.evidence["nodes"]) == nodes
    # and a node's warning is still its own, named
    (pressure,) = (f for f in found if f.id == "mem.pressure")
    assert pressure.severity is Severity.WARNING and pressure.message.startswith(
        "On n03: the job holds 2.0G resident, 80% of"), pressure.message
    # (at the bound, each node says its own, as before)
    few = Snapshot(created="", hangscope="", hosts=hosts[:USAGE_PER_NODE_MAX], job=Job(),
                   processes=tuple(p for p in procs if int(p.host[1:]) < USAGE_PER_NODE_MAX))
    assert sum(f.id == "mem.usage" for f in check_memory(few)) == USAGE_PER_NODE_MAX


def test_given_every_group_in_a_collective_then_the_mismatch_rule_reads_groups_not_ranks(
) -> None:
    from benchmarks import synthetic
    from hangscope.analyze.evidence.facts import facts_of
    from hangscope.analyze.rules import _all_in_collectives, _in_collectives

    for scenario, by_group in (("mismatch", True), ("all_waiting", True), ("straggler", False)):
        # GIVEN a job of ranks in collectives (and one computing, in the straggler's job)
        facts = facts_of(analyze(synthetic.make_snapshot(64, scenario)))
        # WHEN the mismatch rule gathers the ranks it compares
        grouped = _all_in_collectives(facts)
        # THEN where every group waits in a group-wide collective and none moves, it takes
        # every subject at once: the same ranks, in the same order, as asking each rank
        assert (grouped is not None) is by_group, scenario
        if grouped is not None:
            assert grouped == _in_collectives(facts) == list(facts.subjects)


def test_given_ranks_in_one_pass_then_each_group_has_the_numbers_pids_and_hosts_of_each(
) -> None:
    from hangscope.analyze.evidence.group import group_ranks
    from hangscope.model import Category, Process, RankInfo, Thread, rank_id

    def rank(pid: int, info: RankInfo | None, op: str, host: str = "n0") -> Process:
        main = Thread(tid=pid, category=Category.COLLECTIVE, op=op, site="step (t.py:3)")
        return Process(pid=pid, host=host, rank=info, state="S", threads=(main,),
                       working_tid=pid)

    # GIVEN ranks out of order, one known by its TP number only, one by its PID only; then
    # the same with a DP coordinate (ranks of two replicas share numbers)
    plain = [rank(20, RankInfo(global_rank=2), "all_reduce"),
             rank(10, RankInfo(global_rank=0), "all_reduce", "n1"),
             rank(30, RankInfo(tp=5), "all_reduce"), rank(40, None, "all_gather"),
             rank(50, RankInfo(global_rank=1), "all_reduce")]
    replicas = [rank(60 + i, RankInfo(global_rank=i % 2, dp=i // 2), "all_reduce")
                for i in (3, 0, 2, 1)]
    # WHEN they are grouped in one pass
    by_rank = group_ranks(plain)
    labelled = group_ranks(replicas)
    # THEN each group lists its members' numbers sorted, their PIDs and hosts in their order
    assert [(g.op, g.ranks, g.pids, g.hosts) for g in by_rank] == [
        ("all_reduce", (0, 1, 2, 5), (20, 10, 30, 50), ("n0", "n1", "n0", "n0")),
        ("all_gather", (40,), (40,), ("n0",))]
    assert by_rank[0].ranks == tuple(sorted(rank_id(p) for p in plain[:3] + plain[4:]))
    # AND ranks of replicas are ordered and labelled by their coordinates
    assert labelled[0].ranks == (0, 1, 0, 1) and labelled[0].pids == (63, 60, 62, 61)
    assert labelled[0].labels[0].startswith("DP0") and labelled[0].labels[2].startswith("DP1")


def test_given_ranks_all_waiting_then_no_rule_compares_them_rank_by_rank() -> None:
    from benchmarks import synthetic
    from hangscope.model import Process

    # GIVEN jobs whose verdict is reached past the rule that looks for a rank that skipped a
    # collective (it tested each rank's membership of a list of the others: quadratic,
    # 10 s at 4,096 ranks, hours at 131,072)
    equal = Process.__eq__
    compared: list[int] = []

    def counted(self: Process, other: object) -> bool:
        compared.append(1)
        return equal(self, other)

    for scenario in ("all_waiting", "straggler"):
        snap = synthetic.make_snapshot(256, scenario)
        # WHEN they are analysed
        Process.__eq__ = counted  # type: ignore[method-assign,assignment]
        try:
            done = analyze(snap)
        finally:
            Process.__eq__ = equal  # type: ignore[method-assign]
        # THEN the diagnosis is the same, and no two processes were compared field by field
        synthetic.check(done, scenario)
        assert compared == [], scenario


def test_given_sampled_ranks_then_one_pass_finds_the_sampled_and_the_moved_in_order() -> None:
    from hangscope.analyze.evidence.facts import sampled_and_moved
    from hangscope.model import Process, Thread

    # GIVEN ranks sampled 3 times (stuck, moved), once, and one without a working thread
    def rank(pid: int, samples: int, unchanged: int) -> Process:
        return Process(pid=pid, working_tid=pid, threads=(
            Thread(tid=pid, samples=samples, unchanged_samples=unchanged),))

    procs = [rank(1, 3, 3), rank(2, 3, 1), rank(3, 1, 1), rank(4, 3, 2), Process(pid=5)]
    # WHEN they are split in one pass
    sampled, moved = sampled_and_moved(procs)
    # THEN as the two filters said: sampled more than once; of those, not stuck
    assert sampled == [p for p in procs if p.working_thread and p.working_thread.samples > 1]
    assert moved == [p for p in sampled if not p.working_thread.stuck]
    assert [p.pid for p in sampled] == [1, 2, 4] and [p.pid for p in moved] == [2, 4]


def test_given_ranks_that_say_the_same_then_each_evidence_line_is_worded_as_alone() -> None:
    from dataclasses import replace

    from benchmarks import synthetic
    from hangscope.analyze.evidence.facts import facts_of
    from hangscope.analyze.rules import subject_lines

    # GIVEN a straggler's job, and the same with ranks whose CPU reads differ (0.0, -0.0)
    done = analyze(synthetic.make_snapshot(24, "straggler"))
    odd = replace(done, processes=tuple(replace(p, cpu_percent=-0.0) if i % 5 == 1 else p
                                        for i, p in enumerate(done.processes)))
    for snap in (done, odd):
        facts = facts_of(snap)
        # WHEN the evidence lines are worded (each distinct line once)
        lines = subject_lines.evidence(facts)
        # THEN they are the lines of each subject worded alone, then folded
        alone = [subject_lines._facts_of(facts, p) for p in facts.subjects]
        assert all(any(a.split(",")[0] in line for line in lines) for a in alone)
        # AND a rank whose CPU reads -0.0 (equal to 0.0) keeps its own words
        assert (snap is odd) == any("CPU -0%" in line for line in lines)
        assert any("CPU 0%" in line for line in lines)


def test_given_processes_of_several_kinds_then_one_census_sorts_each_check_its_own() -> None:
    from hangscope.analyze.findings.census import cpu_of, take_census
    from hangscope.model import Host, Job, Process, Role, Snapshot, Thread

    # GIVEN a rank with a thread in D, a zombie, a live and an exited compiler, a busy
    # compile worker, two ranks started at the same oldest time, and one without an RSS
    procs = (Process(pid=1, role=Role.RANK, create_time=5.0, rss=1, cpu_percent=1.0,
                     threads=(Thread(tid=1), Thread(tid=2, state="D"))),
             Process(pid=2, role=Role.RANK, state="Z", create_time=3.0, rss=1),
             Process(pid=3, role=Role.COMPILER, create_time=3.0, rss=1),
             Process(pid=4, role=Role.COMPILER, state="X"),
             Process(pid=5, role=Role.COMPILE_WORKER, cpu_percent=30.0, rss=2),
             Process(pid=6, role=Role.RANK, cpu_percent=80.0))
    snap = Snapshot(created="", hangscope="", hosts=(Host(name="n0"),), job=Job(),
                    processes=procs)
    # WHEN the census is taken
    found = take_census(snap)
    # THEN each list holds what its check asked of every process, in snapshot order
    assert [p.pid for p in found.notable] == [1, 2, 4]
    assert [p.pid for p in found.compilers] == [3]
    assert [p.pid for p in found.workers] == [5]
    assert found.first_started is procs[1]  # the first of the oldest, as min() picks
    assert [p.pid for p in found.memory[None]] == [1, 3, 5]  # live, with an RSS
    # AND the CPU of ranks is one pass: the busiest and the busy ones, or nothing if unknown
    assert cpu_of((procs[0], procs[5]), 50.0) == (80.0, [procs[5]])
    assert cpu_of(procs[:2], 50.0) == (None, [])


def test_given_processes_of_several_roles_then_of_roles_keeps_process_order() -> None:
    from hangscope.model import Job, Process, Role, Snapshot

    # GIVEN a launcher, ranks and helpers interleaved
    roles = (Role.LAUNCHER, Role.RANK, Role.DATA_WORKER, Role.RANK, Role.COMPILER,
             Role.DATA_WORKER)
    snap = Snapshot(created="", hangscope="", hosts=(), job=Job(), processes=tuple(
        Process(pid=i, role=role) for i, role in enumerate(roles)))
    # WHEN the processes of some roles are asked for
    # THEN one role's are its index entry, several roles' come in process order
    assert [p.pid for p in snap.of_roles(Role.RANK)] == [1, 3]
    assert [p.pid for p in snap.of_roles(Role.COMPILER, Role.DATA_WORKER)] == [2, 4, 5]
    assert snap.of_roles(Role.HELPER) == ()
    assert snap.rank_processes == snap.of_roles(Role.RANK)
    assert [p.pid for p in snap.subjects] == [1, 3]


def test_given_two_dumps_with_equal_stacks_then_the_parse_gives_them_one_tuple() -> None:
    import json

    from hangscope.collect.pyspy import parse_dump

    # GIVEN the py-spy JSON of two processes whose main threads wait in the same stack
    frames = [{"name": "pthread_cond_wait", "filename": "/lib/libc.so.6",
               "module": "/lib/libc.so.6", "line": 0},
              {"name": "all_reduce", "filename": "/t/distributed_c10d.py", "module": None,
               "line": 3252}]
    def dump(other: str) -> str:
        return json.dumps([{"thread_id": 1, "os_thread_id": 9, "thread_name": "MainThread",
                            "frames": frames},
                           {"thread_id": 2, "os_thread_id": 10, "thread_name": other,
                            "frames": frames[:1]}])
    # WHEN each is parsed
    first, second = parse_dump(9, dump("a"), True), parse_dump(10, dump("b"), True)
    # THEN equal stacks are one tuple (classify finds them by identity), distinct ones are not
    assert first.threads[0].frames is second.threads[0].frames
    assert first.threads[1].frames is second.threads[1].frames
    assert first.threads[0].frames is not first.threads[1].frames
    assert first.threads[0].frames[1].line == 3252
