"""What a multi-node dump asks of every node: what to sample, how, where (one frozen request).

The command layer builds a :class:`NodeRequest` from its flags; the fan-out runs it. The one
place sampling options become a remote command line is :func:`remote_argv`: every field of
``SampleOptions`` reaches every node (tests/unit/test_remote_request.py enumerates them).
"""

from __future__ import annotations

from dataclasses import dataclass

from hangscope.live.sampler import SampleOptions
from hangscope.remote.find import Spec
from hangscope.remote.transport import Transport


@dataclass(frozen=True)
class Placement:
    """Where: the transport, the nodes (None: the hosts NCCL RAS names, after the local
    dump), the deadline per node, and how hangscope gets there."""

    transport: Transport
    nodes: tuple[str, ...] | None
    timeout: float = 60.0
    ship: str = "auto"  # auto | always | never
    python: str = "python3"  # the Python that runs a shipped hangscope
    fanout: int | None = None  # nodes asked at once (None: the transport's bound)


@dataclass(frozen=True)
class NodeRequest:
    """What (how each node finds the job), how (the sampling options), where."""

    spec: Spec
    options: SampleOptions
    where: Placement


@dataclass(frozen=True)
class Pulse:
    """What a multi-node watch asks of each node's watcher: ``--after`` and ``--interval``."""

    after: float
    interval: float


def remote_argv(spec: Spec, options: SampleOptions, pulse: Pulse | None = None) -> list[str]:
    """The arguments of ``hangscope dump`` (or, with ``pulse``, of the node's watcher
    ``hangscope watch --events``) that sample the job on a node as ``options`` says here."""
    if pulse is None:
        out = ["--find", str(spec), "--format", "json"]
    else:
        out = ["--find", str(spec), "--events", "--after", repr(pulse.after),
               "--interval", repr(pulse.interval)]
    out += ["--samples", str(options.samples), "--window", repr(options.window),
            "--timeout", repr(options.timeout)]
    if not options.settle:
        out.append("--whole-window")
    if not options.native:
        out.append("--no-native")
    if options.nonblocking:
        out.append("--nonblocking")
    if not options.redact:
        out.append("--no-redact")
    if options.workers is not None:
        out += ["--workers", str(options.workers)]
    if not options.fr_trigger:
        out.append("--no-fr-trigger")
    if not options.progress:
        out.append("--no-progress")
    if options.kernels:
        out.append("--kernels")
    if options.kernels_timeout != SampleOptions.kernels_timeout:
        out += ["--kernels-timeout", repr(options.kernels_timeout)]
    return out
