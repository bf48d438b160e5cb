"""Snapshot <-> JSON (schema ``hangscope.dump/1``, documented in docs/json-schema.md).

The one JSON codec of hangscope: ``to_dict``/``decode`` serve every frozen record (the model,
the collective and progress evidence, recorded fixtures), ``dumps``/``from_dict``/``load`` the
Snapshot. Generic over dataclasses: a field added to the model is written and read without
touching this file. Reading validates types and raises DumpFileError with the path of the
first bad field, so ``hangscope show`` never shows a traceback for a bad file.
Why one file: writing and reading are one codec, over the same field tables and type walk.
"""

from __future__ import annotations

import dataclasses
import json
import re
import stat
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, Union

from hangscope import model
from hangscope.errors import DumpFileError
from hangscope.model import SCHEMA, Snapshot
from hangscope.model.sharedstacks import shared_stacks

MAX_FILE_BYTES = 512 * 1024 * 1024
T = TypeVar("T")


_DATACLASS_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _dataclass_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass (None for any other class), looked up once per class."""
    try:
        return _DATACLASS_FIELDS[cls]
    except KeyError:
        names = (tuple(f.name for f in dataclasses.fields(cls))
                 if dataclasses.is_dataclass(cls) else None)
        _DATACLASS_FIELDS[cls] = names
        return names


def to_dict(obj: Any) -> Any:
    """A model object as JSON-able data (enums as their values, tuples as lists)."""
    if obj is None or type(obj) in _SCALARS or type(obj) is str:
        return obj
    names = _dataclass_fields(type(obj))
    if names is not None:
        out = {name: to_dict(getattr(obj, name)) for name in names}
        if isinstance(obj, model.Snapshot):
            out = {"schema": out.pop("schema"), **out}
        return out
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


# C0/C1 control characters but tab and newline, DEL, and the bidi overrides: an ESC in a
# thread name, a process title or a crafted dump must not reach the user's terminal.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(text: str) -> str:
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                            else f"\\u{ord(m.group()):04x}", text)


_SCALARS = (int, float, bool, type(None))
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def scrub(obj: Any) -> Any:
    """A copy of a model object whose strings show control characters as ``\\xNN``.

    Applied to every Snapshot that comes from outside: a sampled job (titles, argv, thread
    and frame names come from the target) and a loaded file. Unchanged objects are reused.
    """
    cls = type(obj)
    if cls in _SCALARS:
        return obj
    if cls is str:
        return _visible(obj) if _UNPRINTABLE.search(obj) else obj
    if cls is tuple or cls is list:
        items = [scrub(x) for x in obj]
        if all(a is b for a, b in zip(items, obj, strict=True)):
            return obj
        return cls(items)
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    if names is not None:
        changes = {}
        for name in names:
            value = getattr(obj, name)
            new = scrub(value)
            if new is not value:
                changes[name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    if isinstance(obj, dict):
        pairs = [(scrub(k), scrub(v)) for k, v in obj.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, obj.items(), strict=True)):
            return obj
        return dict(pairs)
    if isinstance(obj, str):
        return _visible(obj) if _UNPRINTABLE.search(obj) else obj
    return obj


# What a control character or a bidi override can look like in JSON text: escaped, or raw
# (C1 and the overrides need no escape). A file without any of these needs no scrub.
_ESCAPED_UNPRINTABLE_JSON = re.compile(
    r"\\(?:u(?:00[0-1][0-9a-fA-F]|00[7-9][0-9a-fA-F]|202[a-eA-E]|206[6-9])|[bfr])")
_RAW_UNPRINTABLE_JSON = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def may_hold_unprintable(text: str) -> bool:
    """Whether the JSON text may hold a character that ``scrub`` must show escaped. Two fast
    scans (a 15 MB dump: 10 ms, not the 190 ms of one alternation over every character)."""
    if "\\" in text and _ESCAPED_UNPRINTABLE_JSON.search(text):
        return True
    return not text.isascii() and _RAW_UNPRINTABLE_JSON.search(text) is not None


def dumps(snapshot: Snapshot, indent: int | None = 2) -> str:
    return json.dumps(to_dict(snapshot), indent=indent, sort_keys=False)


def loads_snapshot(text: str) -> Snapshot:
    """A dump's JSON text (a node's answer) as a Snapshot, scrubbed only where it may need it."""
    return from_dict(json.loads(text), clean=may_hold_unprintable(text))


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        # Each record's own module resolves its annotations (model, evidence, progress_evidence).
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _bad(path: str, expected: str, value: Any) -> DumpFileError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return DumpFileError(f"The dump is not valid: {path} should be {expected}, got {shown}.")


class _Invalid(Exception):
    """A value of the wrong type; ``where`` grows as it travels up to the root (``$``)."""

    def __init__(self, expected: str | None, value: Any = None, where: str = "") -> None:
        super().__init__(expected)
        self.expected = expected  # None: a required field is missing
        self.value = value
        self.where = where

    def error(self, root: str) -> DumpFileError:
        path = f"{root}{self.where}"
        if self.expected is None:
            return DumpFileError(f"The dump is not valid: {path} is missing.")
        return _bad(path, self.expected, self.value)


Converter = typing.Callable[[Any], Any]
# One converter per type, built once: a 1,000-rank dump has half a million values, and
# asking typing about each one's type every time was most of `show`'s load time. Paths are
# only built for a bad value, on the way up.
_CONVERTERS: dict[Any, Converter] = {}


def _identity(value: Any) -> Any:
    return value


def _scalar(tp: type) -> Converter:
    if tp is bool:
        def conv(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise _Invalid("true or false", value)
    elif tp is int:
        def conv(value: Any) -> Any:
            if type(value) is int:
                return value
            raise _Invalid("an integer", value)
    elif tp is float:
        def conv(value: Any) -> Any:
            if type(value) is float:
                return value
            if type(value) is int:
                return float(value)
            raise _Invalid("a number", value)
    else:
        def conv(value: Any) -> Any:
            if type(value) is str:
                return value
            raise _Invalid("a string", value)
    return conv


def _union(args: tuple[Any, ...]) -> Converter:
    optional = type(None) in args
    choices = [_converter(a) for a in args if a is not type(None)]

    def conv(value: Any) -> Any:
        if value is None and optional:
            return None
        first: _Invalid | None = None
        for choice in choices:
            try:
                return choice(value)
            except _Invalid as exc:
                first = first or exc
        raise first or _Invalid("a value", value)
    return conv


def _sequence(item: Converter) -> Converter:
    def conv(value: Any) -> Any:
        if type(value) is not list:
            raise _Invalid("a list", value)
        try:
            return tuple([item(v) for v in value])
        except _Invalid as exc:
            for i, v in enumerate(value):  # which one: only on the error path
                try:
                    item(v)
                except _Invalid:
                    exc.where = f"[{i}]{exc.where}"
                    break
            raise
    return conv


def _mapping(item: Converter) -> Converter:
    def conv(value: Any) -> Any:
        if type(value) is not dict:
            raise _Invalid("an object", value)
        out = {}
        for k, v in value.items():
            try:
                out[str(k)] = item(v)
            except _Invalid as exc:
                exc.where = f".{k}{exc.where}"
                raise
        return out
    return conv


def _enum(tp: type[Enum]) -> Converter:
    def conv(value: Any) -> Any:
        try:
            return tp(value)
        except ValueError:
            raise _Invalid(f"one of {[e.value for e in tp]}", value) from None
    return conv


def _dataclass(tp: type) -> Converter:
    specs: list[tuple[str, Converter, bool]] = []

    def conv(value: Any) -> Any:
        if type(value) is not dict:
            raise _Invalid("an object", value)
        if not specs:  # built on first use: a dataclass may contain itself
            hints = _hints(tp)
            specs.extend((f.name, _converter(hints[f.name]),
                          f.default is dataclasses.MISSING
                          and f.default_factory is dataclasses.MISSING)
                         for f in dataclasses.fields(tp))
        kwargs = {}
        for name, field_conv, required in specs:
            if name in value:
                try:
                    kwargs[name] = field_conv(value[name])
                except _Invalid as exc:
                    exc.where = f".{name}{exc.where}"
                    raise
            elif required:
                raise _Invalid(None, where=f".{name}")
        return tp(**kwargs)
    return conv


def _converter(tp: Any) -> Converter:
    found = _CONVERTERS.get(tp)
    if found is not None:
        return found
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    conv: Converter
    if origin in (Union, types.UnionType):
        conv = _union(args)
    elif tp is Any or tp is object:
        conv = _identity
    elif origin is tuple:
        conv = _sequence(_converter(args[0]) if args else _identity)
        if args and args[0] is model.Frame:  # a stack: equal ones decoded to one tuple
            conv = shared_stacks(conv)
    elif origin is dict:
        conv = _mapping(_converter(args[1]) if len(args) > 1 else _identity)
    elif isinstance(tp, type) and issubclass(tp, Enum):
        conv = _enum(tp)
    elif dataclasses.is_dataclass(tp):
        conv = _dataclass(tp)  # type: ignore[arg-type]
    elif tp in (bool, int, float, str):
        conv = _scalar(tp)
    else:
        conv = _identity
    _CONVERTERS[tp] = conv
    return conv


def _convert(tp: Any, value: Any, path: str) -> Any:
    """``value`` as a ``tp``; raises DumpFileError naming the first bad field under ``path``."""
    try:
        return _converter(tp)(value)
    except _Invalid as exc:
        raise exc.error(path) from None


def decode(cls: type[T], data: Any, root: str = "$") -> T:
    """Rebuild a record of ``cls`` (any frozen dataclass of hangscope) from ``to_dict`` data.

    Raises:
        DumpFileError: a field of the wrong type (its path under ``root``), or one missing.
    """
    return _convert(cls, data, root)


def from_dict(data: Any, clean: bool = True) -> Snapshot:
    """Rebuild a Snapshot from parsed JSON (``clean``: scrub control characters from it).

    Raises:
        DumpFileError: another schema, or a field of the wrong type.
    """
    if not isinstance(data, dict):
        raise DumpFileError("The file is JSON but not a hangscope dump (expected an object).")
    schema = data.get("schema")
    if schema != SCHEMA:
        if isinstance(schema, str) and schema.startswith("hangscope.dump/"):
            raise DumpFileError(f"The dump uses schema {schema}; this hangscope reads {SCHEMA}.",
                                help_text="Use the hangscope version that wrote it, or upgrade.")
        raise DumpFileError("The file is JSON but not a hangscope dump (no 'schema' field "
                            f"equal to {SCHEMA!r}).")
    try:
        snap = _convert(Snapshot, data, "$")
        return scrub(snap) if clean else snap
    except RecursionError:
        raise DumpFileError("The dump is nested too deeply to be a hangscope dump.") from None


def load(path: str | Path) -> Snapshot:
    """Read a saved ``hangscope dump --format json`` file.

    Raises:
        DumpFileError: missing, unreadable, too large, truncated or not a hangscope dump.
    """
    p = Path(path)
    try:
        st = p.stat()
        size = st.st_size
    except FileNotFoundError:
        raise DumpFileError(f"No such file: {path}.") from None
    except OSError as exc:
        raise DumpFileError(f"Cannot read {path}: {exc.strerror}.") from None
    if p.is_dir():
        raise DumpFileError(f"{path} is a directory, not a dump file.")
    if not stat.S_ISREG(st.st_mode):  # a pipe or a device: reading it may never end
        raise DumpFileError(f"{path} is not a regular file (a pipe or a device): save the "
                            "dump to a file and show that.")
    if size == 0:
        raise DumpFileError(f"{path} is empty.")
    if size > MAX_FILE_BYTES:
        raise DumpFileError(f"{path} is {size // (1 << 20)} MiB, larger than any hangscope "
                            f"dump ({MAX_FILE_BYTES // (1 << 20)} MiB at most).")
    try:
        text = p.read_text(encoding="utf-8-sig")  # an editor may have added a BOM
    except UnicodeDecodeError:
        raise DumpFileError(f"{path} is not text (not UTF-8): not a hangscope dump.") from None
    except OSError as exc:
        raise DumpFileError(f"Cannot read {path}: {exc.strerror}.") from None
    if not text.strip():
        raise DumpFileError(f"{path} is empty (only white space).")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # A string that runs to the end of the text is reported where it starts.
        cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        where = "truncated" if cut else "not valid JSON"
        raise DumpFileError(f"{path} is {where} (line {exc.lineno}, column {exc.colno}: "
                            f"{exc.msg}).") from None
    except RecursionError:
        raise DumpFileError(f"{path} is nested too deeply to be a hangscope dump.") from None
    return from_dict(data, clean=may_hold_unprintable(text))
