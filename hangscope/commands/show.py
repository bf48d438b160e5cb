"""``hangscope show FILE``: render a saved JSON dump again, in any format, or in the TUI."""

from __future__ import annotations

import argparse

from hangscope.render.output import FORMATS, emit
from hangscope.serialize import load


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("show", help="render a saved JSON dump (text, md, json, or --tui)",
                            description=__doc__)
    parser.add_argument("file", help="a file written by `hangscope dump --format json -o FILE`")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (0600)")
    parser.add_argument("--tui", action="store_true", help="open the dump in the live TUI, offline")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    snap = load(args.file)
    if args.tui:
        from hangscope.tui.app import run_offline

        return run_offline(snap)
    emit(snap, args.format, args.output)
    return 0
