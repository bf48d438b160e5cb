"""`hangscope dump --slurm-job JOB` through `srun --overlap` on a real Slurm (slurmctld, one
slurmd per namespace node, munge; tests/integration/cluster/slurm.py) running the hung
multi-node torchrun gloo job as a batch job.

Needs root and Debian's slurm-wlm and munge (.ci/run installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm import SlurmCluster

# One namespace cluster at a time (fixed addresses and rendezvous port): one worker.
# The namespace cluster is one mechanism: test_multinode_ssh keeps its quick case.
pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.extended, pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t, path="/usr/sbin:/usr/bin") for t in
                                 ("slurmctld", "slurmd", "munged", "sshd", "unshare")),
    reason="the Slurm namespace cluster needs root, slurm-wlm, munge and openssh-server "
    "(.ci/run installs them)")]


@pytest.fixture(scope="module")
def slurm() -> Iterator[tuple[SlurmCluster, str, dict[int, dict[str, object]]]]:
    with SlurmCluster(nodes=3, nproc=2) as c:
        c.wait_nodes_idle(timeout=60)
        job = c.submit()
        yield c, job, c.wait_ready(timeout=150)


def test_every_node_of_a_slurm_job_through_srun_overlap(slurm) -> None:
    c, job, ready = slurm
    result = c.run_on("node01", str(Path(sys.executable).parent / "hangscope"), "dump",
                      "--slurm-job", job, "--samples", "2", "--window", "1",
                      "--format", "json", env=c.env, timeout=120)
    assert result.stdout.startswith("{"), (result.returncode, result.stderr[-2000:],
                                           c.slurm_logs()[-3000:])
    dump = json.loads(result.stdout)

    where = {(p["host"], p["pid"]): p["rank"]["global_rank"]
             for p in dump["processes"] if p["role"] == "rank"}
    assert where == {(str(v["host"]), int(v["pid"])): r for r, v in ready.items()}
    odd = next(r for r, v in ready.items() if v["op"] == "all_gather")
    assert dump["verdict"]["summary"].startswith(
        f"Rank {odd} on {ready[odd]['host']} is in all_gather, the other {len(ready) - 1} "
        "in all_reduce.")
    assert any(f"3 of 3 nodes answered through srun (--find env:SLURM_JOB_ID={job})" in n
               for n in dump["notes"])
