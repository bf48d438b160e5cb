"""Flight Recorder dumps as data: bytes -> ``evidence.FrDump``, with no I/O.

Pure, so that a dump carried raw (the JSON or pickle bytes, the entries) is parsed the same
wherever it is: by the collector (collect/flightrec.py) or by the analysis. Pickles are loaded
with an unpickler that refuses every class: a file under /tmp can be planted by anyone, and a
pickle naming a callable would run it. Unknown fields are ignored, malformed ones skipped.
"""

from __future__ import annotations

import gc
import io
import json
import marshal
import pickle
import re
from typing import Any

from hangscope.model import Frame
from hangscope.model import nccl as ev

MAX_BYTES = 64 << 20  # 2,000 entries with stacks are a few MiB; beyond this is not a dump


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
    # Paused before anything is allocated (a ``with`` allocates): see parse_dump.
    was_on = gc.isenabled()
    gc.disable()
    try:
        return _load(data)
    finally:
        if was_on:
            gc.enable()


def _load(data: bytes) -> dict[str, Any]:
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
    if type(value) is int:  # the common case first: 2,000 entries x 32 ranks come through here
        return value
    if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)  # "17": what the regex below accepts, without the regex
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
    key = repr(value) if len(value) <= 64 else None  # 64,000 entries share a few shapes
    if key is not None and key in _SIZES:
        return _SIZES[key]
    out = []
    for shape in value[:64]:
        if isinstance(shape, (list, tuple)):
            out.append(tuple(v for v in (_as_int(x) for x in shape[:16]) if v is not None))
    sizes = tuple(out)
    if key is not None and len(_SIZES) < 4096:
        _SIZES[key] = sizes
    return sizes


_SIZES: dict[str, tuple[tuple[int, ...], ...]] = {}  # repr of a shape list -> parsed (bounded)


# Frames of the library itself: never the call site.
_PLUMBING = ("/torch/", "c10d_logger.py", "<frozen ", "<string>")
# Wrappers around the user's line (contextlib's __exit__, functools, a training library in
# site-packages): skipped for the user's own frame, used only where the stack has none.
_WRAPPER = re.compile(r"/(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/")


_KIND: dict[str, str] = {}  # filename -> torch | stdlib | library | user (files repeat)


def _kind(filename: str) -> str:
    if any(mark in filename for mark in _PLUMBING):
        return "torch"
    if re.search(r"/(?:site|dist)-packages/", filename):
        return "library"
    return "stdlib" if _WRAPPER.search(filename) else "user"


def call_site(frames: Any) -> str | None:
    """``func (file.py:line)``: the first Python frame of the job's own code (innermost first);
    where every frame outside torch is in the standard library or site-packages, the first
    of those outside the standard library (a training library's line), else the first."""
    if not isinstance(frames, (list, tuple)):
        return None
    wrapper = library = None
    for raw in frames[:256]:
        if not isinstance(raw, dict):
            continue
        name, filename = raw.get("name"), raw.get("filename")
        if not isinstance(name, str) or not isinstance(filename, str):
            continue
        kind = _KIND.get(filename)
        if kind is None:
            kind = _kind(filename)
            if len(_KIND) < 1 << 16:  # bounded: a hostile dump cannot grow it without end
                _KIND[filename] = kind
        if kind == "torch":
            continue
        if kind != "user":
            if library is None and kind == "library":
                library = raw
            wrapper = wrapper or raw
            continue
        return _site(raw)
    chosen = library or wrapper
    return _site(chosen) if chosen is not None else None


def _site(raw: dict[str, Any]) -> str:
    name, filename, line = raw["name"], raw["filename"], _as_int(raw.get("line"))
    key = (name, filename, line)
    site = _SITES.get(key)
    if site is None:
        site = f"{name} ({Frame(name=name, file=filename, line=line).location})"
        if len(_SITES) < 1 << 16:
            _SITES[key] = site
    return site


_SITES: dict[tuple[str, str, int | None], str] = {}  # a frame -> its call site (bounded)


def _ranks(value: Any) -> tuple[int, ...]:
    """pg_config ranks: a string "[0, 1]" in torch's dumps, a list elsewhere."""
    if isinstance(value, str):
        return tuple(int(x) for x in re.findall(r"-?\d+", value)[:1 << 16])
    if isinstance(value, (list, tuple)):
        return tuple(v for v in (_as_int(x) for x in value[:1 << 16]) if v is not None)
    return ()


def _dtypes(value: Any) -> tuple[str, ...]:
    """A list of dtype names; PyTorch's own test builders write one name as a plain string."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, (list, tuple)):
        out = tuple(value[:64])
        return out if all(type(d) is str for d in out) else tuple(str(d) for d in out)
    return ()


_PEER = re.compile(r"^(send|recv)\s+(-?\d+)\s*(->|<-)\s*(-?\d+)")


def _op(name: str) -> tuple[str, tuple[int, int] | None]:
    """``nccl:send 0->1`` -> ("send", (0, 1)); ``nccl:recv 1<-0`` -> ("recv", (0, 1))."""
    op = name.split(":", 1)[-1].strip()
    m = _PEER.match(op)
    if m is None:
        return op.split(" ", 1)[0], None
    a, b = int(m.group(2)), int(m.group(4))
    return m.group(1), ((a, b) if m.group(3) == "->" else (b, a))


def parse_dump(obj: dict[str, Any], rank: int, path: str, mtime: float | None = None) -> ev.FrDump:
    """One rank's dump as evidence (unknown fields ignored, malformed ones skipped)."""
    # The collector is paused (hangscope.gcpause) before anything is allocated, not by a
    # ``with``: entering one allocates, and a collection set off there would walk (and keep
    # in an older generation) every object of the dump load_bytes just built uncollected.
    # Here the dump is dropped by the caller before the next collection: it is never walked.
    was_on = gc.isenabled()
    gc.disable()
    try:
        return _parse(obj, rank, path, mtime)
    finally:
        if was_on:
            gc.enable()


