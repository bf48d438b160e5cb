"""``hangscope watch PID``: watch a job for its whole life and capture the hang when it starts.

Runs beside the job (in tmux, in a batch script before `srun`, as a sidecar) with nothing set
at the job's launch. While the job progresses nothing is paused: each pulse reads Python lines
with py-spy record --nonblocking at a low rate, kernel counters and GPU activity. When one of
the job's working processes has waited in one place for --after seconds, or a rank dies while
the others run, hangscope writes one full dump (JSON and Markdown) to --out, prints one line,
and runs --on-hang CMD with the report's paths ($1: JSON, $2: Markdown). Then it keeps
watching: it says when the job recovers (the capture was a slow phase), captures again when the
hang changes shape, and ends with the job.

A job that spans nodes: --nodes NODESET (ssh), --slurm-job JOB (srun --overlap) or --pods
PODSET (kubectl exec) starts one watcher on every node (shipped where hangscope is missing)
that pauses nothing and captures nothing; when any node's wait lasts --after seconds, or a
rank dies on a node, one capture of the whole job is taken from every node at once, as
`hangscope dump --nodes` takes it. A node that cannot be reached is said in one line and the
watch goes on with the others; Ctrl-C or SIGTERM ends every node's watcher.

Exit codes: 0 the job ended and no hang was captured; 8 a hang was captured (the job ended
since, or --exit-on-hang); 1 no node could be watched; 2 bad usage; 3 no such process; 130
interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from hangscope.collect import procfs
from hangscope.errors import ProcessNotFound, UsageError

if TYPE_CHECKING:
    from hangscope.live.node_events import NodeEvents
    from hangscope.live.watch import Watch
    from hangscope.remote.multiwatch import MultiWatch


def add_parser(sub: argparse._SubParsersAction) -> None:
    from hangscope.commands.dump import add_kernel_arguments, add_sampling_arguments
    from hangscope.commands.nodes import add_arguments as add_node_arguments

    parser = sub.add_parser("watch", help="watch a job and capture the hang when it starts",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pid", nargs="?", help="PID of the launcher or of any rank")
    parser.add_argument("--after", type=float, default=60.0, metavar="SECONDS",
                        help="a wait this long is a hang (default 60: well under NCCL's "
                        "10-minute watchdog and the engines' 300 s)")
    parser.add_argument("--interval", type=float, default=5.0, metavar="SECONDS",
                        help="how often the job is looked at, without pausing it (default 5)")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="where captures are written (default: the current directory)")
    parser.add_argument("--on-hang", metavar="CMD",
                        help="shell command run after each capture, with the JSON and "
                        "Markdown paths as $1 and $2 (and HANGSCOPE_REPORT_JSON/_MD)")
    parser.add_argument("--max-captures", type=int, default=5, metavar="N",
                        help="at most N captures over the watch (default 5)")
    parser.add_argument("--exit-on-hang", action="store_true",
                        help="stop after the first capture (exit 8)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="one line per pulse: the longest wait so far")
    # The watcher a multi-node watch starts on each node (live/node_events.py): JSON lines.
    parser.add_argument("--events", action="store_true", help=argparse.SUPPRESS)
    add_sampling_arguments(parser)
    add_kernel_arguments(parser)  # read at a capture only: a pulse never pauses a rank
    add_node_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hangscope.cli import parse_pid, warn_no_redact
    from hangscope.commands.dump import options_from
    from hangscope.commands.nodes import request_from, wanted
    from hangscope.live.watch import Watch, WatchOptions
    from hangscope.remote.find import find_job_pid, parse_spec

    multinode = wanted(args)
    if args.pid is None and not args.find and not args.slurm_job:
        raise UsageError("Give the PID of the job's launcher or of any rank, or --find SPEC.")
    if multinode and args.events:
        raise UsageError("--events is the watcher on one node: give it no node set.")
    if not 1 <= args.after <= 86_400:
        raise UsageError("--after must be between 1 and 86400 seconds.")
    if not 0.5 <= args.interval <= 600:
        raise UsageError("--interval must be between 0.5 and 600 seconds.")
    if args.interval > args.after:
        raise UsageError(f"--interval ({args.interval:g} s) must not be longer than --after "
                         f"({args.after:g} s): a hang is seen only once a pulse ends.")
    if args.max_captures < 1:
        raise UsageError("--max-captures must be at least 1.")
    pid = parse_pid(args.pid) if args.pid is not None else None
    if pid is not None and multinode and procfs.read_stat(pid) is None:
        # Before the node set's own messages, which would blame the job's environment.
        raise ProcessNotFound(f"No process with PID {pid} exists on this node.",
                              "Give the PID of the job's launcher or of a rank here, or "
                              "--find SPEC without a PID.")
    if pid is None and not multinode and not args.events:
        pid = find_job_pid(parse_spec(args.find))
    sampling = options_from(args)
    if not args.events:
        warn_no_redact(sampling.redact)
    options = WatchOptions(after=args.after, interval=args.interval, out=Path(args.out),
                           on_hang=args.on_hang, max_captures=args.max_captures,
                           exit_on_hang=args.exit_on_hang, verbose=args.verbose,
                           sampling=sampling)
    watch: Watch | MultiWatch | NodeEvents
    if multinode:
        from hangscope.remote.multiwatch import MultiWatch

        watch = MultiWatch(request_from(args, pid, sampling), pid, options, say=_say)
    elif args.events:
        from hangscope.live.node_events import NodeEvents
        from hangscope.remote.find import find_python_pid

        # Started before the job (a batch script before `srun`): it waits for the job here.
        spec = parse_spec(args.find) if args.find else None
        watch = NodeEvents((lambda: pid) if spec is None
                           else (lambda: find_python_pid(spec)), options)
    else:
        assert pid is not None
        watch = Watch(pid, options, say=_say)

    def stop(signum: int, frame: FrameType | None) -> None:
        watch.stop()

    # SIGTERM (a sidecar's end, `kill`) ends the watch as cleanly as the job's own end.
    signal.signal(signal.SIGTERM, stop)
    return watch.run()


def _say(line: str) -> None:
    print(f"hangscope watch {datetime.now():%H:%M:%S} {line}", flush=True)
    sys.stdout.flush()
