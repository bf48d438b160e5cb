"""Hangs over pyzmq and their twins (tests/targets/frameworks/zmq_shapes.py).

GIVEN a REQ waiting for the reply of a REP that was killed while it handled the request, and
reaped, while the other REP, which answered, waits for its next request THEN a wait chain at
the trainer's line, saying no live peer owes it the message (no deadlock with the live
worker); GIVEN both workers answering THEN progressing. GIVEN a child in ``ctx.term()`` held
by messages queued for a collector that has gone THEN the child is the suspect, blocked in
term, with LINGER as the fix; GIVEN the same with LINGER=0 THEN not hung. GIVEN a front end
awaiting the answer of a worker child that aborted (SIGABRT) and was never reaped, while a
client waits THEN the dead child is the suspect; GIVEN the worker answering THEN idle.
GIVEN a coordinator written straight through (no loop) that published its "go" before its
evaluator child (a command loop) subscribed and waits for the score THEN a deadlock between
the two, the slow joiner named (a bound PULL is no server waiting for requests); GIVEN a
PUB/SUB forwarder
(``zmq.proxy``) whose publishers have left THEN idle, not a cycle with its subscribers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, poll, show_text, verdict_job, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_shapes.py"


def _dump(mode: str, tags: list[str], tmp_path: Path,
          settled: bool = False) -> tuple[dict, str, dict[str, int]]:
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        if settled:  # its ready line comes just before its final sleep: wait for the sleep
            wait_off_cpu(job.pids[tags[0]], 1.0)
        raw = dump_json(job.pids[tags[0]])
    return json.loads(raw), show_text(raw, tmp_path), dict(job.pids)


def test_given_a_req_whose_rep_died_with_the_request_then_no_live_peer_owes_it(
        tmp_path: Path) -> None:
    data, text, pids = _dump("dead_rep", ["trainer", "worker1"], tmp_path, settled=True)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["trainer"]], verdict
    assert "no live process of the job owes it" in verdict["summary"], verdict
    assert "exited rc=-9" in verdict["summary"], verdict
    assert "DEADLOCK" not in text, text


def test_given_both_reps_answering_then_progressing(tmp_path: Path) -> None:
    data, text, _ = _dump("rep_ok", ["trainer", "worker0", "worker1"], tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)


def test_given_term_held_by_messages_for_a_gone_peer_then_the_sender_is_the_suspect(
        tmp_path: Path) -> None:
    data, text, pids = _dump("term_linger", ["parent", "sender"], tmp_path)
    verdict = data["verdict"]
    assert verdict["suspects"] == [pids["sender"]], (verdict, text)
    assert "Context.term()" in verdict["summary"] and "LINGER" in verdict["summary"], verdict


def test_given_term_with_linger_0_then_not_hung(tmp_path: Path) -> None:
    data, text, _ = _dump("term_linger0", ["parent"], tmp_path, settled=True)
    assert data["verdict"]["kind"] in ("paused", "idle"), (data["verdict"], text)


def _ask(port: int) -> subprocess.Popen[bytes]:
    """A client of the front end outside the job (its own session): sends one request and
    waits for the answer."""
    code = (f"import socket; s = socket.create_connection(('127.0.0.1', {port})); "
            "s.sendall(b'hello\\n'); print(s.recv(100).decode(), flush=True)")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def test_given_a_front_end_awaiting_a_worker_that_aborted_then_the_dead_worker_is_the_suspect(
        tmp_path: Path) -> None:
    with verdict_job("aborted", tmp_path, ["front"], jobs=JOBS) as job:
        front = job.pids["front"]
        client = _ask(int((job.workdir / "port").read_text()))
        try:
            import psutil

            kids = psutil.Process(front).children()
            poll(lambda: any(k.status() == psutil.STATUS_ZOMBIE for k in kids),
                 "the worker to abort")
            dead = next(k.pid for k in kids if k.status() == psutil.STATUS_ZOMBIE)
            raw = dump_json(front)
        finally:
            client.kill()
            client.wait(timeout=10)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["suspects"] == [dead], (verdict, text)
    assert "killed by SIGABRT" in verdict["summary"], verdict


def test_given_a_front_end_whose_worker_answered_then_idle(tmp_path: Path) -> None:
    with verdict_job("served", tmp_path, ["front"], jobs=JOBS) as job:
        client = _ask(int((job.workdir / "port").read_text()))
        out, _ = client.communicate(timeout=30)
        assert out.startswith(b"answer to hello"), out
        raw = dump_json(job.pids["front"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)


def test_given_a_tp_worker_that_subscribed_after_the_publish_then_it_is_behind(
        tmp_path: Path) -> None:
    data, text, pids = _dump("slow_joiner", ["scheduler", "tp0", "tp1"], tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["tp1"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"Behind its siblings: PID {pids['tp1']} "), summary
    assert f"PID {pids['tp0']} (python), started by the same parent" in summary, summary
    assert "slow joiner" in summary and "DEADLOCK" not in text, summary


def test_given_a_handshake_with_every_tp_worker_then_progressing(tmp_path: Path) -> None:
    data, text, _ = _dump("joined", ["scheduler", "tp0", "tp1"], tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)


def test_given_a_go_published_before_the_evaluator_joined_then_a_deadlock_of_the_two(
        tmp_path: Path) -> None:
    """Blind round 17's 04 missed it (read "unknown": the coordinator's bound PULL was taken
    for a server waiting for its next request, and the worker's loop waits for commands);
    here an evaluation coordinator and its evaluator."""
    data, text, pids = _dump("go_lost", ["coordinator", "evaluator"], tmp_path,
                             settled=True)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert set(verdict["suspects"]) <= {pids["coordinator"], pids["evaluator"]}, verdict
    assert "slow joiner" in verdict["summary"], verdict["summary"]


def test_given_a_forwarder_whose_publishers_left_then_idle(tmp_path: Path) -> None:
    """Blind round 17's 08 (a ROUTER/DEALER broker) read "unknown" and, with the rule above
    alone, a deadlock: a bound endpoint nobody is connected to waits for its next client."""
    data, text, _ = _dump("forwarder", ["forwarder", "subscriber0", "subscriber1"], tmp_path,
                          settled=True)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)


def test_given_a_bound_push_whose_worker_never_connected_then_its_send_waits_for_no_peer(
        tmp_path: Path) -> None:
    """A send is no receive: the dispatcher blocked in ``send_json`` on a bound PUSH whose
    worker failed before connecting waits for a peer that is not there (libzmq#179)."""
    data, text, pids = _dump("push_unjoined", ["dispatcher"], tmp_path, settled=True)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["dispatcher"]], verdict
    assert "zmq send" in verdict["summary"] and "nothing is connected" in verdict["summary"], \
        verdict["summary"]


