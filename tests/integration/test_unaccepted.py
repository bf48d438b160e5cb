"""Connections that no thread of their server accepts (tests/targets/unaccepted_jobs.py).

GIVEN a selectors server that unregistered its listener to pause accepting and never resumed,
and a client (in a session of its own, as ``curl`` is) whose connections wait in the accept
queue, THEN the verdict names the connections nobody accepts, with the count and the fds the
loop watches instead, and the server as the suspect, never idle (and so it does for the server
alone: no client in the job). GIVEN the same server that accepts every idle keep-alive client,
THEN idle: no connection waits.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target

JOBS = TARGETS / "unaccepted_jobs.py"


@contextmanager
def _server_and_client(mode: str, tmp_path: Path,
                       client: str = "client") -> Iterator[tuple[int, int]]:
    workdir = tmp_path / mode
    with running_target([sys.executable, str(JOBS), mode, str(workdir / "ready"),
                         str(workdir)], workdir, tags=["server"]) as server, \
            running_target([sys.executable, str(JOBS), client,
                            str(workdir / "client-ready"), str(workdir)], workdir,
                           tags=["client"], ready_file=workdir / "client-ready") as client:
        yield server.pids["server"], client.pids["client"]


def test_given_a_server_that_stopped_watching_its_listener_then_connections_nobody_accepts(
        tmp_path: Path) -> None:
    with _server_and_client("paused", tmp_path) as (server, _):
        data = json.loads(dump_json(server, "--samples", "2", "--window", "1"))
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["kind"] == "wait_chain", summary  # from the client, or the server alone
    assert "2 connections wait in the accept queue" in summary, summary
    assert verdict["suspects"] == [server], verdict
    listener = next(s for p in data["processes"] if p["pid"] == server
                    for s in p["listening"])
    assert listener["pending"] == 2, listener


@pytest.mark.extended
def test_given_only_the_server_whose_clients_are_elsewhere_then_connections_nobody_accepts(
        tmp_path: Path) -> None:
    with _server_and_client("paused", tmp_path, "keepalive") as (server, _):
        data = json.loads(dump_json(server, "--samples", "2", "--window", "1"))
    summary = data["verdict"]["summary"]
    assert summary.startswith("Connections nobody accepts: PID"), summary
    assert "pausing accept" in summary, summary  # its own log line
    assert data["verdict"]["suspects"] == [server], data["verdict"]


@pytest.mark.extended
def test_given_a_server_that_accepts_every_client_then_idle(tmp_path: Path) -> None:
    with _server_and_client("watching", tmp_path, "keepalive") as (server, _):
        data = json.loads(dump_json(server, "--samples", "2", "--window", "1"))
    assert data["verdict"]["kind"] == "idle", data["verdict"]
