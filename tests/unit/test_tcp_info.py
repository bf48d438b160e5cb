"""The kernel's per-connection facts of a TCP socket: both ends, the bytes unread in its
receive queue, and how long ago data last left and came (sock_diag's INET_DIAG_INFO, the
``tcp_info`` that ``ss -tni`` prints as lastsnd/lastrcv), read of real sockets here; and what
they decide: the end that read a request last owes the reply (analyze/graph/owedreply.py),
and a loop whose connection moved data in the window progresses (its callbacks too short
for any sample)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import PROGRESSING, decide
from hangscope.analyze.evidence.progress_hints import Hints
from hangscope.analyze.graph.owedreply import spoke_last
from hangscope.analyze.patterns.calm.engines import open_requests
from hangscope.collect.procfs import read_tcp_connections
from hangscope.model import VerdictKind
from hangscope.model.progress import (
    CounterDelta,
    IoDelta,
    ProcessProgress,
    StackCount,
    ThreadProgress,
)
from hangscope.model.serialize import from_dict, load
from hangscope.model.waits import KernelWaits, TcpConnection


def _inode(sock: socket.socket) -> int:
    return os.fstat(sock.fileno()).st_ino


def test_whospoke_last_and_what_is_unread_come_from_the_kernel() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            client.sendall(b"x" * 100)  # the request
            deadline = time.monotonic() + 5
            while not accepted.recv(50, socket.MSG_PEEK) and time.monotonic() < deadline:
                pass
            accepted.recv(50)  # half of it read
            time.sleep(0.3)  # the two moments apart by more than a tick
            accepted.sendall(b"y" * 10)  # an answer the client has not read
            time.sleep(0.1)
            conns = {c.inode: c for c in read_tcp_connections(
                frozenset({_inode(client), _inode(accepted)}))}
            mine, theirs = conns[_inode(client)], conns[_inode(accepted)]
    assert mine.local == theirs.remote and mine.remote == theirs.local
    assert (mine.unread, theirs.unread) == (10, 50)
    assert mine.last_sent_ms is not None and mine.last_recv_ms is not None
    assert theirs.last_sent_ms is not None and theirs.last_recv_ms is not None
    # the client spoke first and heard last; the server heard first and spoke last
    assert mine.last_recv_ms < mine.last_sent_ms
    assert theirs.last_sent_ms < theirs.last_recv_ms
    assert mine.last_sent_ms - mine.last_recv_ms >= 200


def _conn(inode: int, local: str, remote: str, sent: int, heard: int,
          unread: int = 0) -> TcpConnection:
    return TcpConnection(inode, local, remote, 1, unread, sent, heard)


def test_the_end_that_read_a_request_last_owes_the_reply() -> None:
    client = _conn(1, "127.0.0.1:47620", "127.0.0.1:40573", sent=4036, heard=4240)
    api = _conn(2, "127.0.0.1:40573", "127.0.0.1:47620", sent=4240, heard=4036)
    assert spoke_last(client, api)
    assert not spoke_last(api, client)  # the API did not speak last
    # the same jiffy: which came first is not known (a health check answered and the next
    # request sent within one tick), nor is a request still unread
    same = _conn(1, "a:1", "b:2", sent=5276, heard=5276)
    assert not spoke_last(same, _conn(2, "b:2", "a:1", sent=5276, heard=5276))
    assert not spoke_last(client, _conn(2, api.local, api.remote, 4240, 4036, unread=9))


def test_a_worker_waiting_for_a_reply_the_api_owes_leads_to_the_api() -> None:
    """A real dump (tests/targets/frameworks/ingest_jobs.py ``drained``): both loops idle."""
    snap = analyze(load(Path(__file__).parent.parent / "fixtures" / "frameworks"
                        / "ingest_drained_body.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    api = next(p.pid for p in snap.processes if "api" in p.cmdline)
    assert verdict.suspects == (api,), verdict
    assert "which read the whole request and has sent nothing since" in verdict.summary


def _loop(wakes: int) -> ProcessProgress:
    counters = CounterDelta(cpu_ns=3_000_000, runs=wakes, voluntary=wakes, involuntary=0)
    stack = StackCount(("BaseEventLoop._run_once (asyncio/base_events.py:1884)",
                        "EpollSelector.select (selectors.py:468)"), 180)
    thread = ThreadProgress(10, "MainThread", 180, (stack,), counters, IoDelta(0, 0, 0, 0))
    return ProcessProgress(10, (thread,), IoDelta(0, 0, 0, 0), sampled=True)


def test_a_loop_whose_connection_moved_data_in_the_window_progresses() -> None:
    """A dashboard reading a server-sent event every 0.5 s: its loop's callbacks take well
    under a millisecond, so no sample catches them; the kernel saw the data come."""
    recent = Hints(tcp_moved={10: ("TCP 127.0.0.1:1 -> 127.0.0.1:2", 310, 9_000)})
    assert decide(_loop(4), 2.0, hints=recent).evidence == "tcp"
    stale = Hints(tcp_moved={10: ("TCP 127.0.0.1:1 -> 127.0.0.1:2", 5_000, 9_000)})
    assert decide(_loop(4), 2.0, hints=stale).decision != PROGRESSING  # before the window
    assert decide(_loop(0), 2.0, hints=recent).decision != PROGRESSING  # it never woke
    # a poll of an empty queue: its request and the answer, both in the window: its ticks
    polls = Hints(tcp_moved={10: ("TCP 127.0.0.1:1 -> 127.0.0.1:2", 310, 320)})
    assert decide(_loop(4), 2.0, hints=polls).decision != PROGRESSING


def test_a_rolled_server_streaming_to_its_dashboard_is_progressing() -> None:
    """A real dump (tests/targets/frameworks/uvicorn_drain.py ``deadline``): it read
    "unknown" (every loop 'polling without progress')."""
    snap = analyze(load(Path(__file__).parent.parent / "fixtures" / "frameworks"
                        / "uvicorn_rolled_stream.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING, (
        snap.verdict)
    assert "their TCP connections move data" in snap.verdict.summary, snap.verdict.summary


def test_a_connection_whose_server_answered_last_holds_no_request() -> None:
    """A front end's open connections count as requests in flight unless the kernel says the
    server end answered last and the client took the whole answer (a WebSocket after its
    upgrade, a keep-alive client between calls)."""
    server = _conn(1, "127.0.0.1:8000", "127.0.0.1:50000", sent=3472, heard=3476)
    client = _conn(2, "127.0.0.1:50000", "127.0.0.1:8000", sent=3476, heard=3472)
    assert open_requests(KernelWaits("x86_64", tcp=(server, client)), {8000}) == 0
    unread = _conn(2, client.local, client.remote, 3476, 3472, unread=65536)  # a body not read
    assert open_requests(KernelWaits("x86_64", tcp=(server, unread)), {8000}) == 1
    asked = _conn(1, server.local, server.remote, sent=3476, heard=3472)  # the request last
    assert open_requests(KernelWaits("x86_64", tcp=(asked, client)), {8000}) == 1
    tick = _conn(1, server.local, server.remote, sent=3480, heard=3480)  # one tick: unordered
    assert open_requests(KernelWaits("x86_64", tcp=(tick, client)), {8000}) == 1
    assert open_requests(KernelWaits("x86_64", tcp=(server,)), {8000}) == 1  # client unseen


def test_an_engine_that_said_ready_last_over_zmq_is_owed_nothing() -> None:
    """A real dump (tests/targets/service_idle_jobs.py ``engine_sleep``): an engine put to
    sleep said READY over a zmq DEALER and its API server's loop idles. On a loaded CI machine
    the READY left a tick after the handshake's last message came: the engine's zmq I/O
    thread, in epoll_wait on that connection, then "spoke last" and the API server "owed" it a
    reply, a cycle with the engine's input thread: called a deadlock. A zmq connection carries
    messages, not requests: it is idle either way."""
    raw = json.loads((Path(__file__).parent.parent / "fixtures" / "frameworks"
                      / "zmq_engine_asleep.dump.json").read_text())
    assert analyze(from_dict(raw)).verdict.kind is VerdictKind.IDLE  # the ticks equal
    engine = next(p["pid"] for p in raw["processes"] if not p.get("listening"))
    tcp = raw["waits"]["kernel"]["tcp"]
    held = {f["inode"] for k in raw["waits"]["kernel"]["processes"] if k["pid"] == engine
            for f in k["fds"]}
    mine = next(c for c in tcp if c["inode"] in held)
    theirs = next(c for c in tcp if c is not mine)
    mine["last_sent_ms"] -= 4  # the READY a tick after the last it heard,
    theirs["last_recv_ms"] -= 4  # and it came to the API server's end then
    snap = analyze(from_dict(raw))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.IDLE, snap.verdict