def test_given_a_push_waiting_for_room_while_its_worker_takes_each_item_then_progressing(
        tmp_path: Path) -> None:
    data, text, _ = _dump("push_joined", ["dispatcher", "worker"], tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)


def test_given_a_req_whose_only_rep_died_with_the_request_then_the_dead_server_is_the_suspect(
        tmp_path: Path) -> None:
    """Blind round 20's 02 read "unknown": the client's REQ had no peer left at all (no
    connection its I/O thread holds), and the server it started had exited with code 3."""
    data, text, pids = _dump("sole_rep_died", ["client", "server"], tmp_path, settled=True)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["server"]], verdict
    assert "no peer is left" in verdict["summary"], verdict["summary"]
    assert "exited with code 3" in verdict["summary"], verdict["summary"]


def test_given_a_rep_waiting_for_its_first_client_beside_a_zombie_that_ended_well_then_idle(
        tmp_path: Path) -> None:
    data, text, _ = _dump("rep_first_client", ["server"], tmp_path, settled=True)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)


def test_given_an_engine_waiting_on_a_worker_that_died_then_the_dead_worker_is_the_suspect(
        tmp_path: Path) -> None:
    """Blind round 21's 03 read a chain to the idle front end: the engine's receive still had
    peers (worker 0, waiting for its next step), none of which could send it anything; its
    child worker 1 had exited with code 1, unreaped."""
    data, text, pids = _dump("router_worker_died", ["engine", "worker0"], tmp_path,
                             settled=True)
    verdict = data["verdict"]
    dead = next(p["pid"] for p in data["processes"] if p["state"] == "Z")
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [dead], verdict
    assert verdict["summary"].startswith("A peer died"), verdict["summary"]
    assert "exited with code 1" in verdict["summary"], verdict["summary"]
    assert pids["worker0"] not in verdict["suspects"]


def test_given_an_engine_waiting_on_a_worker_that_computes_then_progressing(
        tmp_path: Path) -> None:
    data, text, _ = _dump("router_worker_slow", ["engine", "worker0", "worker1"], tmp_path,
                          settled=True)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
