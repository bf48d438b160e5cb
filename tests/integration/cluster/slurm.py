"""The namespace cluster under a real Slurm: slurmctld on node01, one slurmd per node, munge.

Debian's slurm-wlm and munge, nothing patched: one ``munged`` (on node01, its socket in the
cluster's directory, ``AuthInfo=socket=...`` points every daemon at it), ``slurmctld`` on
node01, a ``slurmd`` in each node's namespaces (its hostname is the node name; NodeAddr is the
node's veth address). The hung job is submitted with ``sbatch -N N`` and runs one torchrun
agent per node through ``srun``, so its ranks carry SLURM_JOB_ID and live in slurmd's steps.

By hand::

    python tests/integration/cluster/slurm.py --nodes 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import time
from pathlib import Path

from cluster import HERE, RDZV_PORT, Cluster

_SLURM_CONF = """\
ClusterName=hscluster
SlurmctldHost={first}({first_addr})
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={base}/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={base}/slurm/state
SlurmdSpoolDir={base}/slurm/%n
SlurmctldPidFile={base}/slurm/slurmctld.pid
SlurmdPidFile={base}/slurm/%n/slurmd.pid
SlurmctldLogFile={base}/slurm/slurmctld.log
SlurmdLogFile={base}/slurm/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdTimeout=60
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""


class SlurmCluster(Cluster):
    """Namespace nodes running sshd and Slurm; ``submit()`` starts the hung job as a batch job."""

    job_id: str | None = None

    def _write_files(self) -> None:
        super()._write_files()
        munge = self.base / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        slurm = self.base / "slurm"
        (slurm / "state").mkdir(parents=True)
        for name in self.names:
            (slurm / name).mkdir()
        nodes = "\n".join(f"NodeName={n} NodeAddr={self.addresses[n]} CPUs={os.cpu_count()} "
                          "RealMemory=1000 State=UNKNOWN" for n in self.names)
        # slurmd insists on a cgroup mount point even with proctrack/linuxproc and
        # task/none; `ip netns exec` remounted /sys, so each node mounts an empty tmpfs here
        # instead: no cgroup of the host is touched.
        (self.base / "cgroup.conf").write_text(
            f"CgroupPlugin=cgroup/v1\nCgroupMountpoint={self.base}/cgroupfs\n")
        (self.base / "cgroupfs").mkdir()
        (self.base / "slurm.conf").write_text(_SLURM_CONF.format(
            first=self.names[0], first_addr=self.addresses[self.names[0]], base=self.base,
            nodes=nodes))

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": "/root",
                "SLURM_CONF": str(self.base / "slurm.conf")}

    def node_job(self, name: str) -> str:
        m = self.base / "munge"
        lines = [f"export SLURM_CONF={self.base}/slurm.conf",
                 f"mount -t tmpfs -o mode=0755 cgroupfs {self.base}/cgroupfs"]
        if name == self.names[0]:
            lines += [f"munged --force -S {m}/socket --key-file {m}/key --pid-file {m}/pid "
                      f"--seed-file {m}/seed --log-file {m}/log",
                      "slurmctld"]
        lines.append(f"slurmd -N {name}")
        # The daemons detach: keep the node's init (bash, which reaps orphans) waiting.
        lines.append("sleep infinity &")
        return "\n".join(lines)

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        """Poll ``sinfo`` until every node is idle (slurmd registered with slurmctld)."""
        deadline = time.monotonic() + timeout
        out = ""
        while time.monotonic() < deadline:
            result = self.run_on(self.names[0], "sinfo", "-h", "-N", "-o", "%N %t",
                                 env=self.env, timeout=20)
            out = result.stdout + result.stderr
            states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
            if len(states) == self.nnodes and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        raise TimeoutError(f"Slurm nodes not idle after {timeout:.0f} s: {out}\n"
                           + self.slurm_logs())

    def submit(self) -> str:
        """``sbatch -N n``: one torchrun agent per node via srun; returns the job id."""
        torchrun = (f"cd {self.base} && GLOO_SOCKET_IFNAME=eth0 exec {self.python} -m "
                    f"torch.distributed.run --nnodes {self.nnodes} --nproc-per-node "
                    f"{self.nproc} --rdzv-backend c10d --rdzv-endpoint "
                    f"{self.names[0]}:{RDZV_PORT} --rdzv-id hsslurm{self.tag} "
                    f"--max-restarts 0 {HERE / 'worker.py'} {self.base}/ready")
        script = self.base / "job.sh"
        script.write_text("#!/bin/bash\n"
                          f"srun --ntasks-per-node=1 bash -c '{torchrun}'\n")
        return self.submit_script(script)

    def submit_script(self, script: Path) -> str:
        """``sbatch -N n SCRIPT``; returns the job id."""
        result = self.run_on(self.names[0], "sbatch", "-N", str(self.nnodes),
                             "--ntasks-per-node=1", "-o", f"{self.base}/slurm/job-%j.out",
                             str(script), env=self.env, timeout=30)
        match = re.search(r"Submitted batch job (\d+)", result.stdout)
        if not match:
            raise RuntimeError(f"sbatch failed: {result.stdout} {result.stderr}")
        self.job_id = match.group(1)
        return self.job_id

    def slurm_logs(self) -> str:
        parts = []
        for path in sorted((self.base / "slurm").rglob("*.log")) + sorted(
                (self.base / "slurm").glob("job-*.out")):
            parts.append(f"[{path.name}] {path.read_text(errors='replace')[-1200:]}")
        return "\n".join(parts)

    def close(self) -> None:
        if self.job_id and self.inits:
            with contextlib.suppress(Exception):
                self.run_on(self.names[0], "scancel", self.job_id, env=self.env, timeout=10)
        super().close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    with SlurmCluster(args.nodes, args.nproc) as cluster:
        cluster.wait_nodes_idle()
        print("job", cluster.submit())
        ranks = cluster.wait_ready()
        for rank in sorted(ranks):
            print(f"rank {rank}: {ranks[rank]}")
        print(f"SLURM_CONF={cluster.base}/slurm.conf; enter: "
              f"{' '.join(cluster.nsenter(cluster.names[0]))} bash")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
