"""``hangscope merge A.json B.json ...``: one diagnosis of a job that spans several nodes.

Run ``hangscope dump PID --format json -o node.json`` on each node with the tool you already
launch the job with (``srun``, ``kubectl exec``, ``pdsh``), copy the files together, then merge:
the processes of every node are analysed as one job, so a mismatch between nodes shows.
(``hangscope dump --nodes ...`` does all of that in one command.)

Processes are keyed by (host, PID), never by PID alone: PIDs repeat across nodes (every
container's or PID namespace's ranks start near 1). The verdict names the nodes. The merge
itself is the analysis's (``hangscope.analyze.merge``); this module reads files and prints.
"""

from __future__ import annotations

import argparse

from hangscope.analyze.merge import merge
from hangscope.model import Snapshot
from hangscope.model.serialize import load
from hangscope.render.output import FORMATS, emit

#: Formats of a multi-node report: the one-node ones plus the call-tree picture.
MULTI_FORMATS = (*FORMATS, "svg")


def emit_merged(snap: Snapshot, fmt: str, output: str | None, native: bool = True) -> None:
    """Print or write a merged report; Markdown gains the Mermaid call tree, ``svg`` is the
    picture alone."""
    import sys

    from hangscope.render.graph import markdown_section, svg
    from hangscope.render.output import render, write_private

    if fmt not in ("svg", "md"):
        emit(snap, fmt, output, native=native)
        return
    text = svg(snap) if fmt == "svg" else render(snap, "md") + markdown_section(snap)
    if output and output != "-":
        write_private(output, text)
        print(f"hangscope: wrote {fmt} report to {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("merge", help="diagnose per-node JSON dumps as one job",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="dumps written with --format json")
    parser.add_argument("--format", "-f", choices=MULTI_FORMATS, default="text",
                        help="svg: the merged call tree as a picture")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (0600)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    emit_merged(merge([load(path) for path in args.files]), args.format, args.output)
    return 0
