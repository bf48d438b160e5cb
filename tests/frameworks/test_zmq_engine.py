"""A serving engine over real pyzmq, FastAPI and uvicorn, built the way SGLang is
(tests/targets/frameworks/zmq_engine.py): a front end with the tokenizer manager, schedulers
per TP rank, a detokenizer, joined by PUSH/PULL.

GIVEN the engine started and asked for nothing, THEN idle (its front end holds no request
connection, every other process waits for its next message), never stuck. GIVEN scheduler
TP1 stopped on its first request while a client outside the job waits for the answer, THEN
TP1 is the suspect, stopped, with ``kill -CONT``; the waiting client is never the suspect.
GIVEN a reply lost inside the engine (misrouted to another tokenizer worker, or dropped by
the detokenizer while an HTTP client waits) and every backend idle, THEN a reply that never
comes, the waiting front end the suspect (sglang#33858); its twins with no client (idle) and
with a computing backend (progressing) are no such thing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from support import TARGETS, Job, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_engine.py"
TAGS = ["api", "scheduler0", "scheduler1", "detokenizer"]


@contextmanager
def client(port: int, loop: bool = False,
           path: str = "generate") -> Iterator[subprocess.Popen[bytes]]:
    """A client on this host, outside the job (its own session), posting one request (or,
    ``loop``, one after another until killed: a load generator)."""
    ask = f"u.urlopen(u.Request('http://127.0.0.1:{port}/{path}', method='POST')).read()"
    code = "import urllib.request as u\n" + (f"while True: {ask}" if loop else ask)
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def dump_while_computing(job: Job, tag: str, loop: bool) -> tuple[str, int]:
    """The engine's JSON dump while a client outside the job waits on it (``loop``: asks
    again and again) and ``tag``'s process has computed for it; the client's PID."""
    port = int((job.workdir / "port").read_text())
    with client(port, loop=loop) as visitor:
        proc = psutil.Process(job.pids[tag])
        start = proc.cpu_times().user
        poll(lambda: proc.cpu_times().user > start + 0.2, f"{tag} to compute for a request")
        raw = dump_json(job.pids["api"])
        assert visitor.poll() is None  # the client still waits (or asks)
    return raw, visitor.pid


def test_given_an_engine_asked_for_nothing_then_idle_never_stuck(tmp_path: Path) -> None:
    with verdict_job("idle", tmp_path, TAGS, jobs=JOBS) as job:
        raw = dump_json(job.pids["api"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
    assert "with no connection open" in text, text
    assert data["progress"]["decision"] == "idle", data["progress"]
    assert "stuck" not in text.lower(), text


def test_given_a_scheduler_stopped_mid_request_then_it_is_the_suspect_not_the_client(
        tmp_path: Path) -> None:
    with verdict_job("stop_tp1", tmp_path, TAGS, jobs=JOBS) as job:
        port = int((job.workdir / "port").read_text())
        with client(port) as visitor:
            tp1 = psutil.Process(job.pids["scheduler1"])
            poll(lambda: tp1.status() == psutil.STATUS_STOPPED, "scheduler TP1 to stop")
            raw = dump_json(job.pids["api"])
            # The engine was never woken or killed by the dump: TP1 is still stopped.
            assert tp1.status() == psutil.STATUS_STOPPED
            assert visitor.poll() is None  # the client still waits
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["suspects"] == [job.pids["scheduler1"]], (verdict, text)
    assert "stopped" in verdict["summary"], verdict
    assert f"kill -CONT {job.pids['scheduler1']}" in text, text
    assert visitor.pid not in verdict["suspects"]


def test_given_every_process_of_the_engine_stopped_then_paused_not_a_missing_rank(
        tmp_path: Path) -> None:
    """GIVEN the idle engine suspended whole (SIGSTOP to every process, as ``scontrol
    suspend`` does) THEN paused, with the way to resume it; no suspect."""
    with verdict_job("idle", tmp_path, TAGS, jobs=JOBS) as job:
        api = psutil.Process(job.pids["api"])
        procs = [api, *api.children(recursive=True)]
        try:
            for proc in procs:
                proc.suspend()
            poll(lambda: all(p.status() == psutil.STATUS_STOPPED for p in procs),
                 "every process of the engine to stop")
            raw = dump_json(job.pids["api"])
        finally:
            for proc in procs:
                proc.resume()
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "paused", (verdict, text)
    assert verdict["suspects"] == [], verdict
    assert "kill -CONT" in verdict["summary"], verdict


def test_given_a_busy_engine_and_a_client_asking_in_a_loop_then_progressing_not_its_chain(
        tmp_path: Path) -> None:
    """GIVEN the engine answering a load generator outside the job (a visitor whose wait for
    each answer is a TCP chain into the front end) THEN progressing, the client no suspect
    (issue 34: a healthy busy server read "WAIT CHAIN, critical" through its client)."""
    with verdict_job("idle", tmp_path, TAGS, jobs=JOBS) as job:
        raw, visitor = dump_while_computing(job, "scheduler1", loop=True)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", (verdict, text)
    assert visitor not in verdict["suspects"] and "WAIT CHAIN" not in text, verdict


#: The misrouted engine's ready tags: worker 1's first reply came, worker 0 dropped its second.
MISROUTED = ["scheduler0", "scheduler1", "detokenizer", "tokenizer0", "tokenizer1", "answered",
             "dropped"]


def test_given_a_reply_routed_to_the_wrong_tokenizer_worker_then_the_waiting_one_is_suspect(
        tmp_path: Path) -> None:
    """GIVEN two tokenizer workers, worker 1 inside a synchronous ``generate`` whose abort the
    detokenizer routed to worker 0, which logged it as unknown and dropped it (sglang#33858),
    THEN a reply that never comes: worker 1 the suspect, the schedulers and the detokenizer
    named as waiting for work (never blocked), the dropped-message line quoted."""
    with verdict_job("misroute", tmp_path, MISROUTED, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["summary"].startswith("A reply that never comes"), verdict["summary"]
    assert verdict["suspects"] == [job.pids["tokenizer1"]], (verdict, text)
    assert "unknown rid tw1-1, dropping" in verdict["summary"], verdict["summary"]
    scheduler = job.pids["scheduler0"]
    assert f"rank 0 (PID {scheduler}) and the detokenizer" in verdict["summary"], verdict
    assert "wait for new work, not blocked" in verdict["summary"], verdict["summary"]
    assert scheduler not in verdict["suspects"] and job.pids["tokenizer0"] not in \
        verdict["suspects"], verdict


def _reply_never_comes(mode: str, path: str, tag: str,
                       tmp_path: Path) -> tuple[dict, Job, int]:  # type: ignore[type-arg]
    """The dump of ``mode`` once a client outside the job posted to ``path`` and the engine
    wrote ``tag``; asserts a reply that never comes, the front end the suspect (never the
    client). The dump, the job and the client's PID."""
    with verdict_job(mode, tmp_path, TAGS, jobs=JOBS) as job:
        port = int((job.workdir / "port").read_text())
        with client(port, path=path) as visitor:
            job.wait_for([tag], 30)
            raw = dump_json(job.pids["api"])
            assert visitor.poll() is None  # the client still waits
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["summary"].startswith("A reply that never comes"), (verdict, text)
    assert verdict["suspects"] == [job.pids["api"]], (verdict, text)
    return data, job, visitor.pid


def test_given_the_http_front_ends_reply_dropped_while_a_client_waits_then_it_is_suspect(
        tmp_path: Path) -> None:
    """GIVEN the HTTP front end's handler awaiting a future the detokenizer never fills (it
    dropped the output, with a log line) while a client outside the job waits for the answer,
    THEN a reply that never comes: the front end the suspect, the client named as waiting on
    it (never the suspect), the line quoted; not idle, though every process of the engine
    waits for a message."""
    data, job, visitor = _reply_never_comes("drop_reply", "generate", "dropped", tmp_path)
    verdict = data["verdict"]
    assert f"the request of PID {visitor}" in verdict["summary"], verdict["summary"]
    assert "no decode state for rid 0, dropping" in verdict["summary"], verdict["summary"]
    assert f"rank 0 (PID {job.pids['scheduler0']})" in verdict["summary"], verdict["summary"]
    assert data["progress"]["decision"] != "idle", data["progress"]


@pytest.mark.parametrize("mode", ["no_receiver", "no_receiver_polled"])
def test_given_a_reply_no_task_receives_then_the_front_end_is_suspect_and_the_reason_said(
        mode: str, tmp_path: Path) -> None:
    """GIVEN the front end's first request a ``/server_info`` whose handler never creates the
    receive loop (sglang#19475), its reply sent back and unread, THEN a reply that never
    comes, the front end the suspect, and why: no task of its loop receives from its zmq
    sockets (blind round 19's 06 said "lost or routed to another process"; with a scheduler
    idling in a timed poll, blind round 40's 08 read a deadlock of zmq receives)."""
    data, _, _ = _reply_never_comes(mode, "server_info", "replied", tmp_path)
    assert "no task of its event loop receives from its zmq sockets" in \
        data["verdict"]["summary"], data["verdict"]["summary"]


def test_given_the_dropping_engine_asked_for_nothing_then_idle(tmp_path: Path) -> None:
    """The twin with no client: the same engine, its front end holding no request: idle."""
    with verdict_job("drop_reply", tmp_path, TAGS, jobs=JOBS) as job:
        raw = dump_json(job.pids["api"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
    assert "reply that never comes" not in text, text


def test_given_a_client_waiting_on_a_computing_scheduler_then_progressing_not_a_lost_reply(
        tmp_path: Path) -> None:
    """The twin whose backend works on the request (scheduler TP0 computing for minutes)
    while the client waits: progressing, no lost reply, no suspect among the waiters."""
    with verdict_job("slow", tmp_path, TAGS, jobs=JOBS) as job:
        raw, visitor = dump_while_computing(job, "scheduler0", loop=False)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", (verdict, text)
    assert "reply that never comes" not in text, text
    assert visitor not in verdict["suspects"] and job.pids["api"] not in \
        verdict["suspects"], verdict
