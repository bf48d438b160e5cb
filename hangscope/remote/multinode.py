"""The whole job from one request: every node dumped at once (this node in-process), merged.

``hangscope dump --nodes/--hosts/--slurm-job/--pods`` builds a :class:`NodeRequest`
(commands/nodes.py); this runs it: the one-node dump everywhere in parallel, each node's
answer a Snapshot or the sentence that says why not, merged by the analysis
(``hangscope.analyze.merge``), which names the nodes in the verdict.
"""

from __future__ import annotations

import functools
import shutil
import socket
import subprocess
import time
from dataclasses import replace

from hangscope.analyze.merge import merge
from hangscope.collect.procfs import read_local_addresses
from hangscope.errors import HangscopeError, ToolMissing, UsageError
from hangscope.live.sampler import Sampler
from hangscope.model import Snapshot
from hangscope.remote.fanout import NodeAnswer, dump_nodes
from hangscope.remote.nodeset import expand
from hangscope.remote.request import NodeRequest, remote_argv
from hangscope.remote.transport import Kubectl


def slurm_nodes(job: str) -> list[str]:
    """``squeue -h -j JOB -o %N`` -> the job's node set, expanded."""
    if shutil.which("squeue") is None:
        raise ToolMissing("--slurm-job needs Slurm's squeue and srun on PATH.",
                          "Run hangscope on a Slurm login or compute node.")
    try:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True,
                             text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        raise HangscopeError("squeue did not answer in 30 s; is slurmctld up?") from None
    nodelist = out.stdout.strip()
    if out.returncode != 0 or not nodelist:
        raise UsageError(f"Slurm job {job} is not running ({out.stderr.strip() or 'no nodes'}).",
                         "Check it with `squeue -j JOB`.")
    return expand(nodelist)


def ras_hosts(snap: Snapshot) -> list[str]:
    """The hosts that NCCL RAS (or Flight Recorder) names for the job's communicators."""
    found = []
    for evidence in snap.collectives:
        for comm in evidence.communicators:
            found.extend(item.host for item in (*comm.positions, *comm.missing) if item.host)
    return list(dict.fromkeys(found))


def _is_here(node: str) -> bool:
    """``node`` names this machine: its host name (short or full), localhost, or one of its
    own addresses (``--nodes 10.0.0.5,10.0.0.6`` typed on 10.0.0.5): then it is sampled
    in-process, never asked again over the transport (which counted its ranks twice)."""
    return node in _here()


@functools.cache
def _here() -> frozenset[str]:
    """Every name and address of this machine, read once per run (1,000 nodes: one read)."""
    name = socket.gethostname()
    return frozenset({name, name.split(".")[0], socket.getfqdn(), "localhost",
                      *read_local_addresses()})


def dump_everywhere(request: NodeRequest, pid: int | None) -> Snapshot:
    """One merged Snapshot of every node that answered; the rest named in the verdict.
    ``pid``: the job's process on this node (sampled in-process), if any.

    Raises:
        HangscopeError: no node answered (the reasons, one per node).
    """
    where, options, spec = request.where, request.options, request.spec
    transport = where.transport
    nodes = list(where.nodes) if where.nodes is not None else None
    here = socket.gethostname()
    first: NodeAnswer | None = None
    if nodes is None:  # --nodes auto without SLURM_JOB_NODELIST: the hosts RAS names
        start = time.monotonic()
        local_snap = Sampler(pid, options).snapshot()
        first = NodeAnswer(here, local_snap, None, time.monotonic() - start)
        nodes = ras_hosts(local_snap)
        if not nodes:
            raise UsageError("--nodes auto: the job's ranks carry no SLURM_JOB_NODELIST and "
                             "NCCL RAS named no host.", "Name the nodes: --nodes node[01-04].")
    local = None
    if pid is not None and not isinstance(transport, Kubectl):
        nodes = [n for n in nodes if not _is_here(n)]

        def local() -> NodeAnswer:
            if first is not None:
                return first
            start = time.monotonic()
            try:
                snap = Sampler(pid, options).snapshot()
                return NodeAnswer(here, snap, None, time.monotonic() - start)
            except HangscopeError as exc:
                return NodeAnswer(here, None, exc.message, time.monotonic() - start)

    answers = dump_nodes(transport, nodes, remote_argv(spec, options), where.timeout,
                         where.ship, where.python, local, where.fanout)
    got = [a for a in answers if a.snapshot is not None]
    lost = [(a.node, a.error or "no answer") for a in answers if a.snapshot is None]
    if not got:
        raise HangscopeError("No node answered: " + "; ".join(f"{n}: {w}" for n, w in lost),
                             f"Check that `{transport.name}` reaches the nodes by hand.")
    snap = merge([a.snapshot for a in got if a.snapshot], [a.node for a in got], lost)
    shipped = [a.node for a in got if a.shipped]
    note = (f"{len(got)} of {len(answers)} nodes answered through {transport.name} "
            f"(--find {spec}); slowest {max(a.seconds for a in got):.1f} s"
            + (f"; hangscope shipped to {', '.join(shipped)}" if shipped else ""))
    return replace(snap, notes=(*snap.notes, note))


class MultiNodeSampler:
    """What ``attach --nodes`` gives the TUI: each refresh dumps every node in parallel."""

    def __init__(self, request: NodeRequest, pid: int | None) -> None:
        self.request, self.pid = request, pid
        self.target = pid or 0

    def snapshot(self) -> Snapshot:
        """One merged Snapshot of every node that answered (see ``dump_everywhere``); the TUI
        keys its rows by (host, PID), so PIDs that repeat across nodes are told apart."""
        return dump_everywhere(self.request, self.pid)
