"""`hangscope show FILE` on bad files: a clear error and exit code 6, never a traceback.

The table below runs the real command line; the hypothesis tests call ``cli.main`` in-process
(the same code path, minus the interpreter start) with bytes, arbitrary JSON, truncations
and mutations of a real dump. A file that is a valid dump renders (exit 0) in every format,
and no control character from the file reaches the terminal.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangscope import cli
from hangscope.model import SCHEMA

FIXTURE = Path(__file__).parents[1] / "fixtures" / "snapshots" / "mismatch.json"
VALID_TEXT = FIXTURE.read_text()
VALID = json.loads(VALID_TEXT)
FORMATS = ("text", "md", "json")


#: A Python traceback's first line: what a crash prints. (Not the bare word: Hypothesis draws
#: strings from this module's own constants, and a refusal may quote the value it refused.)
TRACEBACK = "Traceback (most recent call last)"

def _other_schema() -> str:
    doc = copy.deepcopy(VALID)
    doc["schema"] = "hangscope.dump/999"
    return json.dumps(doc)


def _wrong(path: list[Any], value: Any) -> str:
    doc = copy.deepcopy(VALID)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(doc)


def _without(key: str) -> str:
    doc = copy.deepcopy(VALID)
    del doc["processes"][0][key]
    return json.dumps(doc)


_DIR = tempfile.mkdtemp(prefix="hangscope-fuzz-")
atexit.register(shutil.rmtree, _DIR, True)


def show(content: str | bytes, fmt: str = "json") -> tuple[int, str, str]:
    """``hangscope show FILE -f FMT`` in-process: (exit code, stdout, stderr)."""
    path = Path(_DIR) / "fuzz.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    debug = os.environ.pop("HANGSCOPE_DEBUG", None)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["show", str(path), "-f", fmt])
    finally:
        if debug is not None:
            os.environ["HANGSCOPE_DEBUG"] = debug
    return code, out.getvalue(), err.getvalue()


def assert_clean_refusal(code: int, out: str, err: str) -> None:
    assert code == 6, (code, err)
    assert err.startswith("hangscope: error: "), err
    assert TRACEBACK not in err and "hangscope: internal error" not in err
    assert out == ""


BAD_FILES: list[tuple[str, str | bytes, str]] = [
    ("empty", "", "is empty"),
    ("whitespace", "  \n\t\n", "only white space"),
    ("truncated", VALID_TEXT[: len(VALID_TEXT) // 2], "truncated"),
    ("cut-one-char", VALID_TEXT.rstrip()[:-1], "truncated"),
    ("not-json", "hangscope dump of PID 1234\nverdict: mismatch\n", "not valid JSON"),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not text"),
    ("array", "[1, 2, 3]", "not a hangscope dump"),
    ("string", '"hangscope.dump/1"', "not a hangscope dump"),
    ("no-schema", json.dumps({"processes": []}), "no 'schema' field"),
    ("other-schema", _other_schema(), "uses schema hangscope.dump/999"),
    ("schema-only", json.dumps({"schema": SCHEMA}), "is missing"),
    ("processes-not-list", _wrong(["processes"], "all of them"), "$.processes should be a list"),
    ("pid-string", _wrong(["processes", 0, "pid"], "1234"), "$.processes[0].pid"),
    ("pid-float", _wrong(["processes", 0, "pid"], 12.5), "should be an integer"),
    ("bad-enum", _wrong(["processes", 0, "role"], "wizard"), "$.processes[0].role"),
    ("frame-not-object", _wrong(["processes", 1, "threads", 0, "frames"], [7]),
     "$.processes[1].threads[0].frames[0] should be an object"),
    ("missing-field", _without("pid"), "$.processes[0].pid is missing"),
    ("deep", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
]


@pytest.mark.parametrize(("name", "content", "words"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_dump_file_is_exit_6_with_a_sentence(name: str, content: str | bytes,
                                                 words: str) -> None:
    code, out, err = show(content)
    assert_clean_refusal(code, out, err)
    assert words in err, err
    assert "hangscope: fix:" in err


@pytest.mark.parametrize("name", ["empty", "truncated", "binary", "other-schema", "pid-string"])
def test_bad_dump_file_through_the_real_command(hangscope_cli: Any, tmp_path: Path,
                                                name: str) -> None:
    """The same, as a user runs it: the process exits 6 and prints no traceback."""
    content, words = next((c, w) for n, c, w in BAD_FILES if n == name)
    path = tmp_path / f"{name}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    result = hangscope_cli("show", str(path))
    assert TRACEBACK not in result.stderr + result.stdout
    assert result.returncode == 6, result.stderr
    assert words in result.stderr, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("variant", ["bom", "nan", "infinity", "crlf", "unknown-fields"])
def test_odd_but_valid_dump_is_shown(variant: str) -> None:
    """A BOM from an editor, NaN/Infinity numbers, CRLF line ends, fields from a newer
    writer: still a dump, shown with exit 0."""
    text = {
        "bom": "\ufeff" + VALID_TEXT,
        "nan": VALID_TEXT.replace('"window_s": ', '"window_s": NaN, "_w": ', 1),
        "infinity": VALID_TEXT.replace('"duration_s": ', '"duration_s": Infinity, "_d": ', 1),
        "crlf": VALID_TEXT.replace("\n", "\r\n"),
        "unknown-fields": json.dumps({**VALID, "from_the_future": {"x": [1, 2]}}),
    }[variant]
    for fmt in FORMATS:
        code, out, err = show(text, fmt)
        assert code == 0, (fmt, err)
        assert out


@pytest.mark.parametrize(("make", "code", "words"), [
    ("missing", 6, "No such file"),
    ("directory", 6, "is a directory"),
    ("huge", 6, "larger than any hangscope dump"),
    ("fifo", 6, "not a regular file"),
])
def test_missing_directory_huge_or_special_file(hangscope_cli: Any, tmp_path: Path, make: str,
                                                code: int, words: str) -> None:
    path = tmp_path / "dump.json"
    if make == "directory":
        path.mkdir()
    elif make == "huge":
        with open(path, "wb") as fh:  # sparse: 600 MiB on paper, nothing on disk
            fh.truncate(600 * 1024 * 1024)
    elif make == "fifo":
        os.mkfifo(path)  # reading it would block forever: nobody writes to it
    result = hangscope_cli("show", str(path), timeout=30)
    assert TRACEBACK not in result.stderr
    assert result.returncode == code, result.stderr
    assert words in result.stderr, result.stderr


def test_large_valid_dump_is_shown() -> None:
    """A dump of 100 more processes (~0.7 MB) renders in every format."""
    doc = copy.deepcopy(VALID)
    extra = []
    for i in range(100):
        proc = copy.deepcopy(VALID["processes"][1 + i % (len(VALID["processes"]) - 1)])
        proc["pid"] = 500_000 + i
        extra.append(proc)
    doc["processes"] = VALID["processes"] + extra
    text = json.dumps(doc)
    for fmt in FORMATS:
        code, out, err = show(text, fmt)
        assert code == 0, err
        assert "500099" in out or fmt == "text"


def test_control_characters_in_a_dump_never_reach_the_terminal() -> None:
    """A crafted dump with terminal escapes (set title, clear screen, OSC 52 clipboard) in its
    names is shown with the escapes made visible, not executed."""
    doc = copy.deepcopy(VALID)
    evil = "x\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07\u202eevil\x9b31m"
    doc["processes"][1]["threads"][0]["name"] = evil
    doc["processes"][1]["title"] = evil
    doc["verdict"]["summary"] = evil
    for fmt in FORMATS:
        code, out, err = show(json.dumps(doc), fmt)
        assert code == 0, err
        for char in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert char not in out, (fmt, char)
        assert "\\x1b]0;owned" in out


# -- hypothesis -------------------------------------------------------------------------------

# HANGSCOPE_FUZZ_EXAMPLES=2000 for a longer campaign than CI's.
FUZZ = settings(max_examples=int(os.environ.get("HANGSCOPE_FUZZ_EXAMPLES", "60")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=5),
    max_leaves=25,
)


@FUZZ
@given(st.binary(max_size=3000))
def test_fuzz_random_bytes(data: bytes) -> None:
    assert_clean_refusal(*show(data))


@FUZZ
@given(json_values)
def test_fuzz_random_json(value: Any) -> None:
    assert_clean_refusal(*show(json.dumps(value)))


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(VALID)), json_values, max_size=8))
def test_fuzz_schema_tagged_objects(fields: dict[str, Any]) -> None:
    assert_clean_refusal(*show(json.dumps({**fields, "schema": SCHEMA})))


@FUZZ
@given(st.integers(min_value=0, max_value=len(VALID_TEXT.rstrip()) - 1))
def test_fuzz_truncated_dump(cut: int) -> None:
    code, out, err = show(VALID_TEXT[:cut])
    assert_clean_refusal(code, out, err)
    assert "truncated" in err or "empty" in err or "not valid JSON" in err


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out.extend(_paths(value, (*prefix, i)))
    return out


PATHS = _paths(VALID)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(PATHS), json_values | st.just("DELETE")),
                min_size=1, max_size=3),
       st.sampled_from(FORMATS))
def test_fuzz_mutated_dump_renders_or_is_refused(mutations: list[tuple[Any, Any]],
                                                 fmt: str) -> None:
    """A real dump with 1-3 values replaced by anything (or deleted): it renders (exit 0) or
    is refused with exit 6; never a crash."""
    doc = copy.deepcopy(VALID)
    for path, value in mutations:
        target = doc
        try:
            for key in path[:-1]:
                target = target[key]
            if value == "DELETE":
                del target[path[-1]]
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    code, out, err = show(json.dumps(doc), fmt)
    assert TRACEBACK not in err and "hangscope: internal error" not in err, err
    if code == 0:
        assert out
    else:
        assert_clean_refusal(code, out, err)


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


STRING_PATHS = [p for p in PATHS if isinstance(_get(VALID, p), str) and p != ("schema",)]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(STRING_PATHS), st.text(max_size=40)), min_size=1,
                max_size=6),
       st.sampled_from(FORMATS))
def test_fuzz_any_text_in_string_fields_renders_safely(edits: list[tuple[Any, str]],
                                                      fmt: str) -> None:
    """Any text (markup brackets, control characters, emoji, RTL) in any string field: the
    dump still renders, and no ESC or BEL reaches the terminal."""
    doc = copy.deepcopy(VALID)
    for path, text in edits:
        target = _get(doc, path[:-1])
        target[path[-1]] = text
    code, out, err = show(json.dumps(doc), fmt)
    assert code in (0, 6), err
    assert TRACEBACK not in err and "hangscope: internal error" not in err, err
    if code == 0:
        assert "\x1b" not in out and "\x07" not in out
