"""The tail of each rank's log file: ``tail -c 64K FILE | tail -n 20``, and ``grep Error``.

When a rank's stdout or stderr is a regular file (``Process.log_files``, from ``/proc/PID/fd``),
its last lines and its error-looking lines say what the rank last did, often why it is stuck.
Reads are bounded (the last 64 KiB of each file), never follow the file, and every line goes
through the redactor before it is stored. A file that cannot be read gives nothing.
"""

from __future__ import annotations

import os
import re
import stat as stat_mod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from hangscope.collect import procfs
from hangscope.model import Process
from hangscope.redact import redact_text

#: How much of the end of a file is read.
TAIL_BYTES = 64 * 1024
#: How many of the last lines are kept per file.
TAIL_LINES = 20
#: How many error-looking lines are kept per file (the last ones).
ERROR_LINES = 16
#: Longer lines are cut: a log line is evidence, not a payload.
MAX_LINE_CHARS = 300

# Lines that usually say what went wrong: Python exceptions, CUDA/NCCL errors, OOMs, kills,
# timeouts. Case matters where the word is common in healthy logs ("error" in "error_rate").
ERROR_PATTERN = re.compile(
    r"Traceback \(most recent call last\)"
    # threading.excepthook's line for a thread that died of an exception (it names the thread)
    r"|^Exception in thread \S"
    r"|\b[A-Z]\w*(?:Error|Exception)\b"
    r"|\bCUDA error\b|\bNCCL (?:WARN|ERROR)\b|\bncclSystemError\b|\bncclInternalError\b"
    # a c10d collective that failed: the error, NCCL's reason, the watchdog's state
    r"|\bncclInvalidUsage\b|\bncclRemoteError\b|\bncclUnhandledCudaError\b|message truncated"
    r"|raised the following async exception|failure detected by watchdog"
    r"|\bout of memory\b|\bOOM\b|\bOutOfMemory"
    r"|\bKilled\b|\bSegmentation fault\b|\bcore dumped\b|\bAborted\b"
    r"|\btimed out\b|\bTimeout\b|\bWatchdog caught\b|\bdeadlock\b"
    # ("error: 0", a counter of none, is no error: Ray's raylet logs its counters so)
    r"|\b(?:ERROR|FATAL|CRITICAL)\b|\berror:(?!\s*0\b)"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


@dataclass(frozen=True)
class LogTail:
    """What one log file says: its last lines and its error-looking lines, redacted."""

    path: str
    tail: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    modified: float | None = None  # the file's mtime (seconds since the epoch)
    size: int | None = None


def _clean(line: str) -> str:
    line = _ANSI.sub("", line)
    # A progress bar rewrites its line with "\r": what the terminal shows is the last part.
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    line = "".join(ch if ch.isprintable() or ch == "\t" else "?" for ch in line).rstrip()
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS - 1] + "…"
    return line


# c10d prints the Python stack of a failed collective ("Stack trace of the failed collective:",
# then "#17 step from /srv/train.py:78" lines): its first frame outside the libraries is the
# call site, kept with the error lines.
#: A process named by its PID in a log line ("held by pid 4242", "owner PID=4242"): a log
#: that says whom the job waits for.
_NAMED_PID = re.compile(r"\bpid\b\s*[=:#]?\s*(\d{2,7})\b", re.IGNORECASE)
_FAILED_STACK = "Stack trace of the failed collective"
_STACK_LINE = re.compile(r"^#\d+ \S+ from (\S+):\d+$")


def _error_lines(lines: Sequence[str]) -> list[str]:
    out: list[str] = []
    in_stack = False
    for line in lines:
        if ERROR_PATTERN.search(line):
            out.append(line)
        if _FAILED_STACK in line:
            in_stack = True
            continue
        if in_stack:
            found = _STACK_LINE.match(line)
            if found is None:
                in_stack = False
            elif "site-packages" not in found.group(1) and "/lib/python" not in found.group(1):
                out.append(line)
                in_stack = False
    return out


_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x08\x1b")


def _binary(raw: bytes) -> bool:
    """More than one byte in 20 is a control byte no text has, or does not decode as UTF-8:
    compressed or packed data (a log's colours and progress bars stay well below that)."""
    if not raw:
        return False
    controls = sum(1 for b in raw if b < 0x20 and b not in _TEXT_CONTROLS)
    undecoded = raw.decode("utf-8", errors="replace").count("\ufffd")
    return (controls + undecoded) * 20 > len(raw)


def read_tail(path: str, redact: bool = True) -> LogTail | None:
    """The last lines and the error lines of one regular file; None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        start = max(0, st.st_size - TAIL_BYTES)
        raw = os.pread(fd, TAIL_BYTES, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if _binary(raw[-4096:]):
        return None  # a program's binary output on fd 1 (``xz -c > shard.xz``), not a log
    text = raw.decode("utf-8", errors="replace").replace("\x00", "")
    scrub: Callable[[str], str] = redact_text if redact else (lambda s: s)
    # Redact the window as a whole: a secret can span lines (a PEM private key's body).
    text = scrub(text)
    lines = text.split("\n")
    if start > 0 and lines:
        lines = lines[1:]  # the first line was cut by the 64 KiB window
    cleaned = [_clean(line) for line in lines]
    cleaned = [line for line in cleaned if line.strip()]
    tail = tuple(scrub(line) for line in cleaned[-TAIL_LINES:])
    errors = tuple(scrub(line) for line in _error_lines(cleaned))[-ERROR_LINES:]
    return LogTail(path=path, tail=tail, errors=errors, modified=st.st_mtime, size=st.st_size)


def read_tails(paths: Iterable[str], redact: bool = True) -> dict[str, LogTail]:
    """Each distinct path read once (eight ranks often share one log file)."""
    out: dict[str, LogTail] = {}
    for path in dict.fromkeys(paths):
        found = read_tail(path, redact=redact)
        if found is not None:
            out[path] = found
    return out


def attach_tails(procs: Sequence[Process], redact: bool = True) -> list[Process]:
    """Each process with the tail of the log files on its stdout/stderr."""
    tails = read_tails((f for p in procs for f in p.log_files), redact=redact)
    out = []
    for proc in procs:
        found = [tails[f] for f in proc.log_files if f in tails]
        if not found:
            out.append(proc)
            continue
        written = [t for t in found if t.tail]
        if len(written) <= 1:
            tail = written[0].tail if written else ()
        else:  # stdout and stderr in two files: both, headed like ``tail f1 f2``
            tail = tuple(line for t in written for line in (f"==> {t.path} <==", *t.tail))
        errors = tuple(line for t in found for line in t.errors)
        modified = max((t.modified for t in found if t.modified is not None), default=None)
        out.append(replace(proc, log_tail=tail, log_errors=errors, log_modified=modified,
                           log_gone_pids=gone_pids(tail[-ERROR_LINES:])))
    return out


def gone_pids(lines: Sequence[str]) -> tuple[int, ...]:
    """The PIDs the lines name ("held by pid 4242") that no process has now: read at the dump,
    since a saved report cannot ask /proc later."""
    named = dict.fromkeys(int(m) for line in lines for m in _NAMED_PID.findall(line))
    return tuple(pid for pid in named if pid > 1 and not procfs.exists(pid))