def _template_key(values: tuple[Any, ...]) -> bytes | str:
    """An exact key for an entry's raw template fields (lists, so not hashable themselves).

    marshal keeps types apart as ``==`` does not (True, 1 and 1.0 parse differently) and is
    three times quicker than repr; version 2 writes no back-references, so equal values give
    equal bytes whatever their reference counts (and no hashtable is built per call). repr
    where marshal cannot write a value (a type it lacks, a recursive or too deep list)."""
    try:
        return marshal.dumps(values, 2)
    except ValueError:
        return repr(values)


def _entry(template: dict[str, Any], seq: int, site: str | None,
           record_id: int | None) -> ev.FrEntry:
    """A copy of the entry whose instance dict is ``template`` (a template's own FrEntry)
    with this entry's ``seq``, ``site`` and ``record_id``: the frozen dataclass's __init__
    (one ``object.__setattr__`` per field) skipped, the same instance in a third of the time
    (64,000 entries for 32 ranks x 2,000). Copied from another entry's dict, the instance dict
    shares its keys with every entry: 256 bytes an entry (528 from a plain dict)."""
    entry = object.__new__(ev.FrEntry)
    attrs = entry.__dict__
    attrs.update(template)
    attrs["seq"] = seq
    attrs["site"] = site
    attrs["record_id"] = record_id
    return entry


def _parse(obj: dict[str, Any], rank: int, path: str, mtime: float | None) -> ev.FrDump:
    entries = []
    raw_entries = obj.get("entries")
    entry_desc: dict[str, str | None] = {}
    # 2,000 entries of a rank repeat a few shapes: each (op, group, sizes, dtypes, state) is
    # parsed once; per entry only its sequence id, record id and call site are read.
    templates: dict[bytes | str, dict[str, Any]] = {}  # raw fields -> an entry's __dict__
    for raw in raw_entries if isinstance(raw_entries, list) else []:
        if not isinstance(raw, dict):
            continue
        get = raw.get
        p2p = get("is_p2p") is True
        seq = _as_int(get("p2p_seq_id" if p2p else "collective_seq_id"))
        name = get("profiling_name")
        if seq is None or not isinstance(name, str):
            continue
        key = _template_key((name, get("process_group"), get("pg_id"), get("state"), p2p,
                             get("input_sizes"), get("output_sizes"), get("input_dtypes"),
                             get("output_dtypes")))
        template = templates.get(key)
        if template is None:
            fields = _template(raw, name, p2p)
            template = ev.FrEntry(seq=seq, site=None, record_id=None, **fields).__dict__
            if len(templates) < 4096:
                templates[key] = template
            if entry_desc.get(fields["pg"]) is None:
                entry_desc[fields["pg"]] = _desc(raw)
        entries.append(_entry(template, seq, call_site(get("frames")),
                              _as_int(get("record_id"))))
    config = obj.get("pg_config") if isinstance(obj.get("pg_config"), dict) else {}
    status = obj.get("pg_status") if isinstance(obj.get("pg_status"), dict) else {}
    descs = {}
    for key, value in config.items():
        if isinstance(value, dict):
            descs[str(value.get("name", key))] = (value.get("desc"), _ranks(value.get("ranks")))
    # pg_status is keyed by the group's uid (gloo: "0", "1"...), which is the group's name only
    # for groups named by the default counter: the entries carry both.
    by_id = {e.pg_id: e.pg for e in entries if e.pg_id is not None}
    status = {by_id.get(str(k), str(k)): v for k, v in status.items()}
    names = list(dict.fromkeys([*status, *(e.pg for e in entries)]))
    groups = []
    for name in names:
        desc, members = descs.get(name, (None, ()))
        if not members and len(names) == 1 and set(descs) == {""}:
            desc, members = descs[""]  # gloo registers its one group's config unnamed
        desc = desc or entry_desc.get(name)
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


def _template(raw: dict[str, Any], name: str, p2p: bool) -> dict[str, Any]:
    """An entry's fields but its sequence id, record id and call site."""
    pg = raw.get("process_group")
    pg_id = raw.get("pg_id")
    op, peer = _op(name)
    state = raw.get("state")
    return {
        "op": op, "peer": peer, "p2p": p2p,
        "pg": str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(raw.get("pg_id", "")),
        "state": state if isinstance(state, str) else None,
        "input_sizes": _sizes(raw.get("input_sizes")),
        "input_dtypes": _dtypes(raw.get("input_dtypes")),
        "output_sizes": _sizes(raw.get("output_sizes")),
        "output_dtypes": _dtypes(raw.get("output_dtypes")),
        "pg_id": str(pg_id) if isinstance(pg_id, (int, str)) and not isinstance(pg_id, bool)
        else None,
    }


def _desc(raw: Any) -> str | None:
    """The group description an entry carries (``("0", "default_pg")``; gloo's are there)."""
    pg = raw.get("process_group")
    if isinstance(pg, (list, tuple)) and len(pg) > 1 and isinstance(pg[1], str):
        return pg[1] if pg[1] not in ("", "undefined") else None
    return None
