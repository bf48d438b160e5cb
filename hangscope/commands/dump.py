"""``hangscope dump PID``: diagnose a hung job once and print the report.

Samples every process of the job that PID belongs to over a short window, then prints the
verdict, findings, the groups of ranks with a representative stack each, and a table of every
process. With --nodes/--slurm-job/--pods it does the same on every node of a multi-node job
(over ssh, srun --overlap or kubectl exec) and merges the answers; nodes that do not answer
are named, and the verdict comes from the others. ``--format md`` pastes into a GitHub issue;
``--format json`` is the versioned schema.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hangscope import phases
from hangscope.commands.nodes import add_arguments, request_from, wanted
from hangscope.errors import UsageError
from hangscope.render import FORMATS

if TYPE_CHECKING:
    from hangscope.live.sampler import SampleOptions


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``dump``, ``attach`` and ``demo``."""
    parser.add_argument("--samples", type=int, default=3, metavar="K",
                        help="stack samples per process over the window (default %(default)s)")
    parser.add_argument("-w", "--window", type=float, default=2.0, metavar="SECONDS",
                        help="how long to watch: tells stuck (same stack) from slow "
                        "(default %(default)s); where every Python thread of the job had "
                        "already been asleep that long, each in a wait with no timeout, it "
                        "ends once 1 s of it shows nothing moving")
    parser.add_argument("--whole-window", dest="settle", action="store_false",
                        help="watch the whole window even where the job's silence before it "
                        "covers it")
    parser.add_argument("--no-native", dest="native", action="store_false",
                        help="Python stacks only (faster; no C++/CUDA/NCCL frames)")
    parser.add_argument("--nonblocking", action="store_true",
                        help="never pause the targets (py-spy --nonblocking; Python only, "
                        "stacks may be torn)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="per-process py-spy timeout (default %(default)s)")
    parser.add_argument("--no-redact", dest="redact", action="store_false",
                        help="DANGER: keep tokens, keys and passwords in the report")
    parser.add_argument("--no-fr-trigger", dest="fr_trigger", action="store_false",
                        help="do not ask the ranks for a Flight Recorder dump: by default, "
                        "where a rank has TORCH_NCCL_DEBUG_INFO_PIPE_FILE set, hangscope writes "
                        "to its pipe once, which makes the job write dump files "
                        "(TORCH_FR_DUMP_TEMP_FILE<rank>); dumps already on disk are still read")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="do not measure progress over the window (py-spy record at 100 Hz "
                        "without pausing, kernel counters, GPU GPM): stuck or moving then "
                        "comes from the stack samples alone")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="parallel py-spy runs (default: native dumps one per core, "
                        "Python-only two per core, at most 32)")


def plain(doc: str | None) -> str:
    """A docstring as help text: code in single backticks (a terminal is not RST)."""
    return (doc or "").replace("``", "`")


def add_pid_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``PID`` or ``-p/--pid PID`` (py-spy's spelling): either names the job."""
    parser.add_argument("pid", nargs="?", help=what)
    parser.add_argument("-p", "--pid", dest="pid_flag", metavar="PID",
                        help="the same as the PID argument (py-spy's spelling)")


def pid_of(args: argparse.Namespace) -> int | None:
    """The PID given as an argument or with --pid; both: they must agree."""
    from hangscope.cli import parse_pid

    given = [parse_pid(v) for v in (args.pid, getattr(args, "pid_flag", None)) if v is not None]
    if len(set(given)) > 1:
        raise UsageError(f"Two PIDs given ({given[0]} and --pid {given[1]}): give one.")
    return given[0] if given else None


def options_from(args: argparse.Namespace) -> SampleOptions:
    from hangscope.live.sampler import SampleOptions

    if args.samples < 1 or args.samples > 100:
        raise UsageError("--samples must be between 1 and 100.")
    if not 0 <= args.window <= 600:
        raise UsageError("--window must be between 0 and 600 seconds.")
    if not 0.1 <= args.timeout <= 600:
        raise UsageError("--timeout must be between 0.1 and 600 seconds.")
    workers = getattr(args, "workers", None)
    if workers is not None and not 1 <= workers <= 256:
        raise UsageError("--workers must be between 1 and 256.")
    kernels = getattr(args, "kernels", False)
    if kernels and args.nonblocking:
        raise UsageError("--kernels pauses the ranks it reads (cuda-gdb attaches): it cannot "
                         "go with --nonblocking.")
    kernels_timeout = getattr(args, "kernels_timeout", 30.0)
    if not 1 <= kernels_timeout <= 600:
        raise UsageError("--kernels-timeout must be between 1 and 600 seconds.")
    return SampleOptions(samples=args.samples, window=args.window, native=args.native,
                         timeout=args.timeout, nonblocking=args.nonblocking,
                         redact=args.redact, fr_trigger=getattr(args, "fr_trigger", True),
                         progress=getattr(args, "progress", True), kernels=kernels,
                         kernels_timeout=kernels_timeout, workers=workers,
                         settle=getattr(args, "settle", True))


def add_kernel_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kernels``: name the CUDA kernel a stuck rank's spinning GPU runs (cuda-gdb)."""
    parser.add_argument("--kernels", action="store_true",
                        help="name the CUDA kernel on each rank that is already stuck while "
                        "its GPU spins: runs cuda-gdb -batch -p PID -ex 'info cuda kernels' "
                        "-ex detach, which PAUSES EACH SUCH RANK FOR SECONDS (8-11 s on an "
                        "H200), in parallel, then checks it runs again; other ranks are not "
                        "touched")
    parser.add_argument("--kernels-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="hard deadline for cuda-gdb per rank (default 30)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("dump", help="diagnose a hung job once and print the report",
                            description=plain(__doc__),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pid_arguments(parser, "PID of the launcher or of any rank (or --find on every node)")
    parser.add_argument("--format", "-f", choices=(*FORMATS, "svg"), default="text",
                        help="the report's format (default %(default)s); svg (multi-node or "
                        "--find): the merged call tree as a picture")
    parser.add_argument("--json", dest="format", action="store_const", const="json",
                        help="the same as --format json")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (0600)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print where the dump's time went (start, imports, discovery, "
                        "py-spy, window, analysis, render) on stderr")
    add_sampling_arguments(parser)
    add_kernel_arguments(parser)
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported where needed, not at the top: the parser of every command imports this module,
    # and a cold dump pays for each import before its first py-spy can start (issue 22); the
    # renderers are imported on a sampler thread while py-spy runs.
    from hangscope.cli import warn_no_redact
    from hangscope.live.sampler import Sampler

    phases.mark("imports")
    pid = pid_of(args)
    options = options_from(args)
    warn_no_redact(options.redact)
    if wanted(args):
        from hangscope.remote.multinode import dump_everywhere

        snap = dump_everywhere(request_from(args, pid, options), pid)
    else:
        if pid is None:
            if not args.find:
                raise UsageError("Give the PID of the job's launcher or of any rank, or "
                                 "--find SPEC.")
            from hangscope.remote.find import find_job_pid, parse_spec

            pid = find_job_pid(parse_spec(args.find))
        snap = Sampler(pid, options).snapshot()
    if wanted(args) or args.format == "svg":
        from hangscope.commands.merge import emit_merged

        emit_merged(snap, args.format, args.output, native=options.native)
        return 0
    from hangscope.render.output import emit

    emit(snap, args.format, args.output, native=options.native)
    phases.mark("render")
    if args.verbose:
        phases.report()
    return 0
