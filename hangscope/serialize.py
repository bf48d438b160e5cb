"""Snapshot <-> JSON (schema ``hangscope.dump/1``, documented in docs/json-schema.md).

Generic over the model's dataclasses: a field added to the model is written and read without
touching this file. Reading validates types and raises DumpFileError with the path of the
first bad field, so ``hangscope show`` never shows a traceback for a bad file.
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
from typing import Any, Union

from hangscope import model
from hangscope.errors import DumpFileError
from hangscope.model import SCHEMA, Snapshot

MAX_FILE_BYTES = 512 * 1024 * 1024


def to_dict(obj: Any) -> Any:
    """A model object as JSON-able data (enums as their values, tuples as lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
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
_MAYBE_UNPRINTABLE_JSON = re.compile(
    r"\\u(?:00[0-1][0-9a-fA-F]|00[7-9][0-9a-fA-F]|202[a-eA-E]|206[6-9])|\\[bfr]"
    r"|[\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def dumps(snapshot: Snapshot, indent: int | None = 2) -> str:
    return json.dumps(to_dict(snapshot), indent=indent, sort_keys=False)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, vars(model))
    return _HINTS[cls]


def _bad(path: str, expected: str, value: Any) -> DumpFileError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return DumpFileError(f"The dump is not valid: {path} should be {expected}, got {shown}.")


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path)
            except DumpFileError as exc:
                errors.append(exc)
        raise errors[0] if errors else _bad(path, "a value", value)
    if tp is Any or tp is object:
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise _bad(path, "a list", value)
        item = args[0] if args else Any
        return tuple(_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise _bad(path, "an object", value)
        vt = args[1] if len(args) > 1 else Any
        return {str(k): _convert(vt, v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(value)
        except ValueError:
            raise _bad(path, f"one of {[e.value for e in tp]}", value) from None
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _bad(path, "an object", value)
        hints = _hints(tp)  # type: ignore[arg-type]
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _convert(hints[f.name], value[f.name], f"{path}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DumpFileError(f"The dump is not valid: {path}.{f.name} is missing.")
        return tp(**kwargs)
    if tp is bool:
        if not isinstance(value, bool):
            raise _bad(path, "true or false", value)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(path, "an integer", value)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(path, "a number", value)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _bad(path, "a string", value)
        return value
    return value


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
        where = "truncated" if exc.pos >= len(text.rstrip()) - 1 else "not valid JSON"
        raise DumpFileError(f"{path} is {where} (line {exc.lineno}, column {exc.colno}: "
                            f"{exc.msg}).") from None
    except RecursionError:
        raise DumpFileError(f"{path} is nested too deeply to be a hangscope dump.") from None
    return from_dict(data, clean=_MAYBE_UNPRINTABLE_JSON.search(text) is not None)
