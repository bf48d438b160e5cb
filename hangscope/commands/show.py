"""``hangscope show FILE``: render a saved JSON dump again, in any format, or in the TUI."""

from __future__ import annotations

import argparse
from pathlib import Path

from hangscope.errors import DumpFileError
from hangscope.model.serialize import load
from hangscope.render.output import FORMATS, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("show", help="render a saved JSON dump (text, md, json, or --tui)",
                            description=__doc__.replace("``", "`"))
    parser.add_argument("file", help="a file written by `hangscope dump --format json -o FILE`")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text",
                        help="the report's format (default %(default)s)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (0600)")
    parser.add_argument("--tui", action="store_true", help="open the dump in the live TUI, offline")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _refuse_a_report(Path(args.file))
    snap = load(args.file)
    if args.tui:
        from hangscope.commands.attach import need_terminal
        from hangscope.tui.app import run_offline

        need_terminal("show --tui")
        return run_offline(snap)
    emit(snap, args.format, args.output)
    return 0


#: How the rendered reports begin: ``## hangscope report`` (Markdown), ``hangscope ... job``
#: (text).
_REPORT_HEADS = {"## hangscope report": "a Markdown report", "hangscope ": "a text report"}


def _refuse_a_report(path: Path) -> None:
    """A rendered report given instead of its JSON: name the file to pass instead.

    Raises:
        DumpFileError: ``path`` holds a Markdown or text report, not a JSON dump.
    """
    if not path.is_file() or path.suffix == ".json":
        return  # load() says what is wrong with it (a FIFO must not be opened here)
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            head = fh.read(200).lstrip()
    except OSError:
        return  # load() says what is wrong with it
    kind = next((what for start, what in _REPORT_HEADS.items() if head.startswith(start)), None)
    if kind is None:
        return
    beside = path.with_suffix(".json")
    fix = (f"Pass the JSON dump beside it: `hangscope show {beside}`." if beside.is_file() else
           "`show` reads the JSON dump: write one with `hangscope dump PID --format json -o "
           "dump.json` (attach's `s` key saves both, side by side).")
    raise DumpFileError(f"{path} is {kind} (what `dump` prints), not a JSON dump.",
                        help_text=fix)
