"""A real vLLM server on CPU at tensor parallel 2 (``--distributed-executor-backend mp``: the
EngineCore drives ``VLLM::Worker_TP0`` and ``VLLM::Worker_TP1``, which all-reduce over gloo).

GIVEN it idle THEN idle: the two workers each poll the zmq sockets they share, which reads as a
ring of waits, and is no deadlock. GIVEN worker TP1 stopped (SIGSTOP) while a client waits THEN
rank 1 is the suspect, stopped, with ``kill -CONT``; neither the client nor the API server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_support import Server, dumped, server_fixture, stopped_with_a_client

pytestmark = pytest.mark.vllm

PORT = 18766


server = server_fixture(PORT, tp=2)


def test_given_a_tp2_server_nobody_asks_then_idle_not_a_deadlock(server: Server,
                                                                 tmp_path: Path) -> None:
    data, text = dumped(server, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", (verdict, text)
    assert verdict["suspects"] == [], verdict
    assert "DEADLOCK" not in text, text


def test_given_worker_tp1_stopped_while_a_client_waits_then_it_is_the_suspect(
        server: Server, tmp_path: Path) -> None:
    stopped_with_a_client(server, "VLLM::Worker_TP1", tmp_path)
