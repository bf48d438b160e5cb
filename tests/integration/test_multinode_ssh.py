"""`hangscope dump --nodes` over real OpenSSH on a namespace cluster running a hung multi-node
torchrun gloo job (tests/integration/cluster/): right ranks on the right nodes, the odd rank
named with its node, hangscope shipped to nodes that lack it and nothing left behind, and a
node whose sshd is stopped reported while the verdict comes from the others.

Needs root (namespaces) and Debian's openssh-server (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import Cluster
from support import poll

# One namespace cluster at a time (fixed addresses and rendezvous port): one worker.
pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None
    or shutil.which("unshare") is None,
    reason="the namespace cluster needs root, unshare and openssh-server (.ci/run installs it)")]

HANGSCOPE = str(Path(sys.executable).parent / "hangscope")
FAST = ("--samples", "2", "--window", "1", "--format", "json")


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, dict[int, dict[str, object]]]]:
    with Cluster(nodes=3, nproc=2) as c:
        yield c, c.wait_ready(timeout=150)


def _dump(c: Cluster, *argv: str) -> dict:
    result = c.run_on("node01", HANGSCOPE, "dump", *argv, *FAST, timeout=120,
                      env={"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": "/root"})
    assert result.stdout.startswith("{"), (result.returncode, result.stderr[-2000:])
    return json.loads(result.stdout)


def _ranks_by_host(dump: dict) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for proc in dump["processes"]:
        if proc["role"] == "rank":
            out.setdefault(proc["host"], set()).add(proc["rank"]["global_rank"])
    return out


def _expected(ready: dict[int, dict[str, object]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for rank, info in ready.items():
        out.setdefault(str(info["host"]), set()).add(rank)
    return out


@pytest.mark.extended
def test_every_node_from_one_command(cluster: tuple[Cluster, dict]) -> None:
    c, ready = cluster
    local_rank_pid = min(int(v["pid"]) for v in ready.values() if v["host"] == "node01")
    dump = _dump(c, str(local_rank_pid), "--nodes", "node[01-03]")

    # Every rank on the node it really runs on, by (host, PID) -- PIDs repeat across nodes.
    assert _ranks_by_host(dump) == _expected(ready)
    pids = {(p["host"], p["pid"]) for p in dump["processes"] if p["role"] == "rank"}
    assert pids == {(str(v["host"]), int(v["pid"])) for v in ready.values()}
    odd = next(r for r, v in ready.items() if v["op"] == "all_gather")
    verdict = dump["verdict"]
    assert verdict["kind"] == "mismatched_collectives"
    assert verdict["summary"].startswith(
        f"Rank {odd} on {ready[odd]['host']} is in all_gather, the other {len(ready) - 1} "
        "in all_reduce.")
    assert any("3 of 3 nodes answered through ssh" in n for n in dump["notes"])
    # Nodes without hangscope got it shipped into a private temp dir that is gone afterwards.
    for node in ("node02", "node03"):
        left = c.run_on(node, "sh", "-c", "ls -d /tmp/hangscope.* 2>/dev/null; true")
        assert left.stdout == "", left.stdout


@pytest.mark.extended
def test_find_without_pid_goes_to_every_node(cluster: tuple[Cluster, dict]) -> None:
    c, ready = cluster
    spec = "name:worker\\.py"
    dump = _dump(c, "--find", spec, "--nodes", "node[02-03]")
    assert _ranks_by_host(dump) == {h: r for h, r in _expected(ready).items() if h != "node01"}


@pytest.mark.extended
def test_a_node_past_its_deadline_is_reported_and_left_clean(
        cluster: tuple[Cluster, dict]) -> None:
    c, ready = cluster
    # A 6 s window watched whole (the ranks' silence before it would end it after 1 s)
    # cannot finish within a 3 s deadline: node02's transport is killed while its shipped
    # hangscope is sampling.
    result = c.run_on("node01", HANGSCOPE, "dump", "--find", "name:worker\\.py", "--nodes",
                      "node02", "--window", "6", "--whole-window", "--node-timeout", "3",
                      "--format", "json",
                      timeout=120, env={"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": "/root"})
    assert result.returncode == 1
    assert "No node answered: node02: ssh timed out after 3 s" in result.stderr
    # The remote side notices the hang-up, removes its temporary directory, and leaves no
    # rank stopped (py-spy detaches when it goes).
    pids = [int(v["pid"]) for v in ready.values() if v["host"] == "node02"]

    def clean() -> bool:
        left = c.run_on("node02", "sh", "-c", "ls -d /tmp/hangscope.* 2>/dev/null; "
                        + "; ".join(f"cut -d' ' -f3 /proc/{p}/stat" for p in pids))
        lines = left.stdout.split()
        return not any(ln.startswith("/tmp/hangscope.") for ln in lines) and "T" not in lines

    poll(clean, "node02 without /tmp/hangscope.* and without a stopped rank", timeout=30)


def test_node_with_sshd_stopped_is_reported(cluster: tuple[Cluster, dict]) -> None:
    c, ready = cluster
    c.stop_sshd("node02")
    local_rank_pid = min(int(v["pid"]) for v in ready.values() if v["host"] == "node01")
    dump = _dump(c, str(local_rank_pid), "--nodes", "node[01-03]")

    expected = _expected(ready)
    lost = expected.pop("node02")
    assert _ranks_by_host(dump) == expected
    verdict = dump["verdict"]
    assert verdict["kind"] == "mismatched_collectives"  # from the nodes that answered
    assert "2 of 3 nodes answered; node02: ssh failed" in verdict["summary"]
    assert "Connection refused" in verdict["summary"]
    lost_text = f"Ranks {min(lost)}-{max(lost)} are unknown."
    assert lost_text in verdict["summary"]
