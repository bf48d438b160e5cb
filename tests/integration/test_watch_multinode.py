"""``hangscope watch --nodes`` over real OpenSSH on a namespace cluster of 2 nodes running a
real torchrun gloo job across them (tests/integration/cluster/, watch_worker.py).

The watcher runs on node01 as a user runs it; node02 has no hangscope on PATH, so its watcher
is shipped. Readiness: the ranks append marks to a file the test polls with a deadline, and
the test waits for the watcher's own lines; every process the test starts is killed at the
end, also on failure (the cluster's teardown kills every node's processes at the latest).

Needs root (namespaces) and Debian's openssh-server (.ci/run installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from cluster import _TORCHRUN, RDZV_PORT, Cluster
from support import Said, SaysLines, cli_env, poll

# The namespace cluster is one mechanism: test_multinode_ssh keeps its quick case.
pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.extended, pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None
    or shutil.which("unshare") is None,
    reason="the namespace cluster needs root, unshare and openssh-server (.ci/run installs it)")]

WORKER = Path(__file__).resolve().parent / "cluster" / "watch_worker.py"
NODES = ("node01", "node02")
FAST = ("--after", "10", "--interval", "2", "--samples", "2", "--window", "1")


class WatchCluster(Cluster):
    """The namespace cluster with sshd only; each test starts its own job on it."""

    def node_job(self, name: str) -> str:
        return "sleep infinity &"  # the node's init waits on it: the node lives


@dataclass
class Job(SaysLines):
    """A torchrun job across the nodes, and the watcher of it (its lines, with when)."""

    cluster: WatchCluster
    run_id: str
    ready: Path
    agents: dict[str, int] = field(default_factory=dict)
    watcher: subprocess.Popen[str] | None = None
    output: Said | None = None

    def marks(self, what: str) -> list[tuple[int, str, int, float]]:
        path = self.ready / "marks"
        text = path.read_text() if path.exists() else ""
        return [(int(r), h, int(p), float(t)) for r, h, p, w, t in
                (ln.split() for ln in text.splitlines() if len(ln.split()) == 5) if w == what]

    def wait_marks(self, what: str, timeout: float = 120) -> float:
        def reached() -> float | None:
            found = self.marks(what)
            return max(t for *_, t in found) if len(found) == len(NODES) else None
        try:
            return poll(reached, f"every rank to mark {what!r}", timeout=timeout)
        except AssertionError as exc:
            logs = "\n".join(self.cluster.log(n) for n in NODES)
            raise AssertionError(f"{exc}\n{logs}\n--- watch ---\n{self.text()}") from None

    def watch(self, *argv: str) -> None:
        env = cli_env({"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": "/root"})
        self.watcher = subprocess.Popen(
            [*self.cluster.nsenter("node01"), sys.executable, "-m", "hangscope", "watch",
             "--find", f"env:TORCHELASTIC_RUN_ID={self.run_id}", "--out",
             str(self.ready / "captures"), *argv], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        self.output = Said(self.watcher)

    def captures(self) -> list[Path]:
        return sorted((self.ready / "captures").glob("*.json"))

    def trigger(self, name: str) -> None:
        (self.ready / name).touch()

    def kill_on(self, name: str) -> None:
        """The job's agent and rank on node ``name``, by the PIDs that node gave them."""
        pids = [self.agents.get(name)] + [p for _, h, p, _ in self.marks("training")
                                          if h == name]
        self.cluster.run_on(name, "kill", "-9", *(str(p) for p in pids if p), timeout=10)

    def node_watchers(self) -> list[str]:
        """The watcher's processes left on any node: its node watchers and their ssh."""
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            argv = proc.info["cmdline"] or []
            if any(self.run_id in a for a in argv) and "watch" in argv and "--events" in argv:
                found.append(" ".join(argv)[:200])
        return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[WatchCluster]:
    with WatchCluster(nodes=len(NODES), nproc=1) as c:
        yield c


@pytest.fixture
def job(cluster: WatchCluster, tmp_path: Path) -> Iterator[Job]:
    """A fresh job on every node (its own run id and rendezvous port), killed afterwards."""
    tag = os.urandom(3).hex()
    ready = cluster.base / f"job-{tag}"
    ready.mkdir()
    port = RDZV_PORT + 1 + int(tag, 16) % 500
    running = Job(cluster, f"hswatch{tag}", ready)
    try:
        for name in NODES:
            line = _TORCHRUN.format(
                base=cluster.base, python=cluster.python, nnodes=len(NODES), nproc=1,
                first=NODES[0], port=port, run_id=running.run_id, worker=WORKER)
            line = line.replace("torchrun.log", f"torchrun-{tag}.log")
            line = line.replace(f"{cluster.base}/ready", str(ready))
            started = cluster.run_on(name, "sh", "-c", f"cd {cluster.base}/{name}\n{line}\n"
                                     "echo $!", timeout=30)
            running.agents[name] = int(started.stdout.split()[-1])
        running.wait_marks("training")
        yield running
    finally:
        if running.watcher is not None and running.watcher.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.watcher.pid, signal.SIGKILL)
            running.watcher.wait()
        for name in NODES:
            running.kill_on(name)


