"""The p2p wait-for graph on real captures (tests/fixtures/p2p, see its README).

GIVEN py-spy --locals dumps of real gloo ranks WHEN the peers are read and the graph built
THEN a receive cycle is a deadlock named with its ranks, and a healthy pipeline's matched
send/recv pair is a pair, not a deadlock or a mismatch.
"""

from __future__ import annotations

import json
from pathlib import Path

from hangscope.analyze.evidence.classify import classify_thread
from hangscope.analyze.evidence.p2p import (
    P2PCall,
    all_p2p,
    describe_cycle,
    describe_points_at,
    p2p_call,
    p2p_graph,
    rooted_root,
)
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.collect.pyspy import parse_dump
from hangscope.model import Category, Thread

FIXTURES = Path(__file__).parent.parent / "fixtures" / "p2p"


def calls(case: str) -> dict[int, P2PCall]:
    out = {}
    for rank in range(3):
        frames = json.loads((FIXTURES / f"{case}.rank{rank}.locals.json").read_text())[0]["frames"]
        call = p2p_call(frames)
        if call is not None:
            out[rank] = call
    return out


def test_given_receive_cycle_when_graph_built_then_deadlock_with_its_ranks() -> None:
    found = calls("cycle")
    assert {r: (c.op, c.peer) for r, c in found.items()} == {
        0: ("recv", 2), 1: ("recv", 0), 2: ("recv", 1)}
    graph = p2p_graph(found, [0, 1, 2])
    assert graph.deadlocked and graph.cycles == ((0, 2, 1),)
    assert graph.matched == () and graph.points_at == ()
    assert describe_cycle(graph.cycles[0], found) == (
        "Point-to-point deadlock among ranks 0, 2, 1: rank 0 waits to receive from rank 2; "
        "rank 2 waits to receive from rank 1; rank 1 waits to receive from rank 0 "
        "(every rank receives first and none sends).")


def test_given_healthy_pipeline_mid_transfer_then_matched_pair_not_deadlock() -> None:
    found = calls("pipeline3")
    assert {r: (c.op, c.peer) for r, c in found.items()} == {
        0: ("send", 1), 1: ("recv", 0), 2: ("recv", 1)}
    graph = p2p_graph(found, [0, 1, 2])
    assert graph.matched == ((0, 1),)
    assert not graph.deadlocked and graph.points_at == ()


def test_given_send_inside_isend_then_peer_from_the_users_call() -> None:
    # send() calls isend() with dst=None, group_dst=2: the outer frame names the global peer.
    found = calls("pipeline6")
    assert found[1] == P2PCall("send", 2, 2, 0, found[1].group)
    assert found[2].op == "recv" and found[2].peer == 1
    assert p2p_graph(found, [0, 1, 2]).matched == ((1, 2),)


def test_given_rank_waiting_on_a_rank_elsewhere_then_it_points_at_that_rank() -> None:
    # The real cycle's rank 1 (recv from 0) with rank 0 not in p2p (elsewhere).
    found = {1: calls("cycle")[1]}
    graph = p2p_graph(found, [0, 1, 2])
    assert graph.points_at == (((1,), 0),) and not graph.deadlocked
    assert describe_points_at((1,), 0, found, "in sleep at build (x.py:3)") == (
        "rank 1 waits to receive from rank 0, which is in sleep at build (x.py:3).")
    assert describe_points_at((1,), 0, found, None).endswith("not running (missing from the job).")


def test_given_real_p2p_stacks_when_classified_then_collective_with_p2p_op() -> None:
    for rank in range(3):
        dump = parse_dump(1, (FIXTURES / f"cycle.rank{rank}.locals.json").read_text(), False)
        main = dump.threads[0]
        thread = classify_thread(Thread(tid=main.tid, name=main.name, frames=main.frames))
        assert thread.category is Category.COLLECTIVE and thread.op == "recv"
        assert is_p2p(thread.op)
    assert all_p2p({0: "recv", 1: "send"}) and not all_p2p({0: "recv", 1: "all_reduce"})
    assert not is_p2p("all_reduce")


def test_given_a_send_and_its_receive_with_other_tags_then_the_tags_are_said() -> None:
    """gloo#308: a pipeline whose receiving stage counts its tag one ahead: the pair should
    meet and cannot; the tags are the answer, said in the verdict."""
    found = {0: P2PCall("send", 1, tag=7), 1: P2PCall("recv", 0, tag=8)}
    graph = p2p_graph(found, [0, 1])
    assert graph.matched == () and graph.cycles == ((0, 1),)
    assert describe_cycle(graph.cycles[0], found) == (
        "Point-to-point deadlock among ranks 0, 1: rank 0 waits to send to rank 1 with tag 7; "
        "rank 1 waits to receive from rank 0 with tag 8 (rank 0 sends with tag 7 and rank 1 "
        "receives with tag 8: a send meets only a receive of its own tag, so neither "
        "completes).")


def test_the_root_of_a_rooted_collective_is_read_from_its_c10d_frame() -> None:
    c10d = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    threads = [{"os_thread_id": 7, "frames": [
        {"name": "broadcast", "filename": c10d,
         "locals": [{"name": "src", "repr": "1"}, {"name": "group_src", "repr": "None"}]},
        {"name": "worker", "filename": "/job/job.py", "locals": [{"name": "src", "repr": "0"}]},
    ]}]
    assert rooted_root(threads, 7) == 1
    by_group = [{"os_thread_id": 7, "frames": [{"name": "gather", "filename": c10d, "locals": [
        {"name": "dst", "repr": "None"}, {"name": "group_dst", "repr": "2"}]}]}]
    assert rooted_root(by_group, 7) == 2
