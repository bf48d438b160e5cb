"""The RAS client against real listening sockets: a protocol-correct server replaying the real
captured answers, and endpoints that refuse, stall, send garbage or never stop sending. Each
costs at most the deadline and leaves a note; only a listener of *this* job is ever asked."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import TARGETS, running_target

from hangscope.collect import procfs, ras
from hangscope.model import Process
from hangscope.model import nccl as ev

DEADLINE = 1.0
SLACK = 0.4  # scheduling on a loaded 2-core VM


class Server:
    def __init__(self, popen: subprocess.Popen, port: int, ready: Path) -> None:
        self.popen, self.port, self.ready = popen, port, ready

    @property
    def connections(self) -> int:
        log = Path(f"{self.ready}.conns")
        return len(log.read_text().splitlines()) if log.exists() else 0

    def process(self, **environ: str) -> Process:
        """The server as the sampler sees a job process: its listening sockets from /proc."""
        table = procfs.read_listening()
        inodes = procfs.read_fds(self.popen.pid)[4]
        return Process(pid=self.popen.pid, python=True,
                       listening=tuple(table[i] for i in sorted(inodes) if i in table),
                       environ={"NCCL_RAS_ADDR": f"127.0.0.1:{self.port}", **environ})


@pytest.fixture
def ras_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Factory: ``start(mode, case, netns)`` -> a Server listening on the port it wrote to its
    ready file; every server is killed at teardown (support.running_target)."""
    started = itertools.count()
    with contextlib.ExitStack() as stack:
        def start(mode: str, case: str = "behind", netns: bool = False) -> Server:
            workdir = tmp_path / f"server-{next(started)}"
            ready = workdir / "port"
            cmd = [sys.executable, str(TARGETS / "ras_server.py"), mode, str(ready), "--case",
                   case]
            if netns:
                cmd = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
                       *cmd]
            server = stack.enter_context(running_target(
                cmd, workdir, ready_file=ready, timeout=20,
                ready=lambda t: t.ready_file.exists() and t.ready_file.read_text()))
            return Server(server.popen, int(ready.read_text()), ready)

        yield start


def _timed(fn: Callable[[], ev.RasReading]) -> tuple[ev.RasReading, float]:
    start = time.monotonic()
    reading = fn()
    return reading, time.monotonic() - start


@pytest.mark.parametrize("case,fmt,counts", [
    ("behind", "json", {0: 2, 1: 1}), ("extra_op", "json-repaired", {1: 2})])
def test_replayed_json_end_to_end(ras_server, case: str, fmt: str, counts: dict) -> None:
    server = ras_server("json", case)
    reading = ras.read([server.process()], deadline_s=DEADLINE)
    assert reading.status == ev.READ, reading.note
    assert reading.report is not None and reading.report.format == fmt
    (comm,) = reading.report.communicators
    assert {r.rank: r.counts["AllReduce"] for r in comm.ranks} == counts
    assert f"127.0.0.1:{server.port}" in reading.note and "NCCL 2.28.9" in reading.note


def test_older_nccl_without_json_answers_text(ras_server) -> None:
    server = ras_server("text", "wrong_op")
    reading = ras.read([server.process()], deadline_s=DEADLINE)
    assert reading.status == ev.READ and reading.report.format == "text"
    (comm,) = reading.report.communicators
    assert [(m.rank, m.pid) for m in comm.missing] == [(1, 891)]
    assert server.connections == 1


def test_unreadable_json_falls_back_to_text(ras_server) -> None:
    server = ras_server("badjson", "behind")
    reading = ras.read([server.process()], deadline_s=DEADLINE)
    assert reading.status == ev.READ and reading.report.format == "text"
    assert server.connections == 2


@pytest.mark.quiet  # a time is the assertion
@pytest.mark.parametrize("mode,status", [
    ("stall", ev.TIMEOUT), ("noaccept", ev.TIMEOUT), ("slow", ev.TIMEOUT),
    ("garbage", ev.GARBAGE), ("huge", ev.GARBAGE)])
def test_misbehaving_endpoint_costs_at_most_the_deadline(ras_server, mode: str,
                                                         status: str) -> None:
    server = ras_server(mode)
    reading, took = _timed(lambda: ras.read([server.process()], deadline_s=DEADLINE))
    assert took < DEADLINE + SLACK, f"{mode} took {took:.2f} s"
    assert reading.status in (status, ev.TIMEOUT) if mode == "huge" else reading.status == status
    assert reading.note.startswith("NCCL RAS at 127.0.0.1:") and reading.report is None


@pytest.mark.quiet  # a time is the assertion
def test_refused_is_a_note() -> None:
    with socket.socket() as s:  # a port nobody listens on (bound, never listening)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        reading, took = _timed(lambda: ras.query("127.0.0.1", port, DEADLINE))
    assert reading.status == ev.REFUSED and "refused" in reading.note.lower()
    assert took < DEADLINE


def test_another_jobs_listener_is_never_read(ras_server, tmp_path: Path) -> None:
    server = ras_server("json")
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        job = [Process(pid=ours.pid, python=True,
                       environ={"NCCL_RAS_ADDR": f"127.0.0.1:{server.port}"})]
        ports = {s.port for s in procfs.read_listening().values() if s.port}
        reading = ras.read(job, host_ports=ports, deadline_s=DEADLINE)
    finally:
        ours.kill()
        ours.wait()
    assert reading.status == ev.NOT_THIS_JOB and "not read" in reading.note
    assert server.connections == 0


@pytest.mark.quiet  # a time is the assertion
def test_no_listener_means_no_connect_and_a_reason() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reading, took = _timed(lambda: ras.read([Process(pid=child.pid, python=True)]))
        off = ras.read([Process(pid=child.pid, environ={"NCCL_RAS_ENABLE": "0"})])
    finally:
        child.kill()
        child.wait()
    assert reading.status == ev.NO_NCCL and "gloo" in reading.note
    assert took < 0.1
    assert off.status == ev.DISABLED and "NCCL_RAS_ENABLE=0" in off.note


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
                    reason="making a network namespace needs root, unshare and ip")
def test_job_in_another_network_namespace_is_reached_inside_it(ras_server) -> None:
    server = ras_server("json", netns=True)
    proc = server.process()
    assert proc.listening == ()  # our namespace's socket table does not show it
    with pytest.raises(OSError):  # and our loopback does not reach it
        socket.create_connection(("127.0.0.1", server.port), timeout=0.5).close()
    reading = ras.read([proc], deadline_s=DEADLINE)
    assert reading.status == ev.READ, reading.note
    assert reading.report.communicators[0].hash == "0x44cd76c5ebeff4b7"
