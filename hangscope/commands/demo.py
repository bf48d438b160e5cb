"""``hangscope demo [NAME]``: start a real hung job, diagnose it, and clean it up.

Demos: mismatch (default: 4 gloo ranks, one in all_gather while the others all_reduce),
sglang (an SGLang-style server whose schedulers never report ready), deadlock (two threads,
lock-order inversion), straggler (one rank spins in Python while the others wait), torchrun
(the mismatch ranks launched by torchrun). Needs the `demo` extra (torch, setproctitle).
`--keep` leaves the demo hung after its report, so that `hangscope dump PID` and
`hangscope attach PID` can be tried on it; Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    from hangscope.commands.dump import add_sampling_arguments, plain
    from hangscope.render.output import FORMATS

    parser = sub.add_parser("demo", help="run a bundled hung job and diagnose it",
                            description=plain(__doc__),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", default="mismatch",
                        help="which demo (default mismatch)")
    parser.add_argument("--list", action="store_true", help="list the demos and exit")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text",
                        help="the report's format (default %(default)s)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the demo hung after the report, until Ctrl-C: try "
                        "`hangscope dump PID` or `hangscope attach PID` on it from another "
                        "terminal")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (0600)")
    parser.add_argument("--attach", action="store_true",
                        help="open the live TUI on the demo instead of printing one report")
    add_sampling_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hangscope.commands.dump import options_from
    from hangscope.errors import ToolMissing, UsageError
    from hangscope.live.sampler import Sampler
    from hangscope.render.output import emit

    try:
        from hangscope.demo.jobs import DEMOS, running_demo
    except ImportError as exc:  # torch or setproctitle missing
        raise ToolMissing(f"The demos need the demo extra ({exc.name} is missing).",
                          help_text="pip install 'hangscope[demo]' (torch, setproctitle)"
                          ) from None
    if args.list:
        for spec in DEMOS.values():
            print(f"{spec.name:<10} {spec.description}")
        return 0
    if args.name not in DEMOS:
        raise UsageError(f"No demo named {args.name!r}: choose from {', '.join(DEMOS)}.")
    options = options_from(args)
    if args.attach:  # before a demo starts for nothing
        from hangscope.commands.attach import need_terminal

        need_terminal("demo --attach")
    from hangscope.cli import warn_no_redact

    warn_no_redact(options.redact)
    print(f"hangscope: starting demo {args.name!r} and waiting until it hangs...", file=sys.stderr)
    with running_demo(args.name) as job:
        command = "attach" if args.attach else "dump"
        # A whole sentence: "diagnosing it as `hangscope dump PID` would" read as cut off.
        doing = "opening the live view" if args.attach else "diagnosing it"
        print(f"hangscope: demo is hung (launcher PID {job.pid}); {doing}, as "
              f"`hangscope {command} {job.pid}` does.", file=sys.stderr)
        sampler = Sampler(job.pid, options)
        if args.attach:
            from hangscope.tui.app import run_live

            code = run_live(sampler, interval=2.0, save_dir=".")
        else:
            emit(sampler.snapshot(), args.format, args.output, native=options.native)
            code = 0
        if args.keep:
            _keep(job.pid)
    print("hangscope: demo stopped and cleaned up.", file=sys.stderr)
    return code


def _keep(pid: int) -> None:
    """``--keep``: hold the demo hung until Ctrl-C (the demo is then stopped and cleaned up)."""
    import signal

    print(f"hangscope: the demo stays hung (launcher PID {pid}): try `hangscope dump {pid}` "
          f"or `hangscope attach {pid}` in another terminal; Ctrl-C here stops it.",
          file=sys.stderr, flush=True)
    try:
        signal.pause()  # until Ctrl-C (SIGINT), which is how --keep is meant to end
    except KeyboardInterrupt:
        print(file=sys.stderr)
