"""Kernel messages about the job: ``dmesg | grep -E 'oom-kill|Killed process|NVRM: Xid|segfault'``.

Reads the whole kernel ring buffer in one ``klogctl(SYSLOG_ACTION_READ_ALL)`` call (what
``dmesg`` does), else ``/dev/kmsg`` without blocking (one record per read, until ``EAGAIN``),
bounded in records and time and keeping the newest records: under a flood of messages the
lines that explain *this* hang are the last ones. Keeps only what can explain a hang:
OOM-killer lines, GPU Xid lines, segfaults and hung-task warnings, and of those only the ones
that name one of the job's PIDs or that were logged after the job started (an OOM-killed rank
is gone, so its PID is no longer in the job).
No permission (``kernel.dmesg_restrict``, a container without ``/dev/kmsg``) gives no lines
and a note that says the kernel log was not checked (``read``).

``HANGSCOPE_KMSG=FILE`` reads a saved log instead: ``/dev/kmsg`` records or ``dmesg`` lines
(``[  123.456] text``), with times since this machine booted.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import os
import re
import time
from collections.abc import Collection
from datetime import datetime, timezone

from hangscope.collect import procfs
from hangscope.redact import redact_text

KMSG = "/dev/kmsg"
ENV_OVERRIDE = "HANGSCOPE_KMSG"
#: At most this many records are read, and for at most this long.
MAX_RECORDS = 200_000
MAX_SECONDS = 1.0
#: The last this many matching lines are kept.
MAX_KEPT = 50
_READ_SIZE = 8192  # a /dev/kmsg read must hold a whole record, or it fails with EINVAL

# The lines that matter. The OOM report's task table ("[  1234]  0  1234 ...") is left out:
# it lists every process on the machine.
RELEVANT = re.compile(
    r"invoked oom-killer|Out of memory|oom-kill:|Killed process|oom_reaper"
    r"|NVRM: Xid|\bsegfault at\b|general protection fault|\btraps:"
    r"|blocked for more than \d+ seconds"
)
_PID_MENTION = re.compile(
    r"(?:\bpid[=: ]\s*|Killed process |reaped process |\[|task [^:\s]+:)(\d+)")
_KMSG_RECORD = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
_DMESG_LINE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")


def boot_time() -> float | None:
    """When this machine booted, seconds since the epoch (``btime`` of /proc/stat)."""
    return procfs.read_btime()


class Unreadable(Exception):
    """The kernel log could not be read; the message says why (for the snapshot's notes)."""


_SYSLOG_ACTION_READ_ALL = 3
_SYSLOG_ACTION_SIZE_BUFFER = 10
_SYSLOG_PREFIX = re.compile(r"^<\d+>")


def _records_from_klogctl() -> list[str]:
    """The whole ring buffer, oldest to newest, in one syscall (``dmesg``'s own way)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        size = libc.klogctl(_SYSLOG_ACTION_SIZE_BUFFER, None, 0)
        if size <= 0:
            raise Unreadable(os.strerror(ctypes.get_errno() or errno.EPERM))
        buf = ctypes.create_string_buffer(size)
        got = libc.klogctl(_SYSLOG_ACTION_READ_ALL, buf, size)
    except (OSError, AttributeError) as exc:  # no libc.klogctl (not Linux)
        raise Unreadable(str(exc)) from None
    if got < 0:
        raise Unreadable(os.strerror(ctypes.get_errno() or errno.EPERM))
    text = buf.raw[:got].decode("utf-8", errors="replace")
    lines = [_SYSLOG_PREFIX.sub("", line) for line in text.splitlines()]
    return lines[-MAX_RECORDS:]


def _records_from_device(path: str) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror}") from None
    # A deque keeps the newest MAX_RECORDS: /dev/kmsg reads from the oldest record on.
    out: collections.deque[str] = collections.deque(maxlen=MAX_RECORDS)
    deadline = time.monotonic() + MAX_SECONDS
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                break  # no more records
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # the ring buffer overwrote the record we were at: go on
                if not out:  # EPERM on the first read: kernel.dmesg_restrict
                    raise Unreadable(f"{path}: {exc.strerror}") from None
                break
            if not chunk:
                break
            out.append(chunk.decode("utf-8", errors="replace"))
    finally:
        os.close(fd)
    return list(out)


def _records_from_file(path: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4 * 1024 * 1024))
            raw = fh.read()
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror}") from None
    return raw.decode("utf-8", errors="replace").splitlines()[-MAX_RECORDS:]


def _parse(record: str) -> tuple[float | None, str]:
    """(seconds since boot, message) of one /dev/kmsg record or dmesg line."""
    first = record.split("\n", 1)[0]  # continuation lines (" SUBSYSTEM=...") are not wanted
    m = _KMSG_RECORD.match(first)
    if m:
        return int(m.group(3)) / 1e6, m.group(4)
    m = _DMESG_LINE.match(first)
    if m:
        return float(m.group(1)), m.group(2)
    return None, first


def select(records: list[str], pids: Collection[int], since: float | None,
           booted: float | None) -> tuple[str, ...]:
    """The relevant lines about ``pids`` or after ``since``, as ``ISO-TIME message``."""
    kept: list[str] = []
    for record in records:
        uptime, message = _parse(record)
        message = message.strip()
        if not message or not RELEVANT.search(message):
            continue
        mentioned = {int(p) for p in _PID_MENTION.findall(message)}
        wall = booted + uptime if booted is not None and uptime is not None else None
        recent = since is not None and wall is not None and wall >= since - 1.0
        if not (mentioned & set(pids)) and not recent:
            continue
        stamp = (datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="seconds")
                 if wall is not None else "?")
        kept.append(f"{stamp} {redact_text(message)}")
    return tuple(kept[-MAX_KEPT:])


def _records() -> list[str]:
    """The kernel log's records, newest last. Raises Unreadable with both reasons."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        return _records_from_file(override)
    try:
        records = _records_from_klogctl()
        # Without printk times (printk.time=0) the lines cannot be placed in time: the
        # records of /dev/kmsg always carry one.
        if not records or _DMESG_LINE.match(records[-1]):
            return records
    except Unreadable as exc:
        first = str(exc)
    else:
        first = "klogctl lines carry no time"
    try:
        return _records_from_device(KMSG)
    except Unreadable as exc:
        raise Unreadable(f"{exc} (klogctl: {first})") from None


def read(pids: Collection[int], since: float | None) -> tuple[tuple[str, ...], str | None]:
    """(OOM, Xid, segfault and hung-task lines about the job, a note when the log could not
    be read): ``dmesg -T | grep -E 'oom-kill|Xid|segfault|blocked for more than'``."""
    try:
        records = _records()
    except Unreadable as exc:
        return (), (f"kernel log not checked: {redact_text(str(exc))}; OOM kills, GPU Xid "
                    "errors and hung tasks could not be looked for (a container without "
                    "CAP_SYSLOG, or kernel.dmesg_restrict=1: run `sudo dmesg -T | tail -50` "
                    "on the host).")
    return select(records, pids, since, boot_time()), None
