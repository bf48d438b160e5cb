"""A real vLLM server for the vllm tier: start one (TP 1 or 2) from a fixture that always
kills its whole tree, clients outside the job, the cue the test's logits processor waits for,
and a dump of it (tests/frameworks/test_vllm*.py)."""

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

HERE = TARGETS / "frameworks"


@dataclass
class Server:
    api: int
    port: int
    cue: Path  # the FIFO the logits processor reads when a request asks it to
    workdir: Path

    def one(self, title: str) -> int:
        """The PID of the server's process titled ``title`` (VLLM::EngineCore...)."""
        # setproctitle writes the title over the command line (the comm is cut at 15 bytes:
        # VLLM::Worker_TP0 and _TP1 share it)
        found = [p.pid for p in psutil.Process(self.api).children(recursive=True)
                 if " ".join(p.cmdline()).split(" ", 1)[0] == title]
        assert len(found) == 1, (title, found)
        return found[0]


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def server_fixture(port: int, tp: int = 1):  # type: ignore[no-untyped-def]
    """A module's ``server`` fixture: one vLLM server for all its cases (a start costs a
    minute), on ``port`` at tensor parallel ``tp``."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
        with vllm_server(tmp_path_factory.mktemp(f"vllm_tp{tp}"), port, tp) as srv:
            yield srv

    return server


@contextmanager
def vllm_server(root: Path, port: int, tp: int = 1) -> Iterator[Server]:
    """A vLLM server on CPU with the tiny model built here, ready once /health answers; its
    whole tree killed after, even on failure."""
    pytest.importorskip("vllm", reason="the vllm tier needs the 'vllm' extra")
    model = root / "model"
    subprocess.run([sys.executable, str(HERE / "vllm_model.py"), str(model)], check=True,
                   timeout=300)
    cue = root / "cue.fifo"
    os.mkfifo(cue)
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "HS_CUE_FIFO": str(cue), "PYTHONPATH": str(HERE),
           # the RL endpoints (/pause, /resume) an RL loop drives the server with
           "VLLM_SERVER_DEV_MODE": "1"}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "4",
            "--enforce-eager", "--host", "127.0.0.1", "--port", str(port),
            "--logits-processors", "vllm_user_code:WaitForCue"]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp), "--distributed-executor-backend", "mp"]
    with running_target(argv, root / "server", env=env, timeout=600,
                        ready=lambda t: healthy(port)) as target:
        yield Server(target.popen.pid, port, cue, root)


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


def calls_back(srv: Server) -> bool:
    """The logits processor's call back waits (it made its file beside the cue FIFO)."""
    return srv.cue.with_name("call_back.started").exists()


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


def stopped_with_a_client(srv: Server, title: str, tmp_path: Path) -> str:
    """Stop the server's process ``title`` (SIGSTOP) while one client waits for an answer,
    dump, resume it; assert it is the suspect, stopped, with ``kill -CONT``, and neither the
    client nor the API server is; the server answers again after. The verdict's summary."""
    proc = psutil.Process(srv.one(title))
    with clients(srv, "loop", 1, tmp_path) as pids:
        proc.suspend()
        try:
            poll(lambda: proc.status() == psutil.STATUS_STOPPED, f"{title} to stop")
            data, text = dumped(srv, tmp_path)
            assert proc.status() == psutil.STATUS_STOPPED  # the dump left it as it was
        finally:
            proc.resume()
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["suspects"] == [proc.pid], (verdict, text)
    assert "stopped" in verdict["summary"] and f"kill -CONT {proc.pid}" in text, (verdict, text)
    assert pids[0] not in verdict["suspects"] and srv.api not in verdict["suspects"]
    poll(lambda: healthy(srv.port), "the server to answer again", timeout=60)
    return str(verdict["summary"])