def _ranks_by_host(capture: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for proc in json.loads(capture.read_text())["processes"]:
        if proc["role"] == "rank":
            out.setdefault(proc["host"], set()).add(proc["rank"]["global_rank"])
    return out


def _stop_and_check_clean(job: Job) -> int:
    """SIGTERM the watch; its exit code, once no node watcher is left on any node."""
    assert job.watcher is not None
    # nsenter forks the watch into node01's PID namespace and does not pass signals on.
    [watch] = psutil.Process(job.watcher.pid).children()
    watch.send_signal(signal.SIGTERM)
    rc = job.watcher.wait(timeout=30)
    try:
        poll(lambda: not job.node_watchers(), "every node's watcher to end", timeout=20)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {job.node_watchers()}\n{job.text()}") from None
    left = job.cluster.run_on("node02", "sh", "-c", "ls -d /tmp/hangscope.* 2>/dev/null; true")
    assert left.stdout == "", left.stdout  # the shipped copy is gone with its watcher
    return rc


@pytest.mark.extended
@pytest.mark.timeout(240)
def test_a_healthy_job_then_its_hang_is_captured_once_from_both_nodes(job: Job) -> None:
    # GIVEN a job training on 2 nodes, watched from node01 through ssh, with a third node in
    # the set that cannot be reached
    job.watch("--nodes", "node[01-02],node09", *FAST)
    job.said("watching the job on 3 nodes", timeout=30)
    # THEN the unreachable node is said in one line, and the others are watched
    job.said("node09: not watched: ssh failed", timeout=30)
    job.said("2 of 3 nodes watched (node[01-02]): 2 ranks", timeout=60)
    # AND while the job trains for 40 s nothing is captured
    # The length of the healthy watch under test, not a readiness wait (HS_HEALTHY_S: a
    # shorter one while working on the test).
    time.sleep(float(os.environ.get("HS_HEALTHY_S", "40")))
    assert job.captures() == [] and "HANG" not in job.text(), job.text()
    # WHEN the job hangs (the last rank in all_gather, the other in all_reduce)
    job.trigger("HANG")
    hang = job.wait_marks("hang")
    captured = job.said("HANG (", timeout=60)
    assert captured - hang <= 10 + 15, job.text()
    # THEN exactly one capture holds both nodes' ranks, with the right verdict
    [capture] = job.captures()
    assert _ranks_by_host(capture) == {"node01": {0}, "node02": {1}}
    assert json.loads(capture.read_text())["verdict"]["kind"] == "mismatched_collectives"
    assert capture.with_suffix(".md").exists()
    # AND SIGTERM ends the watch (exit 8: a hang was captured) and every node's watcher
    assert _stop_and_check_clean(job) == 8, job.text()
    assert len(job.captures()) == 1, job.text()


@pytest.mark.timeout(180)
def test_a_rank_that_dies_on_a_node_is_captured(job: Job) -> None:
    # GIVEN the job watched with an --after far longer than the test
    job.watch("--nodes", "node[01-02]", *FAST[2:], "--after", "120")
    job.said("2 of 2 nodes watched", timeout=60)
    # WHEN the rank on node02 exits while the rank on node01 waits for it
    job.trigger("DIE")
    died = job.wait_marks("die")
    captured = job.said("HANG (", timeout=60)
    # THEN it is captured within seconds, not --after
    assert captured - died <= 30, job.text()
    assert "node02" in job.text().split("HANG (", 1)[1].split(")")[0], job.text()
    [capture] = job.captures()
    kind = json.loads(capture.read_text())["verdict"]["kind"]
    assert kind == "missing_rank", job.text()
    # AND when the job ends on node01 too, the watch ends by itself (exit 8: a capture)
    job.kill_on("node01")
    assert job.watcher is not None and job.watcher.wait(timeout=30) == 8, job.text()
    assert "the job ended on node[01-02]; 1 capture(s)" in job.text(), job.text()
    poll(lambda: not job.node_watchers(), "every node's watcher to end", timeout=20)


@pytest.mark.slow  # ~45 s more: kept out of CI's budget for this module (run with -m slow)
@pytest.mark.timeout(180)
def test_a_long_pause_is_captured_then_recovers(job: Job) -> None:
    # GIVEN the job watched with --after 10
    job.watch("--nodes", "node[01-02]", *FAST)
    job.said("2 of 2 nodes watched", timeout=60)
    # WHEN the rank on node02 stops for 25 s while the rank on node01 waits for it
    job.trigger("PAUSE")
    job.wait_marks("pause")
    # THEN the pause is captured once it outlasts --after, and "recovered" when the job moves
    job.said("HANG (", timeout=40)
    resumed = job.wait_marks("resumed", timeout=60)
    recovered = job.said("recovered after", timeout=30)
    assert recovered - resumed <= 15, job.text()
    assert len(job.captures()) == 1, job.text()
    assert _stop_and_check_clean(job) == 8, job.text()
