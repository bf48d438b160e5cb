"""How a command reaches a node: OpenSSH, ``srun --overlap``, ``kubectl exec``.

Each transport turns (node, argv) into the local argv that runs argv there with stdin
forwarded, and names its own failures: ``ssh -o BatchMode=yes node -- CMD``,
``srun --overlap --jobid JOB -N1 -n1 -w node CMD``, ``kubectl exec -i POD -- CMD``.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Transport(ABC):
    """Base: a name for messages and the exit code that means "could not reach the node"."""

    name: str = "transport"
    unreachable_rc: int | None = None
    #: Nodes asked at once at most. Each node costs one local client process while it
    #: answers (ssh ~8 MB, srun and kubectl more; each a connection to sshd behind a bastion's
    #: MaxStartups, to slurmctld, to the API server): pdsh's and clush's fan-out bounds (32,
    #: 64). The nodes beyond it wait for a slot, so 1,000 nodes take about 1,000/64 node
    #: times. A transport whose children are cheap and local raises it.
    parallel: ClassVar[int] = 64

    @abstractmethod
    def argv(self, node: str, command: list[str]) -> list[str]:
        """The local argv that runs ``command`` on ``node`` with stdin forwarded."""

    def what_failed(self, rc: int, stderr: str) -> str:
        """One sentence from the transport's stderr (its last meaningful line)."""
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit status {rc}"
        return f"{self.name} failed: {last}"


@dataclass(frozen=True)
class Ssh(Transport):
    """``ssh -o BatchMode=yes -o ConnectTimeout=N [-l USER] NODE -- sh -c SCRIPT ...``."""

    name: str = "ssh"
    unreachable_rc: int | None = 255
    connect_timeout: float = 10.0
    user: str | None = None
    options: tuple[str, ...] = ()  # extra -o KEY=VALUE, as the user gave them

    def argv(self, node: str, command: list[str]) -> list[str]:
        # BatchMode: never a password prompt on a terminal that is not there; the user's
        # ~/.ssh/config still applies (ProxyJump, keys, known hosts).
        out = ["ssh", "-T", "-o", "BatchMode=yes",
               "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2"]
        for option in self.options:
            out += ["-o", option]
        if self.user:
            out += ["-l", self.user]
        # ssh joins its arguments into one string for the remote login shell: quote each.
        return [*out, node, "--", " ".join(shlex.quote(a) for a in command)]


@dataclass(frozen=True)
class Slurm(Transport):
    """``srun --overlap --jobid JOB -N1 -n1 -w NODE`` inside the job's own allocation."""

    name: str = "srun"
    job: str = ""

    def argv(self, node: str, command: list[str]) -> list[str]:
        # --overlap: share the allocation's CPUs with the hung job's step instead of waiting
        # for them forever; runs inside the job's cgroup, so /proc shows its processes.
        return ["srun", "--overlap", "--jobid", self.job, "-N1", "-n1", "-w", node,
                "--quiet", "--kill-on-bad-exit=1", *command]


@dataclass(frozen=True)
class Kubectl(Transport):
    """``kubectl exec -i [-n NS] [-c CONTAINER] POD -- CMD`` (needs pods/exec RBAC)."""

    name: str = "kubectl exec"
    namespace: str | None = None
    container: str | None = None

    def argv(self, node: str, command: list[str]) -> list[str]:
        out = ["kubectl", "exec", "-i"]
        if self.namespace:
            out += ["-n", self.namespace]
        if self.container:
            out += ["-c", self.container]
        return [*out, node, "--", *command]
