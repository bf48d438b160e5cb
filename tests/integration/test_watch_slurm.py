"""Issue 21's Slurm recipe, run: ``hangscope watch --slurm-job $SLURM_JOB_ID &`` in the batch
script before ``srun`` on a real Slurm (tests/integration/cluster/slurm.py: slurmctld, one
slurmd per namespace node, munge), with a 2-node torchrun gloo job
(tests/integration/cluster/watch_worker.py) that trains, then hangs.

The watch starts before the job, waits for it on each node (node02 through ``srun --overlap``,
hangscope shipped), and captures the hang once, from both nodes. Needs root and Debian's
slurm-wlm and munge (.ci/run installs them).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator

import psutil
import pytest
from slurm import HERE, RDZV_PORT, SlurmCluster
from support import cli_env, poll

# The namespace cluster is one mechanism: test_multinode_ssh keeps its quick case.
pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.extended, pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t, path="/usr/sbin:/usr/bin") for t in
                                 ("slurmctld", "slurmd", "munged", "sshd", "unshare")),
    reason="the Slurm namespace cluster needs root, slurm-wlm, munge and openssh-server "
    "(.ci/run installs them)")]

_BATCH = """\
#!/bin/bash
export PYTHONPATH={pythonpath}
{python} -m hangscope watch --slurm-job "$SLURM_JOB_ID" --after 10 --interval 2 \\
  --samples 2 --window 1 --out {base}/captures > {base}/watch.out 2>&1 &
WATCH=$!
srun --ntasks-per-node=1 bash -c 'cd {base} && GLOO_SOCKET_IFNAME=eth0 exec {python} -m \\
  torch.distributed.run --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \\
  --rdzv-endpoint node01:{port} --rdzv-id hsslurmwatch --max-restarts 0 {worker} {ready}'
wait $WATCH
"""


class WatchedSlurm(SlurmCluster):
    """The Slurm cluster whose batch script starts the watch before the job."""

    def submit(self) -> str:
        script = self.base / "job.sh"
        script.write_text(_BATCH.format(
            pythonpath=cli_env().get("PYTHONPATH", ""), python=self.python, base=self.base,
            port=RDZV_PORT, worker=HERE / "watch_worker.py", ready=self.base / "ready"))
        return self.submit_script(script)


@pytest.fixture(scope="module")
def slurm() -> Iterator[WatchedSlurm]:
    with WatchedSlurm(nodes=2, nproc=1) as c:
        c.wait_nodes_idle(timeout=60)
        c.submit()
        yield c


def _watch_out(c: WatchedSlurm) -> str:
    path = c.base / "watch.out"
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.timeout(240)
def test_the_batch_script_recipe_captures_the_hang_of_both_nodes(slurm: WatchedSlurm) -> None:
    c = slurm
    marks = c.base / "ready" / "marks"

    def count(what: str) -> int:
        text = marks.read_text() if marks.exists() else ""
        return sum(1 for line in text.splitlines() if f" {what} " in line)

    # GIVEN the job training on 2 nodes, and the watch started before it saw both
    poll(lambda: count("training") == 2, "both ranks to train", timeout=120)
    poll(lambda: "2 of 2 nodes watched" in _watch_out(c),
         f"the watch to see both nodes:\n{_watch_out(c)}\n{c.slurm_logs()[-3000:]}",
         timeout=60)
    # WHEN the job hangs
    (c.base / "ready" / "HANG").touch()
    poll(lambda: count("hang") == 2, "both ranks to reach the hang", timeout=60)
    # THEN one capture, of the hang (not of the agent that read as a rank until its worker
    # started, whose "death" the watch started before the job saw), holds both nodes' ranks
    # with the right verdict
    [capture] = poll(lambda: sorted((c.base / "captures").glob("*.json")),
                     f"a capture:\n{_watch_out(c)}", timeout=60)
    dump = json.loads(capture.read_text())
    hosts = {p["host"]: p["rank"]["global_rank"] for p in dump["processes"]
             if p["role"] == "rank"}
    assert hosts == {"node01": 0, "node02": 1}, _watch_out(c)
    assert dump["verdict"]["kind"] == "mismatched_collectives"
    assert "through srun" in " ".join(dump["notes"])
    said = poll(lambda: "HANG (" in _watch_out(c) and _watch_out(c), "the HANG line", timeout=10)
    assert "HANG (PID " in said and "exited" not in said, said
    # AND when the job is cancelled the watch ends with it, on every node
    c.run_on("node01", "scancel", str(c.job_id), env=c.env, timeout=20)

    def no_watcher() -> bool:
        return not any("--events" in (p.info["cmdline"] or [])
                       and any("SLURM_JOB_ID" in a for a in p.info["cmdline"])
                       for p in psutil.process_iter(["cmdline"]))
    poll(no_watcher, f"every node's watcher to end:\n{_watch_out(c)}", timeout=60)
    assert len(list((c.base / "captures").glob("*.json"))) == 1, _watch_out(c)
