"""Serving and queue-worker jobs with nothing to do are idle, and their twins with a lost
request stay hung (tests/targets/service_idle_jobs.py, on a real redis-server and real zmq).

GIVEN a worker that polls a real redis-server with ``BRPOP queue 1`` while its forked pool
children wait on their task pipes, THEN the job is idle (the poll is a long poll of an empty
queue, the native server idles in its event loop) and no word says "stuck"; GIVEN the same
worker waiting for the reply to a command it sent in part, THEN a wait chain ends at
redis-server, idle in its loop with no request to answer. GIVEN an engine whose main loop waits
on its input queue while its input thread waits in a zmq receive from its idle API server,
THEN idle, through the zmq connection; GIVEN the engine's input thread waiting for a reply the
server dropped, THEN a wait chain from the main loop through its input thread to the server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

JOBS = TARGETS / "service_idle_jobs.py"

def _dump(mode: str, tmp_path: Path, tags: list[str], target: str) -> tuple[dict, str, str]:
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        raw = dump_json(job.pids[target], "--window", "2.5")
    return json.loads(raw), raw, show_text(raw, tmp_path)


def test_given_a_worker_polling_an_empty_redis_queue_then_idle_never_stuck(
        tmp_path: Path) -> None:
    data, raw, text = _dump("broker_poll", tmp_path,
                            ["broker", "consumer", "worker1", "worker2"], "consumer")
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
    assert "long poll of an empty queue" in text, text
    assert "waits for requests on port" in text, text  # redis-server, by the kernel
    assert "stuck" not in raw.lower() and "stuck" not in text.lower(), text


@pytest.mark.extended
def test_given_a_worker_waiting_for_a_reply_to_a_half_sent_command_then_a_chain_to_redis(
        tmp_path: Path) -> None:
    data, _, text = _dump("broker_lost", tmp_path,
                          ["broker", "consumer", "worker1", "worker2"], "consumer")
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert "waits for a reply on TCP" in verdict["summary"], verdict
    assert "redis-server" in verdict["summary"] and "no request to answer" in \
        verdict["summary"], verdict


def test_given_an_engine_asleep_on_its_zmq_input_then_idle_through_the_connection(
        tmp_path: Path) -> None:
    data, raw, text = _dump("engine_sleep", tmp_path, ["api", "engine", "engine-input"],
                            "api")
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
    assert "read by its thread input_socket" in text, text
    assert "stuck" not in raw.lower() and "stuck" not in text.lower(), text


@pytest.mark.extended
def test_given_an_engine_waiting_for_a_dropped_zmq_reply_then_a_chain_through_its_input_thread(
        tmp_path: Path) -> None:
    data, _, text = _dump("engine_lost", tmp_path, ["api", "engine", "engine-input"], "api")
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    summary = verdict["summary"]
    assert "thread input_socket" in summary and "waits for a message on TCP" in summary, summary
    engine = next(p["pid"] for p in data["processes"] if p["ppid"] == data["job"]["target"])
    assert verdict["suspects"] == [data["job"]["target"]] != [engine], verdict  # the server
