"""The multi-node watch's judgement over its nodes' lines (hangscope/remote/multiwatch.py).

GIVEN the JSON lines two nodes' watchers print (as live/node_events.py writes them), fed in
the order they arrive, with a frozen clock, and the capture taken by a dump that returns the
real merged dump of a hung 4-node job (tests/fixtures/multinode/gloo4x2-merged.json) WHEN the
watch judges each line THEN it captures once, not again as the nodes' pulses come out of step,
again when the hang changes shape, says "recovered", and captures a node whose job ended
while the others run, and says what a node lost after it was watched still gets. (The real
processes: tests/integration/test_watch_multinode.py.)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.live.sampler import SampleOptions
from hangscope.live.watch import WatchOptions
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import load
from hangscope.remote.find import Spec
from hangscope.remote.multiwatch import NODE_EXIT_GRACE_S, MultiWatch
from hangscope.remote.nodewatch import NodeEvent
from hangscope.remote.request import NodeRequest, Placement
from hangscope.remote.transport import Ssh

HUNG = load(str(Path(__file__).resolve().parent.parent / "fixtures" / "multinode"
                / "gloo4x2-merged.json"))
WAIT = ["main (worker.py:61)", "all_reduce (torch/distributed/distributed_c10d.py:3252)"]


class Scene:
    """A watch of nodes a and b (--after 10) whose lines the test feeds."""

    def __init__(self, tmp_path: Path) -> None:
        self.now = 100.0
        self.lines: list[str] = []
        self.dumps = 0
        self.snapshot = HUNG  # what the next dump reads
        request = NodeRequest(Spec("env", "TORCHELASTIC_RUN_ID", "job"), SampleOptions(),
                              Placement(Ssh(), ("a", "b")))
        self.watch = MultiWatch(request, None, WatchOptions(after=10, interval=2,
                                                            out=tmp_path),
                                say=self.lines.append, clock=lambda: self.now,
                                dump=self._dump)

    def _dump(self, request: NodeRequest, pid: int | None) -> Snapshot:
        self.dumps += 1
        return self.snapshot

    def pulse(self, node: str, *waits: tuple[int, list[str], float]) -> None:
        self.watch._handle(NodeEvent(node, "pulse", {"ranks": {"11": 0}, "waits": [
            list(w) for w in waits]}))

    def said(self, word: str) -> list[str]:
        return [line for line in self.lines if word in line]


def test_one_capture_while_the_nodes_reach_the_hang_out_of_step(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.pulse("a", (11, WAIT, 4.0))
    scene.pulse("b")
    assert scene.said("nodes watched") == ["2 of 2 nodes watched (a,b): 2 ranks"]
    scene.pulse("a", (11, WAIT, 10.5))  # a's rank waited --after: the whole job is captured
    assert scene.dumps == 1 and len(scene.said("HANG (PID 11 on a waited 10 s")) == 1
    scene.pulse("b", (12, WAIT, 10.1))  # b's pulse comes later with the same hang
    scene.pulse("a", (11, WAIT, 12.5))
    assert scene.dumps == 1
    assert len(list(tmp_path.glob("hangscope-*-job-*-1.json"))) == 1


def test_a_changed_shape_is_captured_again_and_a_recovery_is_no_new_shape(
        tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.pulse("b")
    scene.pulse("a", (11, WAIT, 10.5))
    scene.pulse("b", (12, WAIT, 10.1))
    scene.now += 20
    # a's rank left its wait for another; b's still waits: a new shape of the hang, once
    # every node of the hang has pulsed since (b's next line could be a recovery too)
    barrier = ["main (worker.py:61)", "barrier (x.py:9)"]
    scene.pulse("a", (11, barrier, 11.0))
    scene.pulse("b", (12, WAIT, 12.1))
    assert scene.dumps == 1
    scene.pulse("a", (11, barrier, 13.0))
    assert scene.dumps == 2 and scene.said("HANG (the hang changed shape)")
    # WHEN every process of the hang leaves its wait, one node's pulse at a time
    scene.pulse("a")
    scene.pulse("b")
    assert scene.said("recovered after")
    assert scene.dumps == 2


def test_a_recovery_read_as_a_new_shape_and_dumped_progressing_is_no_second_capture(
        tmp_path: Path) -> None:
    # GIVEN a hang captured on both nodes' ranks
    scene = Scene(tmp_path)
    scene.pulse("b")
    scene.pulse("a", (11, WAIT, 10.5))
    scene.pulse("b", (12, WAIT, 10.1))
    assert scene.dumps == 1
    # WHEN a's rank leaves its wait for another while b's pulse still names its old one (the
    # job moving again, reaching the nodes' pulses one at a time) and the dump of that new
    # shape reads the job progressing (CI's run of test_watch_multinode wrote it as a second
    # "HANG" capture that said "PROGRESSING")
    scene.now += 20
    scene.snapshot = replace(HUNG, verdict=replace(HUNG.verdict,
                                                   kind=VerdictKind.PROGRESSING))
    barrier = ["main (worker.py:61)", "barrier (x.py:9)"]
    scene.pulse("a", (11, barrier, 11.0))
    scene.pulse("b", (12, WAIT, 12.1))
    scene.pulse("a", (11, barrier, 13.0))
    # THEN that dump is a check, not a capture, and the same shape is not dumped again
    assert scene.dumps == 2 and scene.said("checked (the hang changed shape): not hung")
    scene.pulse("b", (12, WAIT, 14.1))
    scene.pulse("a", (11, barrier, 15.0))
    assert scene.dumps == 2
    assert len(list(tmp_path.glob("hangscope-*-job-*.json"))) == 1
    # AND once every process of the hang left its wait, the hang is said recovered
    scene.pulse("b")
    scene.pulse("a")
    assert scene.said("recovered after")


def test_a_node_whose_job_ended_while_the_other_runs_is_captured_after_its_grace(
        tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.pulse("a")
    scene.pulse("b")
    scene.watch._handle(NodeEvent("b", "ended", {"how": "exited"}))
    assert not scene.watch._grace() and scene.dumps == 0  # the job may be ending everywhere
    scene.now += NODE_EXIT_GRACE_S
    assert scene.watch._grace()
    assert scene.said("HANG (the job ended on b while it runs on a)")
    assert not scene.watch._grace() and scene.dumps == 1  # once


def test_a_lost_node_is_one_line_and_the_others_are_still_watched(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.watch._handle(NodeEvent("b", "lost", {"error": "ssh failed: ssh: connect to host b "
                                                "port 22: Connection refused"}))
    [line] = scene.said("b: not watched")
    assert line == ("b: not watched: ssh failed: ssh: connect to host b port 22: Connection "
                    "refused. The watch goes on with a; check that `ssh` "
                    "reaches b by hand.")
    scene.pulse("a", (11, WAIT, 10.5))
    assert scene.dumps == 1


def test_a_node_lost_after_it_was_watched_stays_in_the_captures(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.pulse("a", (11, WAIT, 10.5))
    scene.pulse("b")
    assert scene.dumps == 1
    for node in ("a", "b"):  # both watchers stop (killed on their nodes)
        scene.watch._handle(NodeEvent(node, "lost", {"error": "its watcher stopped (ssh "
                                                     "failed: Killed)"}))
    assert "start the watch again to watch b again" in scene.said("b: not watched")[0]
    assert scene.watch._over()
    assert scene.watch._ended() == 8
    assert scene.lines[-1] == ("no node is left to watch (a,b not watched); 1 capture(s) in "
                               f"{tmp_path}")
