"""``hangscope attach PID``: a live TUI over the job, sampling in the background.

With --nodes/--slurm-job/--pods every refresh samples every node in parallel and shows the
merged job. Run it in tmux over SSH (`ssh -t`: it needs a terminal); it works at 80x24 and
honours NO_COLOR. Without a terminal, `hangscope dump PID` prints one report.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from hangscope.commands.dump import add_pid_arguments, add_sampling_arguments, plain
    from hangscope.commands.nodes import add_arguments
    from hangscope.tui.keys import KEYS

    keys = "\n".join(f"  {key:<14} {what}" for key, what in KEYS)
    parser = sub.add_parser("attach", help="open the live TUI on a job",
                            description=f"{plain(__doc__)}\nKeys:\n{keys}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pid_arguments(parser, "PID of the launcher or of any rank (optional with --nodes "
                      "and --find, --slurm-job or --pods)")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between samples (default %(default)s)")
    parser.add_argument("--save-dir", default=".", metavar="DIR",
                        help="where `s` saves reports (default: the current directory)")
    add_sampling_arguments(parser)
    add_arguments(parser)
    parser.set_defaults(func=run, samples=2, window=1.0)


def need_terminal(command: str) -> None:
    """Refuse to open the TUI where no one can see or drive it.

    Without a terminal (``ssh node hangscope attach PID`` without ``-t``, a pipe, a script)
    the screen would write escape codes until killed.

    Raises:
        UsageError: stdin or stdout is not a terminal.
    """
    import sys

    from hangscope.errors import UsageError

    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if stream is None or not stream.isatty()]
    if missing:
        raise UsageError(
            f"`hangscope {command}` opens a live screen and needs a terminal, but "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not one (ssh "
            "without -t, a pipe or a script).",
            help_text="Over ssh add -t: `ssh -t NODE hangscope attach PID`; in a script, "
            "`hangscope dump PID` prints one report (--format json for a program).")


def run(args: argparse.Namespace) -> int:
    from hangscope.cli import warn_no_redact
    from hangscope.commands.dump import options_from, pid_of
    from hangscope.commands.nodes import request_from, wanted
    from hangscope.errors import UsageError
    from hangscope.live.sampler import Sampler
    from hangscope.remote.find import find_job_pid, parse_spec
    from hangscope.remote.multinode import MultiNodeSampler
    from hangscope.tui.app import run_live
    from hangscope.tui.source import SnapshotSource

    pid = pid_of(args)
    if not 0.2 <= args.interval <= 3600:
        raise UsageError("--interval must be between 0.2 and 3600 seconds.")
    options = options_from(args)
    warn_no_redact(options.redact)
    if wanted(args):
        # Every node, every refresh: the TUI shows the merged job (processes keyed by host).
        source: SnapshotSource = MultiNodeSampler(request_from(args, pid, options), pid)
    else:
        if pid is None:
            pid = find_job_pid(parse_spec(args.find)) if args.find else None
        if pid is None:
            raise UsageError("Give the PID of the job's launcher or of any rank, or --find.")
        source = Sampler(pid, options)  # validates the PID before the screen opens
    need_terminal("attach")
    return run_live(source, interval=args.interval, save_dir=args.save_dir)
