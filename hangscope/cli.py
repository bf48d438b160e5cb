"""The ``hangscope`` command line: the one place that turns errors into messages and exit codes.

Exit codes: see hangscope/errors.py and README.md ("Exit codes").
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from hangscope import __version__, phases
from hangscope.errors import FIND_PID_HINT, HangscopeError, UsageError

COMMANDS = ("dump", "attach", "watch", "show", "demo", "merge")


def parse_pid(text: str) -> int:
    """A PID from the command line.

    Raises:
        UsageError: not a whole number in the range of process IDs.
    """
    try:
        pid = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{text!r} is not a process ID: give a number such as 12345.",
                         help_text=f"{FIND_PID_HINT}.") from None
    if pid <= 0:
        raise UsageError(f"{pid} is not a process ID: process IDs are positive numbers.")
    if pid > 4_194_304:  # PID_MAX_LIMIT on 64-bit Linux
        raise UsageError(f"{pid} is larger than any process ID Linux hands out (4194304).")
    return pid


def warn_no_redact(redact: bool) -> None:
    if not redact:
        print("hangscope: WARNING: --no-redact is set: tokens, API keys and passwords from the "
              "job's environment, command lines and logs will appear in this report. Do not "
              "paste it anywhere public.", file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse exits 2 with usage; keep that, but through our one error path.
        raise UsageError(f"{message}. See `{self.prog} --help`.")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the named command's module is imported where argv names one (each
    command's imports cost a cold dump tens of milliseconds), every command's for help."""
    parser = _Parser(prog="hangscope",
                     description="Find out why a multi-process (GPU) Python job is hung.")
    parser.add_argument("--version", action="version", version=f"hangscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    named = [a for a in argv[:1] if a in COMMANDS]
    for name in named or COMMANDS:
        module = importlib.import_module(f"hangscope.commands.{name}")
        module.add_parser(sub)
    return parser


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: a second one is ignored (cleaning up takes a blink, and it must not reach the
    shell as a traceback), every py-spy ends now, then KeyboardInterrupt unwinds the command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from hangscope.collect.pyspy import stop_all

    stop_all()
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run hangscope; return the exit code."""
    args: argparse.Namespace | None = None
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _interrupted)
    try:
        phases.mark("start")
        arguments = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(arguments)
        phases.mark("parser")
        args, extra = parser.parse_known_args(arguments)
        if extra:  # argparse would point at the top-level help, not the command's
            where = f"hangscope {args.command}" if getattr(args, "command", None) else "hangscope"
            raise UsageError(f"unrecognized argument{'s' if len(extra) > 1 else ''}: "
                             f"{' '.join(extra)}. See `{where} --help`.")
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except HangscopeError as exc:
        partial = getattr(exc, "snapshot", None)
        if partial is not None:
            _emit_partial(partial, args)
        print(f"hangscope: error: {exc.message}", file=sys.stderr)
        if exc.help_text:
            print(f"hangscope: fix: {exc.help_text}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from hangscope.collect.pyspy import stop_all

        stop_all()  # also where KeyboardInterrupt came without the handler (a TUI's key)
        print("hangscope: interrupted (Ctrl-C): every py-spy stopped, no process was left "
              "paused.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug in hangscope: one sentence, traceback only on request
        if os.environ.get("HANGSCOPE_DEBUG"):
            raise
        print(f"hangscope: internal error: {type(exc).__name__}: {exc}. This is a bug in "
              "hangscope; rerun with HANGSCOPE_DEBUG=1 for the traceback and report it.",
              file=sys.stderr)
        return 1


def _emit_partial(partial: object, args: argparse.Namespace | None) -> None:
    """The partial report of a failed dump, in the format and to the file that were asked for
    (a per-node ``dump --format json -o node.json`` must still leave its file to merge)."""
    from hangscope.render.output import emit

    fmt = getattr(args, "format", None) or "text"
    output = getattr(args, "output", None)
    native = getattr(args, "native", True)
    try:
        emit(partial, fmt, output, native=native)  # type: ignore[arg-type]
    except HangscopeError as exc:  # the file cannot be written: say so, keep the first error
        print(f"hangscope: error: {exc.message}", file=sys.stderr)


def run() -> None:
    """Console-script entry point."""
    from hangscope.bytecode import keep_bytecode

    keep_bytecode()  # before the commands' modules are imported
    code = main()
    if code == 130:
        # Interrupted: leave now. A normal exit would join the sampling threads, and one may
        # wait out a --timeout in a read that Ctrl-C cannot cut short (a RAS socket, NVML).
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    sys.exit(code)
