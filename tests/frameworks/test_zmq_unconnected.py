"""pyzmq sockets connected to nothing (tests/targets/frameworks/zmq_unconnected.py; blind round
34's 02 and 05).

GIVEN two replicas whose front ends bind the same ``ipc://`` paths THEN the first one, its send
waiting with no peer, is "a zmq socket connected to nothing", the path's new owner named (it
read "behind its siblings", a slow joiner). GIVEN REQ front ends whose ROUTER answers without
the empty delimiter frame THEN the same, the scheduler's unconnected port named (it read
unknown). Their twins (unique paths; replies enveloped) are not that.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_unconnected.py"
HEAD = "A zmq socket connected to nothing: "


def _verdict(mode: str, tags: list[str], tmp_path: Path) -> tuple[dict, str, dict[str, int]]:  # type: ignore[type-arg]
    try:
        with verdict_job(mode, tmp_path, tags, timeout=60, jobs=JOBS) as job:
            raw = dump_json(job.launcher)
            pids = dict(job.pids)
    finally:  # the short directory of the ipc:// paths, outside the test's own
        run = tmp_path / f"job-{mode}" / "run_dir"
        if run.exists():
            shutil.rmtree(run.read_text(), ignore_errors=True)
    return json.loads(raw)["verdict"], show_text(raw, tmp_path), pids


def test_a_front_end_whose_ipc_paths_another_bound_again_has_no_peer(tmp_path: Path) -> None:
    verdict, text, pids = _verdict("ipc_twins", ["blue", "green"], tmp_path)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["blue"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"{HEAD}PID {pids['blue']} (python) waits in a zmq send at "
                              "front_end (zmq_unconnected.py:"), summary
    assert "/tinylm-in, and so did PID " in summary, summary
    assert f"PID {pids['green-bound']} (python), whose socket holds that path's connections" \
        in summary, summary
    assert "libzmq#2059" in summary, summary


def test_replicas_with_paths_of_their_own_are_not_that(tmp_path: Path) -> None:
    verdict, text, _ = _verdict("ipc_unique", ["blue", "green"], tmp_path)
    assert not verdict["summary"].startswith(HEAD), text
    # (no process of it listens on TCP: the calm rules find no front end to call idle)
    assert verdict["kind"] in ("idle", "unknown") and verdict["suspects"] == [], (verdict, text)


def test_req_front_ends_answered_without_the_delimiter_wait_connected_to_nothing(
        tmp_path: Path) -> None:
    verdict, text, pids = _verdict("req_bare", ["scheduler", "front0", "front1"], tmp_path)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert sorted(verdict["suspects"]) == sorted([pids["front0"], pids["front1"]]), verdict
    summary = verdict["summary"]
    assert summary.startswith(HEAD), summary
    assert "waits in a zmq receive at client (zmq_unconnected.py:" in summary, summary
    assert f"PID {pids['scheduler']} (python) listens on " in summary, summary
    assert "with nobody connected" in summary and "empty delimiter frame" in summary, summary


def test_req_front_ends_answered_with_the_delimiter_are_not_that(tmp_path: Path) -> None:
    verdict, text, _ = _verdict("req_enveloped", ["scheduler", "front0", "front1"], tmp_path)
    assert not verdict["summary"].startswith(HEAD), text
    assert verdict["kind"] == "progressing", (verdict, text)


NAMES = TARGETS / "frameworks" / "zmq_names.py"


def _named(mode: str, tmp_path: Path) -> tuple[dict, str, dict[str, int]]:  # type: ignore[type-arg]
    try:
        with verdict_job(mode, tmp_path, ["scheduler", "detokenizer", "tokenizer"], timeout=60,
                         jobs=NAMES) as job:
            raw = dump_json(job.launcher)
            pids = dict(job.pids)
    finally:
        run = tmp_path / f"job-{mode}" / "run_dir"
        if run.exists():
            shutil.rmtree(run.read_text(), ignore_errors=True)
    return json.loads(raw)["verdict"], show_text(raw, tmp_path), pids


def test_a_pipeline_whose_spawned_children_named_their_own_endpoints_is_connected_to_nothing(
        tmp_path: Path) -> None:
    """pyzmq#153 (blind round 37's 01, which read "idle": each process bound an endpoint
    nobody connected to, read as a front waiting for its first client)."""
    verdict, text, pids = _named("names_at_import", tmp_path)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["tokenizer"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"{HEAD}PID {pids['tokenizer']} (python) waits in a zmq receive "
                              "at generate (zmq_names.py:"), summary
    for child in ("scheduler", "detokenizer"):
        assert f"PID {pids[child]} (python) listens on " in summary, summary
    assert "no two processes of the job are connected" in summary, summary


def test_a_pipeline_given_its_endpoints_by_its_parent_is_not_that(tmp_path: Path) -> None:
    verdict, text, _ = _named("names_passed", tmp_path)
    assert not verdict["summary"].startswith(HEAD), text
    # (as ipc_unique: no process of it listens on TCP, no front end for the calm rules)
    assert verdict["kind"] in ("idle", "unknown") and verdict["suspects"] == [], (verdict, text)


def test_a_subscriber_and_a_publisher_that_both_connect_are_connected_to_nothing(
        tmp_path: Path) -> None:
    """vllm PR #33120 (blind round 43's 04, which read "All waiting: ... waits on a lock"): a
    router's SUB and an engine's PUB both connect to one TCP port and nobody binds it; zmq
    retries both connects every 100 ms, silently, and the router waits for its first batch
    for ever. Kernel facts say it: no socket of either process is connected, their zmq I/O
    threads keep waking while every Python thread sleeps."""
    verdict, text, pids = _verdict("sub_dials", ["router"], tmp_path)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["router"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"{HEAD}Thread kv-events of PID {pids['router']} (python) waits "
                              "in a zmq receive at subscriber.<locals>.events "
                              "(zmq_unconnected.py:"), summary
    assert "(its thread MainThread waits at subscriber (zmq_unconnected.py:" in summary, summary
    assert "zmq retries a connect that nobody accepts" in summary, summary
    assert "retries a connect too: both dial, and neither binds" in summary, summary


def test_a_subscriber_dialling_a_port_nobody_listens_on_names_it(tmp_path: Path) -> None:
    """The router alone: the endpoint its output names has no listener on this host."""
    verdict, text, pids = _verdict("sub_alone", ["router"], tmp_path)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["router"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"{HEAD}Thread kv-events of PID {pids['router']} "), summary
    assert re.search(r"Its command line or output names tcp://127\.0\.0\.1:(\d+), and nothing "
                     r"on this host listens on port \1: ", summary), summary


def test_a_subscriber_of_a_publisher_that_binds_is_not_that(tmp_path: Path) -> None:
    verdict, text, _ = _verdict("sub_served", ["router"], tmp_path)
    assert not verdict["summary"].startswith(HEAD), text
    assert verdict["kind"] == "progressing", (verdict, text)
