"""`hangscope attach --nodes` in a real tmux pane on node01 of the namespace cluster's hung
3-node gloo job (tests/integration/cluster/): PIDs repeat across nodes (13 and 14 are ranks
2-3 on node02 and ranks 4-5 on node03), and the live view shows every rank with its node,
names the odd rank's node, filters by node, and quits with 0.

Needs root (namespaces), openssh-server and tmux.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster import Cluster
from support import poll

# One namespace cluster at a time (fixed addresses and rendezvous port): one worker.
# The namespace cluster is one mechanism: test_multinode_ssh keeps its quick case.
pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.extended, pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None
    or shutil.which("unshare") is None or shutil.which("tmux") is None,
    reason="needs root, unshare, openssh-server and tmux (.ci/run installs them)")]

HANGSCOPE = str(Path(sys.executable).parent / "hangscope")
ROW = re.compile(r"^\s*(\d)\s+(node0\d)\s+rank\s+(\d+)\s")


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, dict[int, dict[str, object]]]]:
    with Cluster(nodes=3, nproc=2) as c:
        yield c, c.wait_ready(timeout=150)


@pytest.fixture
def tmux() -> Iterator[Callable[..., str]]:
    """``tmux(*args)`` on a private server, killed at teardown even when the test fails."""
    socket = f"hangscope-mn-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        return subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=10, check=False).stdout

    try:
        yield run
    finally:
        run("kill-server")


def test_attach_over_nodes_keys_rows_by_host_and_filters_by_node(cluster, tmux) -> None:
    c, ready = cluster
    pid = min(int(v["pid"]) for v in ready.values() if v["host"] == "node01")
    odd = next(r for r, v in ready.items() if v["op"] == "all_gather")
    rc_file = Path(c.base) / f"attach-{uuid.uuid4().hex[:6]}.rc"  # /var/tmp: seen by node01
    attach = shlex.join([*c.nsenter("node01"), "env", "PATH=/usr/sbin:/usr/bin:/bin",
                         "HOME=/root", "TERM=xterm-256color", HANGSCOPE, "attach", str(pid),
                         "--nodes", "node[01-03]", "--interval", "30", "--samples", "2",
                         "--window", "1"])
    tmux("new-session", "-d", "-s", "hs", "-x", "120", "-y", "40",
         f"{attach}; echo $? > {shlex.quote(str(rc_file))}")

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "hs")

    def wait_screen(holds: Callable[[str], bool], what: str, timeout: float) -> str:
        """Poll the pane until ``holds(screen)``; fail with the screen at the deadline."""
        last = [""]

        def check() -> str | None:
            last[0] = screen()
            return last[0] if holds(last[0]) else None

        try:
            return poll(check, what, timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n{last[0]}") from None

    def rows(text: str) -> list[tuple[str, str, str]]:
        return [m.groups() for line in text.splitlines() if (m := ROW.match(line))]

    expected = sorted((str(r), str(v["host"]), str(v["pid"])) for r, v in ready.items())
    # PID 14 twice, each with its own node and rank (the table may scroll to the suspect).
    twins = {e for e in expected if e[2] == str(ready[odd]["pid"])}
    text = wait_screen(lambda s: len(twins) > 1 and twins <= set(rows(s)) <= set(expected),
                       "the repeated PID's ranks with their nodes in the table", 120)
    assert f"suspect: rank {odd} (PID {ready[odd]['pid']}) on {ready[odd]['host']}" in text
    assert any(re.match(r"^\s*rank\s+node\s+role\s+pid\s", line) for line in text.splitlines())

    tmux("send-keys", "-t", "hs", "/")
    wait_screen(lambda s: "Filter ranks" in s, "the filter", 15)
    tmux("send-keys", "-t", "hs", "-l", "node02")
    # The typed text narrows the picker to the node's entry; Down picks it.
    wait_screen(lambda s: "node node02 (3 processes)" in s, "the node02 entry", 15)
    tmux("send-keys", "-t", "hs", "Down", "Enter")
    text = wait_screen(lambda s: "filter: node node02" in s, "the node filter", 15)
    assert sorted(rows(text)) == [e for e in expected if e[1] == "node02"]

    tmux("send-keys", "-t", "hs", "q")
    assert poll(lambda: rc_file.exists() and rc_file.read_text().strip(),
                "attach to exit", timeout=30) == "0"
    rc_file.unlink()
