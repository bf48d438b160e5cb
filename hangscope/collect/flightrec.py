"""PyTorch Flight Recorder dumps: ``ls /tmp/nccl_trace_rank_*``, and ``echo 1 > PREFIX<rank>.pipe``.

Reads the dumps this job's ranks wrote (the ranks' ``TORCH_FR_DUMP_TEMP_FILE`` /
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix, else torch's default ``/tmp/nccl_trace_rank_``):
regular files only, owned by the job's user, newer than the job's start, at most MAX_BYTES.
Where the ranks were started with ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE``, asks each rank for a
fresh dump through its FIFO (this makes the job write files) and waits for them until the
deadline. Pickles are loaded with an unpickler that refuses every class: a file under /tmp can
be planted by anyone, and a pickle naming a callable would run it. Every outcome is an
FrReading with notes; nothing raises.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import pickle
import re
import stat
import time
from collections.abc import Sequence
from typing import Any

from hangscope import evidence as ev
from hangscope.model import Frame, Process, Role

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
# What this collector reads of a rank's environment (collect/procfs.py's allow-list must keep
# them: it drops every other variable).
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
ENV_KEYS = (*PREFIX_VARS, PIPE_VAR, *BUFFER_VARS)
MAX_BYTES = 64 << 20  # 2,000 entries with stacks are a few MiB; beyond this is not a dump
# torch's monitor thread looks at the pipe about once a second, then writes the dump with C++
# stack traces ("Include stack trace: 1"), which it symbolises first: on the H200 (torch 2.11,
# a one-rank NCCL job) no dump had landed 3 s after the trigger. The wait ends as soon as every
# triggered rank's file is there, so a quick rank costs no more.
DEADLINE_S = 8.0
_POLL_S = 0.05


class DumpError(ValueError):
    """A file that is not a Flight Recorder dump we accept (the message says why)."""


class _NoClassUnpickler(pickle.Unpickler):
    """Plain data only: any class or callable a pickle names is refused before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it names {module}.{name}; a dump holds plain data only")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it uses persistent ids; a dump holds plain data only")


def load_bytes(data: bytes) -> dict[str, Any]:
    """A dump's top-level dict from pickle or JSON bytes. Raises DumpError."""
    if len(data) > MAX_BYTES:
        raise DumpError(f"larger than {MAX_BYTES >> 20} MiB")
    if data[:1] in (b"{", b" ", b"\n"):
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise DumpError(f"not valid JSON ({exc})") from None
    else:
        try:
            obj = _NoClassUnpickler(io.BytesIO(data)).load()
        except pickle.UnpicklingError as exc:
            raise DumpError(f"refused: {exc}") from None
        except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                RecursionError, MemoryError, OverflowError, UnicodeDecodeError) as exc:
            raise DumpError(f"not a complete pickle ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or ("entries" not in obj and "pg_status" not in obj):
        raise DumpError("not a Flight Recorder dump (no entries, no pg_status)")
    return obj


def _as_int(value: Any) -> int | None:
    """The JSON form writes some numbers as strings ("-1")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        return int(value)
    return None


def _sizes(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    out = []
    for shape in value[:64]:
        if isinstance(shape, (list, tuple)):
            out.append(tuple(v for v in (_as_int(x) for x in shape[:16]) if v is not None))
    return tuple(out)


# Frames of the library itself: the call site is the first frame outside them.
_PLUMBING = ("/torch/", "c10d_logger.py", "/multiprocessing/", "<frozen ", "<string>")


def call_site(frames: Any) -> str | None:
    """``func (file.py:line)``: the first Python frame of the user's code (innermost first)."""
    if not isinstance(frames, (list, tuple)):
        return None
    for raw in frames[:256]:
        if not isinstance(raw, dict):
            continue
        name, filename, line = raw.get("name"), raw.get("filename"), _as_int(raw.get("line"))
        if not isinstance(name, str) or not isinstance(filename, str):
            continue
        if any(mark in filename for mark in _PLUMBING):
            continue
        return f"{name} ({Frame(name=name, file=filename, line=line).location})"
    return None


def _ranks(value: Any) -> tuple[int, ...]:
    """pg_config ranks: a string "[0, 1]" in torch's dumps, a list elsewhere."""
    if isinstance(value, str):
        return tuple(int(x) for x in re.findall(r"-?\d+", value)[:1 << 16])
    if isinstance(value, (list, tuple)):
        return tuple(v for v in (_as_int(x) for x in value[:1 << 16]) if v is not None)
    return ()


def parse_dump(obj: dict[str, Any], rank: int, path: str, mtime: float | None = None) -> ev.FrDump:
    """One rank's dump as evidence (unknown fields ignored, malformed ones skipped)."""
    entries = []
    raw_entries = obj.get("entries")
    for raw in raw_entries if isinstance(raw_entries, list) else []:
        if not isinstance(raw, dict):
            continue
        p2p = raw.get("is_p2p") is True
        seq = _as_int(raw.get("p2p_seq_id" if p2p else "collective_seq_id"))
        name = raw.get("profiling_name")
        pg = raw.get("process_group")
        if seq is None or not isinstance(name, str):
            continue
        pg_name = str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(raw.get("pg_id", ""))
        dtypes = raw.get("input_dtypes")
        entries.append(ev.FrEntry(
            seq=seq, op=name.split(":", 1)[-1], pg=pg_name,
            state=raw.get("state") if isinstance(raw.get("state"), str) else None, p2p=p2p,
            input_sizes=_sizes(raw.get("input_sizes")),
            input_dtypes=tuple(str(d) for d in dtypes[:64]) if isinstance(dtypes, list) else (),
            output_sizes=_sizes(raw.get("output_sizes")), site=call_site(raw.get("frames")),
        ))
    config = obj.get("pg_config") if isinstance(obj.get("pg_config"), dict) else {}
    status = obj.get("pg_status") if isinstance(obj.get("pg_status"), dict) else {}
    descs = {}
    for key, value in config.items():
        if isinstance(value, dict):
            descs[str(value.get("name", key))] = (value.get("desc"), _ranks(value.get("ranks")))
    names = list(dict.fromkeys([*(str(k) for k in status), *(e.pg for e in entries)]))
    groups = []
    for name in names:
        desc, members = descs.get(name, (None, ()))
        if not members and len(descs) == 1 and len(names) == 1:
            desc, members = next(iter(descs.values()))  # gloo registers its config unnamed
        st = status.get(name) if isinstance(status.get(name), dict) else {}
        groups.append(ev.FrGroup(
            name=name, desc=desc if isinstance(desc, str) and desc else None, ranks=members,
            last_enqueued=_as_int(st.get("last_enqueued_collective")),
            last_started=_as_int(st.get("last_started_collective")),
            last_completed=_as_int(st.get("last_completed_collective")),
        ))
    return ev.FrDump(
        rank=rank, path=path, version=str(obj.get("version")) if obj.get("version") else None,
        comm_lib_version=obj.get("comm_lib_version") or None
        if isinstance(obj.get("comm_lib_version"), str) else None,
        groups=tuple(groups), entries=tuple(entries), mtime=mtime)


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


def read(processes: Sequence[Process], job_start: float | None = None, trigger: bool = True,
         deadline_s: float = DEADLINE_S) -> ev.FrReading:
    """This job's Flight Recorder dumps (fresh ones where the ranks have a debug-info pipe)."""
    start = time.time()
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
                            triggered=tuple(triggered), notes=tuple(notes), elapsed_s=elapsed)
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
