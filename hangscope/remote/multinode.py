"""``hangscope dump --nodes/--hosts/--slurm-job/--pods``: the whole job from one command.

Picks the transport and the nodes, tells every node how to find the job (``--find SPEC``),
runs the one-node dump everywhere at once (this node in-process), and merges what came back.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import time
from dataclasses import replace

from hangscope.errors import HangscopeError, ToolMissing, UsageError
from hangscope.model import Snapshot
from hangscope.remote.fanout import NodeAnswer, dump_nodes
from hangscope.remote.find import Spec, nodes_from_environment, parse_spec, spec_for
from hangscope.remote.nodeset import expand
from hangscope.remote.transport import Kubectl, Slurm, Ssh, Transport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The multi-node flags of ``dump`` (and ``attach``)."""
    group = parser.add_argument_group("every node of a multi-node job")
    group.add_argument("--nodes", "--hosts", dest="nodes", metavar="NODESET",
                       help="dump these nodes too, over ssh: node[01-04], a,b, or `auto` "
                       "(SLURM_JOB_NODELIST of the job's ranks, else the hosts NCCL RAS "
                       "names)")
    group.add_argument("--slurm-job", metavar="JOB",
                       help="dump every node of this Slurm job through srun --overlap")
    group.add_argument("--pods", metavar="PODSET",
                       help="dump these pods through kubectl exec: trainer-[0-3]")
    group.add_argument("--namespace", metavar="NS", help="Kubernetes namespace of --pods")
    group.add_argument("--container", metavar="NAME", help="container of --pods")
    group.add_argument("--find", metavar="SPEC",
                       help="how each node finds the job: env:KEY=VALUE or name:REGEX "
                       "(default: the torchrun run id / SLURM_JOB_ID / MASTER_PORT of PID)")
    group.add_argument("--node-timeout", type=float, default=60.0, metavar="SECONDS",
                       help="deadline per node, shipping included (default 60)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                       help="extra ssh -o option (repeatable)")
    group.add_argument("--ship", choices=("auto", "always", "never"), default="auto",
                       help="send hangscope + py-spy to nodes that lack it (default auto)")
    group.add_argument("--remote-python", default="python3", metavar="PATH",
                       help="Python that runs the shipped hangscope (default python3)")


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.nodes or args.slurm_job or args.pods)


def _remote_args(args: argparse.Namespace, spec: Spec) -> list[str]:
    out = ["--find", str(spec), "--format", "json", "--samples", str(args.samples),
           "--window", str(args.window), "--timeout", str(args.timeout)]
    if not args.native:
        out.append("--no-native")
    if args.nonblocking:
        out.append("--nonblocking")
    if not getattr(args, "fr_trigger", True):
        out.append("--no-fr-trigger")
    if not args.redact:
        out.append("--no-redact")
    return out


def _slurm_nodes(job: str) -> list[str]:
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


def _plan(args: argparse.Namespace,
          pid: int | None) -> tuple[Transport, list[str] | None, Spec]:
    for nodeset in (args.nodes, args.pods):  # a typo in a node set is the first thing to say
        if nodeset and nodeset != "auto":
            expand(nodeset)
    spec = parse_spec(args.find) if args.find else (spec_for(pid) if pid else None)
    if args.slurm_job:
        nodes = expand(args.nodes) if args.nodes else _slurm_nodes(args.slurm_job)
        spec = spec or Spec("env", "SLURM_JOB_ID", args.slurm_job)
        return Slurm(job=args.slurm_job), nodes, spec
    if spec is None:
        raise UsageError("Cannot tell how the other nodes should find this job: its processes "
                         "carry no TORCHELASTIC_RUN_ID, SLURM_JOB_ID or MASTER_PORT.",
                         "Add --find env:KEY=VALUE or --find name:REGEX (see --help).")
    if args.pods:
        return (Kubectl(namespace=args.namespace, container=args.container),
                expand(args.pods), spec)
    if args.nodes == "auto":
        if pid is None:
            raise UsageError("--nodes auto reads the job's environment: give a PID too.")
        nodelist, _source = nodes_from_environment(pid)
        # None: ask NCCL RAS after the local dump (dump_everywhere), which reads it anyway.
        nodes = expand(nodelist) if nodelist is not None else None
    else:
        nodes = expand(args.nodes)
    return Ssh(options=tuple(args.ssh_option)), nodes, spec


def ras_hosts(snap: Snapshot) -> list[str]:
    """The hosts that NCCL RAS (or Flight Recorder) names for the job's communicators."""
    found = []
    for evidence in snap.collectives:
        for comm in evidence.communicators:
            found.extend(item.host for item in (*comm.positions, *comm.missing) if item.host)
    return list(dict.fromkeys(found))


def _is_here(node: str) -> bool:
    here = socket.gethostname()
    return node in (here, here.split(".")[0], "localhost")


def dump_everywhere(args: argparse.Namespace, pid: int | None, options: object) -> Snapshot:
    """One merged Snapshot of every node that answered; the rest named in the verdict.

    Raises:
        HangscopeError: no node answered (the reasons, one per node).
    """
    from hangscope.analyze.merge import merge
    from hangscope.sampler import Sampler

    transport, nodes, spec = _plan(args, pid)
    if not 1 <= args.node_timeout <= 3600:
        raise UsageError("--node-timeout must be between 1 and 3600 seconds.")
    here = socket.gethostname()
    first: NodeAnswer | None = None
    if nodes is None:  # --nodes auto without SLURM_JOB_NODELIST: the hosts RAS names
        start = time.monotonic()
        local_snap = Sampler(pid, options).snapshot()  # type: ignore[arg-type]
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
                snap = Sampler(pid, options).snapshot()  # type: ignore[arg-type]
                return NodeAnswer(here, snap, None, time.monotonic() - start)
            except HangscopeError as exc:
                return NodeAnswer(here, None, exc.message, time.monotonic() - start)

    answers = dump_nodes(transport, nodes, _remote_args(args, spec), args.node_timeout,
                         args.ship, args.remote_python, local)
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

    def __init__(self, args: argparse.Namespace, pid: int | None, options: object) -> None:
        _plan(args, pid)  # a bad node set or spec is a usage error before the screen opens
        self.args, self.pid, self.options = args, pid, options
        self.target = pid or 0

    def snapshot(self) -> Snapshot:
        """One merged Snapshot of every node that answered (see ``dump_everywhere``); the TUI
        keys its rows by (host, PID), so PIDs that repeat across nodes are told apart."""
        return dump_everywhere(self.args, self.pid, self.options)
