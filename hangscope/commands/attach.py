"""``hangscope attach PID``: a live TUI over the job, sampling in the background.

Keys: space pause/resume, r sample now, n native frames, d diff two ranks, s save a report,
/ filter, ? help, q quit. Run it in tmux over SSH; it works at 80x24 and honours NO_COLOR.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from hangscope.commands.dump import add_sampling_arguments

    parser = sub.add_parser("attach", help="open the live TUI on a job",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pid", help="PID of the launcher or of any rank")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between samples (default 2)")
    parser.add_argument("--save-dir", default=".", metavar="DIR",
                        help="where `s` saves reports (default: the current directory)")
    add_sampling_arguments(parser)
    parser.set_defaults(func=run, samples=2, window=1.0)


def run(args: argparse.Namespace) -> int:
    from hangscope.cli import parse_pid, warn_no_redact
    from hangscope.commands.dump import options_from
    from hangscope.errors import UsageError
    from hangscope.sampler import Sampler
    from hangscope.tui.app import run_live

    pid = parse_pid(args.pid)
    if not 0.2 <= args.interval <= 3600:
        raise UsageError("--interval must be between 0.2 and 3600 seconds.")
    options = options_from(args)
    warn_no_redact(options.redact)
    sampler = Sampler(pid, options)  # validates the PID before the screen opens
    return run_live(sampler, interval=args.interval, save_dir=args.save_dir)
