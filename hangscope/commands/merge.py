"""``hangscope merge A.json B.json ...``: one diagnosis of a job that spans several nodes.

Run ``hangscope dump PID --format json -o node.json`` on each node with the tool you already
launch the job with (``srun``, ``kubectl exec``, ``pdsh``), copy the files together, then merge:
the processes of every node are analysed as one job, so a mismatch between nodes shows.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from hangscope.analyze import analyze
from hangscope.errors import UsageError
from hangscope.model import Job, Snapshot
from hangscope.render.output import FORMATS, emit
from hangscope.serialize import load


def merge(snapshots: list[Snapshot]) -> Snapshot:
    """Concatenate the nodes' processes and analyse them again as one job."""
    if not snapshots:
        raise UsageError("Give at least one dump file to merge.")
    first = snapshots[0]
    expected = [s.job.expected_ranks for s in snapshots]
    sources = sorted({s.job.expected_source for s in snapshots if s.job.expected_source})
    job = Job(
        launcher=first.job.launcher, target=first.job.target, kind=first.job.kind,
        expected_ranks=sum(e for e in expected if e is not None)
        if all(e is not None for e in expected) else None,
        expected_source=(" + ".join(sources) + f" on {len(snapshots)} nodes") if sources else None,
        args=dict(first.job.args),
    )
    hosts = []
    seen = set()
    for snap in snapshots:
        for host in snap.hosts:
            if host.name not in seen:
                seen.add(host.name)
                hosts.append(host)
    processes = tuple(p for s in snapshots for p in s.processes)
    merged = replace(
        first, hosts=tuple(hosts), job=job, processes=processes,
        samples=min(s.samples for s in snapshots),
        window_s=min(s.window_s for s in snapshots),
        notes=tuple(dict.fromkeys(n for s in snapshots for n in s.notes)),
        redacted=all(s.redacted for s in snapshots),
    )
    return analyze(merged)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("merge", help="diagnose per-node JSON dumps as one job",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="dumps written with --format json")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (0600)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    emit(merge([load(path) for path in args.files]), args.format, args.output)
    return 0
