"""The multi-node flags of ``dump`` and ``attach``, turned into one request for remote/.

``--nodes/--hosts/--slurm-job/--pods`` pick the transport and the nodes, ``--find`` tells every
node how to find the job; with the sampling options they make a :class:`NodeRequest`, which
``hangscope.remote.multinode`` runs. Flags live here, in the command layer: remote/ takes typed
requests, never an argparse Namespace.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hangscope.errors import UsageError

if TYPE_CHECKING:  # the remote layer is imported only when a multi-node flag is given
    from hangscope.live.sampler import SampleOptions
    from hangscope.remote.find import Spec
    from hangscope.remote.request import NodeRequest
    from hangscope.remote.transport import Transport


#: The most nodes ``--fanout`` asks at once (each holds a local client process and pipes).
MAX_FANOUT = 4096


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
    group.add_argument("--fanout", type=int, metavar="N",
                       help="nodes asked at once (default 64 for ssh, srun and kubectl: "
                       "each is a local client and a login; raise it where sshd and the "
                       "bastion allow)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                       help="extra ssh -o option (repeatable)")
    group.add_argument("--ship", choices=("auto", "always", "never"), default="auto",
                       help="send hangscope + py-spy to nodes that lack it (default auto)")
    group.add_argument("--remote-python", default="python3", metavar="PATH",
                       help="Python that runs the shipped hangscope (default python3)")


def wanted(args: argparse.Namespace) -> bool:
    """Whether the flags ask for more than this node."""
    return bool(args.nodes or args.slurm_job or args.pods)


def _where(args: argparse.Namespace, pid: int | None) -> tuple[Transport, list[str] | None, Spec]:
    from hangscope.remote.find import Spec, nodes_from_environment, parse_spec, spec_for
    from hangscope.remote.multinode import slurm_nodes
    from hangscope.remote.nodeset import expand
    from hangscope.remote.transport import Kubectl, Slurm, Ssh

    for nodeset in (args.nodes, args.pods):  # a typo in a node set is the first thing to say
        if nodeset and nodeset != "auto":
            expand(nodeset)
    spec = parse_spec(args.find) if args.find else (spec_for(pid) if pid else None)
    if args.slurm_job:
        nodes = expand(args.nodes) if args.nodes else slurm_nodes(args.slurm_job)
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
        # None: ask NCCL RAS after the local dump (remote.multinode), which reads it anyway.
        nodes = expand(nodelist) if nodelist is not None else None
    else:
        nodes = expand(args.nodes)
    return Ssh(options=tuple(args.ssh_option)), nodes, spec


def request_from(args: argparse.Namespace, pid: int | None,
                 options: SampleOptions) -> NodeRequest:
    """The request the flags describe (a bad node set or spec is a usage error here, before
    anything runs or a screen opens)."""
    from hangscope.remote.request import NodeRequest, Placement

    if not 1 <= args.node_timeout <= 3600:
        raise UsageError("--node-timeout must be between 1 and 3600 seconds.")
    if args.fanout is not None and not 1 <= args.fanout <= MAX_FANOUT:
        raise UsageError(f"--fanout must be between 1 and {MAX_FANOUT:,} nodes.")
    transport, nodes, spec = _where(args, pid)
    return NodeRequest(spec, options, Placement(
        transport, tuple(nodes) if nodes is not None else None, args.node_timeout, args.ship,
        args.remote_python, args.fanout))
