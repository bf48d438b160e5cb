"""Two healthy jobs of the frameworks tier that CI once called hung, as ``hangscope dump PID
--format json`` saved them (tests/fixtures/frameworks/).

GIVEN a real DataLoader whose two workers read the records a slow decoder puts on one
``multiprocessing.Queue`` (tests/targets/frameworks/loader_sentinel.py ``slow_decoder``), the
trainer blocked reading the result pipe both workers write, one worker waiting for its next
index (the trainer writes it) and the other for the decoder's next record THEN progressing:
a read of a pipe that several processes write returns with any one's write, and one of them
waits on the decoder, which works (it read a deadlock of the trainer and the idle worker, or
a wait chain ending at the other worker's queue lock, as the window's three samples fell).

GIVEN a tensor-parallel FastAPI server under torchrun (tests/targets/frameworks/tp_server.py):
rank 0 serves HTTP, rank 1 waits in ``broadcast_object_list``, and rank 1's gloo transport
thread watches its connection to the listener gloo opened in rank 0 THEN idle: that
connection is no client's request to the server, whose loop's epoll watches only its HTTP
listener (it read "A reply that never comes: ... to the request of" rank 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"


@pytest.mark.parametrize("name", ["loader_slow_decoder_ring", "loader_slow_decoder_chain"])
def test_a_read_of_a_pipe_another_writer_feeds_from_work_is_no_hang(name: str) -> None:
    verdict = analyze(load(FIXTURES / f"{name}.dump.json")).verdict
    assert verdict.kind is VerdictKind.PROGRESSING, verdict


def test_a_collective_transports_connection_is_no_request_to_the_server() -> None:
    snap = analyze(load(FIXTURES / "tp_server_gloo_peer_connected.dump.json"))
    assert snap.verdict.kind is VerdictKind.IDLE, snap.verdict
    assert snap.wait_graph is not None
    assert not [p for p in snap.wait_graph.patterns if p.kind == "lost_reply"]
