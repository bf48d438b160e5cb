"""PyTorch Flight Recorder dumps: ``ls /tmp/nccl_trace_rank_*``, and ``echo 1 > PREFIX<rank>.pipe``.

Reads the dumps this job's ranks wrote (the ranks' ``TORCH_FR_DUMP_TEMP_FILE`` /
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix, else torch's default ``/tmp/nccl_trace_rank_``):
regular files only, owned by the job's user, newer than the job's start, at most MAX_BYTES.
Where the ranks were started with ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE``, asks each rank for a
fresh dump through its FIFO (this makes the job write files) and waits for them until the
deadline. Pickles are loaded with an unpickler that refuses every class: a file under /tmp can
be planted by anyone (hangscope/collect/fr_parse.py parses them, pure). Every outcome is an
FrReading with notes; nothing raises.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Sequence

from hangscope.collect import procfs
from hangscope.collect.fr_parse import (  # noqa: F401  (re-exported: the collector's own API)
    MAX_BYTES,
    DumpError,
    call_site,
    load_bytes,
    parse_dump,
)
from hangscope.model import Process, Role
from hangscope.model import nccl as ev

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
# What this collector reads of a rank's environment (collect/procfs.py's allow-list must keep
# them: it drops every other variable).
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
ENV_KEYS = (*PREFIX_VARS, PIPE_VAR, *BUFFER_VARS)
# torch's monitor thread looks at the pipe about once a second, then writes the dump with C++
# stack traces ("Include stack trace: 1"), which it symbolises first: on the H200 (torch 2.11,
# a one-rank NCCL job) no dump had landed 3 s after the trigger. The wait ends as soon as every
# triggered rank's file is there, so a quick rank costs no more.
DEADLINE_S = 8.0
_POLL_S = 0.05
#: Linux's CLOCK_REALTIME_COARSE (not exported by ``time``): the clock file times are taken
#: from, a tick behind ``time.time()``.
_REALTIME_COARSE = 5


def _file_clock() -> float:
    """Now, as the kernel stamps a file written now: a dump written within a tick after a
    ``time.time()`` read can carry an mtime before it, and would read as stale."""
    try:
        return time.clock_gettime(_REALTIME_COARSE)
    except OSError:
        return time.time() - 0.02  # a tick at HZ=100, and some


def read_file(path: str, uid: int | None, not_before: float | None) -> tuple[bytes, float]:
    """A dump file's bytes, refusing links, non-files, other users' and stale files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        reason = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise DumpError(f"cannot be opened ({reason})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DumpError("not a regular file")
        if uid is not None and st.st_uid != uid:
            raise DumpError(f"owned by uid {st.st_uid}, not the job's user ({uid})")
        if not_before is not None and st.st_mtime < not_before:
            raise DumpError("older than the job")
        if st.st_size > MAX_BYTES:
            raise DumpError(f"{st.st_size >> 20} MiB, larger than {MAX_BYTES >> 20} MiB")
        return fh.read(MAX_BYTES + 1), st.st_mtime


def dump_files(prefix: str) -> dict[int, str]:
    """``ls PREFIX[0-9]*``: rank -> path."""
    folder, base = os.path.split(prefix)
    found = {}
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return {}
    for name in names:
        if name.startswith(base) and name[len(base):].isdigit() and len(name) - len(base) < 8:
            found[int(name[len(base):])] = os.path.join(folder, name)
    return found


def poke(pipe: str, uid: int | None) -> str | None:
    """Write one byte into a rank's debug-info FIFO without ever blocking; None when done,
    else why not (no pipe, not a FIFO, no reader, full: the rank does not read it)."""
    try:
        st = os.lstat(pipe)
    except OSError as exc:
        return f"no pipe at {pipe} ({exc.strerror})"
    if not stat.S_ISFIFO(st.st_mode):
        return f"{pipe} is not a FIFO: not written"
    if uid is not None and st.st_uid != uid:
        return f"{pipe} is owned by uid {st.st_uid}, not the job's user: not written"
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return f"nobody reads {pipe} (the rank's monitor thread is gone)"
        return f"cannot open {pipe} ({exc.strerror})"
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return f"{pipe} is not a FIFO: not written"
        os.write(fd, b"1\n")
    except BlockingIOError:
        return f"{pipe} is full: the rank does not read it"
    except OSError as exc:
        return f"writing {pipe} failed ({exc.strerror})"
    finally:
        os.close(fd)
    return None


def _root(proc: Process) -> str:
    """Where the rank's files are seen from here: its root (a container's files), else /."""
    path = f"/proc/{proc.pid}/root"
    return path if os.path.isdir(path) and os.path.realpath(path) != "/" else ""


def _resolve(value: str, proc: Process) -> str:
    if not value.startswith("/"):  # relative to the rank's working directory
        with contextlib.suppress(OSError):
            value = os.path.join(os.readlink(f"/proc/{proc.pid}/cwd"), value)
    return _root(proc) + value


def _uid(procs: Sequence[Process]) -> int | None:
    for proc in procs:
        try:
            return os.stat(f"/proc/{proc.pid}").st_uid
        except OSError:
            continue
    return None


def _pipe_holders(live: Sequence[Process], number: dict[int, int]) -> dict[int, int]:
    """Rank -> PID of each process with no rank number that holds its rank's debug-info pipe
    open (``PREFIX<rank>.pipe``: torch's monitor thread keeps it open to read triggers).
    ``mp.spawn`` ranks carry no RANK; the pipe they opened says which rank each one is."""
    out: dict[int, int] = {}
    taken = set(number.values())
    for proc in live:
        value = proc.environ.get(PIPE_VAR)
        if not value or proc.pid in number or proc.role not in (Role.RANK, Role.OTHER):
            continue
        if not value.startswith("/"):
            with contextlib.suppress(OSError):
                value = os.path.join(os.readlink(f"/proc/{proc.pid}/cwd"), value)
        pattern = re.compile(re.escape(value) + r"(\d{1,7})\.pipe")
        found = {int(m.group(1)) for path in procfs.open_paths(proc.pid, ".pipe")
                 if (m := pattern.fullmatch(path))}
        if len(found) == 1 and (rank := found.pop()) not in taken and rank not in out:
            out[rank] = proc.pid
    return out


def read(processes: Sequence[Process], job_start: float | None = None, trigger: bool = True,
         deadline_s: float = DEADLINE_S) -> ev.FrReading:
    """This job's Flight Recorder dumps (fresh ones where the ranks have a debug-info pipe)."""
    start = _file_clock()
    live = [p for p in processes if not p.is_exited]
    ranks = [p for p in live if p.rank is not None and p.rank.global_rank is not None]
    number = {p.pid: p.rank.global_rank for p in ranks}  # type: ignore[union-attr]
    mains = [p for p in live if p.role is Role.MAIN]
    if not ranks and len(mains) == 1:  # a job without ranks: a world of one, rank 0
        ranks, number = mains, {mains[0].pid: 0}
    uid = _uid(live)
    anchor = ranks[0] if ranks else (live[0] if live else None)
    prefix_var = next(((p, p.environ[v]) for p in ranks or live for v in PREFIX_VARS
                       if p.environ.get(v)), None)
    prefix = _resolve(prefix_var[1], prefix_var[0]) if prefix_var else (
        (_root(anchor) if anchor else "") + DEFAULT_PREFIX)
    placed = _pipe_holders(live, number)
    for rank, pid in placed.items():
        proc = next(p for p in live if p.pid == pid)
        ranks.append(proc)
        number[pid] = rank
    notes: list[str] = []
    triggered: list[int] = []
    if trigger:
        for proc in ranks:
            pipe_prefix = proc.environ.get(PIPE_VAR)
            if not pipe_prefix:
                continue
            rank = number[proc.pid]
            problem = poke(f"{_resolve(pipe_prefix, proc)}{rank}.pipe", uid)
            if problem:
                notes.append(f"rank {rank}: {problem}")
            else:
                triggered.append(rank)
    not_before = job_start
    dumps: dict[int, ev.FrDump] = {}
    refused: dict[int, str] = {}
    deadline = time.monotonic() + deadline_s
    while True:
        for rank, path in sorted(dump_files(prefix).items()):
            if rank in dumps and (rank not in triggered or (dumps[rank].mtime or 0) >= start):
                continue
            try:  # unchanged since read: nothing new to load
                if rank in dumps and os.stat(path).st_mtime == dumps[rank].mtime:
                    continue
            except OSError:
                continue
            try:
                data, mtime = read_file(path, uid, not_before)
                dumps[rank] = parse_dump(load_bytes(data), rank, path, mtime)
                refused.pop(rank, None)
            except DumpError as exc:
                refused[rank] = f"{path}: {exc}"
        waiting = [r for r in triggered if r not in dumps or (dumps[r].mtime or 0) < start]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_S)
    if triggered and waiting:
        notes.append(f"rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))} "
                     f"did not write a fresh dump within {deadline_s:.1f} s (it may appear at "
                     "the next refresh)")
    notes.extend(refused.values())
    elapsed = time.time() - start
    shown = prefix[len(_root(anchor)):] if anchor and prefix.startswith(_root(anchor)) else prefix
    if dumps:
        got = sorted(dumps)
        note = (f"Flight Recorder: dumps of rank{'s' if len(got) > 1 else ''} "
                f"{', '.join(map(str, got))} read from {shown}*"
                + (f" ({len(triggered)} requested through the debug-info pipe)." if triggered
                   else "."))
        return ev.FrReading(ev.READ, note, dumps=tuple(dumps[r] for r in got), prefix=shown,
                            triggered=tuple(triggered), notes=tuple(notes), elapsed_s=elapsed,
                            fresh=tuple(r for r in got if (dumps[r].mtime or 0) >= start),
                            placed=tuple(sorted(placed.items())))
    if refused:
        return ev.FrReading(ev.REFUSED_FILE, f"Flight Recorder: no dump accepted from {shown}* "
                            f"({'; '.join(refused.values())}).", prefix=shown,
                            triggered=tuple(triggered), notes=tuple(notes), elapsed_s=elapsed)
    status = ev.TIMEOUT if triggered else ev.NONE_FOUND
    off = next((f"{v}=0" for p in ranks for v in BUFFER_VARS if p.environ.get(v) == "0"), None)
    if off:
        return ev.FrReading(status, f"Flight Recorder: off in this job ({off}): no dump.",
                            prefix=shown, notes=tuple(notes), elapsed_s=elapsed)
    return ev.FrReading(status, f"Flight Recorder: no dump of this job at {shown}*"
                        + ("" if triggered or any(p.environ.get(PIPE_VAR) for p in ranks) else
                           f" (start the job with {PIPE_VAR}=/tmp/frpipe_ to be able to ask "
                           "for one)") + ".", prefix=shown, triggered=tuple(triggered),
                        notes=tuple(notes), elapsed_s=elapsed)
