"""NCCL RAS answers captured on two H200s (NCCL 2.28.9) parse to the right counts and ranks."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangscope.collect.ras_format import RasFormatError, parse, parse_json, parse_text, repair_json

RAS = Path(__file__).resolve().parent.parent / "fixtures" / "nccl" / "ras"


def _read(name: str) -> str:
    return (RAS / name).read_text()


def _counts(report, op: str = "AllReduce") -> dict[int, int]:
    (comm,) = report.communicators
    return {r.rank: r.counts[op] for r in comm.ranks if op in r.counts}


@pytest.mark.parametrize("name", ["behind.json", "behind.txt"])
def test_behind_counts(name: str) -> None:
    report = parse(_read(name))
    assert report.nccl_version == "2.28.9"
    (comm,) = report.communicators
    assert comm.hash == "0x44cd76c5ebeff4b7"
    assert _counts(report) == {0: 2, 1: 1}
    assert {r.rank: r.pid for r in comm.ranks} == {0: 622, 1: 623}
    assert {r.rank: r.cuda_dev for r in comm.ranks} == {0: 0, 1: 1}
    assert comm.missing == ()


def test_behind_text_has_the_table_row() -> None:
    (comm,) = parse_text(_read("behind.txt")).communicators
    assert (comm.size, comm.status, comm.errors) == (2, "RUNNING", "MISMATCH")


def test_valid_json_needs_no_repair() -> None:
    assert parse_json(_read("behind.json")).format == "json"


@pytest.mark.parametrize("case,present,missing,pid", [
    ("extra_op", 1, 0, 756), ("wrong_op", 0, 1, 891)])
def test_malformed_json_is_repaired(case: str, present: int, missing: int, pid: int) -> None:
    text = _read(f"{case}.json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # NCCL 2.28.9 really wrote invalid JSON
    report = parse_json(text)
    assert report.format == "json-repaired"
    (comm,) = report.communicators
    assert [r.rank for r in comm.ranks] == [present]
    (gone,) = comm.missing
    assert (gone.rank, gone.pid, gone.host, gone.cuda_dev) == (missing, pid, "192.0.2.2", missing)
    assert gone.unresponsive is True and gone.dead is False
    assert comm.size == 2


def test_extra_op_json_counts_the_extra_all_gather() -> None:
    (comm,) = parse(_read("extra_op.json")).communicators
    (rank1,) = comm.ranks
    assert rank1.counts["AllGather"] == 1 and rank1.counts["AllReduce"] == 2


@pytest.mark.parametrize("case,missing,pid", [("extra_op", 0, 756), ("wrong_op", 1, 891)])
def test_text_missing_rank(case: str, missing: int, pid: int) -> None:
    (comm,) = parse_text(_read(f"{case}.txt")).communicators
    assert [(m.rank, m.pid, m.cuda_dev) for m in comm.missing] == [(missing, pid, missing)]
    assert comm.errors == "INCOMPLETE"


def test_repair_leaves_valid_json_alone() -> None:
    text = _read("behind.json")
    assert json.loads(repair_json(text)) == json.loads(text)


def test_text_majority_lines() -> None:
    """NCCL's text names only outliers; the majority line is kept with its count."""
    text = _read("behind.txt").replace(
        "  Rank 1 has launched up to operation 1 -- GPU 1 managed by process 623 on node "
        "192.0.2.2\n",
        "  3 ranks have launched up to operation 1\n")
    (comm,) = parse_text(text).communicators
    assert comm.majorities == {"AllReduce": ((1, 3),)}
    assert [r.rank for r in comm.ranks] == [0]


@pytest.mark.parametrize("bad", ["", "SERVER PROTOCOL 2\n", "{", "[1, 2]", '{"communicators": 3}',
                                 '{"communicators": [{"hash": 5}]}', "\x00\xff" * 100,
                                 "NCCL version", '{"communicators": [{"hash": "zz"}]}'])
def test_garbage_raises_format_error(bad: str) -> None:
    with pytest.raises(RasFormatError):
        parse(bad)


_FIXTURES = [_read(n) for n in ("behind.json", "extra_op.json", "behind.txt", "wrong_op.txt")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_FIXTURES), st.integers(0, 4000), st.integers(0, 4000),
       st.text(max_size=40))
def test_fuzz_truncated_and_spliced(base: str, cut: int, at: int, junk: str) -> None:
    """Truncated, spliced or hostile answers: a report or a RasFormatError, never a traceback."""
    text = base[:cut] if cut < len(base) else base
    text = text[:at] + junk + text[at:]
    with contextlib.suppress(RasFormatError):
        parse(text)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.sampled_from(
                        ["communicators", "ranks", "missing_ranks", "hash", "rank", "pid",
                         "collective_counts", "status", "size", "ras", "nccl_version"]),
                        kids, max_size=5), max_leaves=30))
def test_fuzz_json_shapes(value: object) -> None:
    with contextlib.suppress(RasFormatError):
        parse_json(json.dumps(value))


def test_deeply_nested_json_is_a_format_error() -> None:
    with pytest.raises(RasFormatError):
        parse("{" + '"a":[' * 100000 + "]" * 100000 + "}")


@pytest.mark.quiet  # a time is the assertion: run alone
def test_hostile_long_lines_parse_in_linear_time() -> None:
    """A listener sending megabytes of near-matching lines must not make the regexes crawl."""
    import time

    base = _read("behind.txt")
    hostile = (base + "#0-0 (44cd76c5ebeff4b7) MISMATCH\n  Rank 1 -- GPU " + "1" * 2_000_000
               + "\n" + ("  Rank 1 -- GPU " + "1" * 4000 + "\n") * 2000)
    spaces = '{"a": 1' + " " * 2_000_000 + "\n" * 3 + '"b": 2}'
    start = time.monotonic()
    parse(hostile)
    with contextlib.suppress(RasFormatError):
        parse(spaces)
    assert time.monotonic() - start < 5


def test_nccl_2_24_text_forms() -> None:
    """NCCL 2.24-2.25 print the missing ranks as a list and one total operation count
    (src/ras/client_support.cc at v2.24.3-1); the real captures rewritten to those forms."""
    missing = _read("extra_op.txt").replace(
        "  Rank 0 -- GPU 0 managed by process 756 on node 192.0.2.2\n",
        "  The missing rank: 0\n")
    (comm,) = parse_text(missing).communicators
    assert [(m.rank, m.pid) for m in comm.missing] == [(0, None)]
    counts = _read("behind.txt").replace("different AllReduce operation counts",
                                         "different collective operation counts")
    (comm,) = parse_text(counts).communicators
    assert {r.rank: r.counts for r in comm.ranks} == {0: {"collective": 2}, 1: {"collective": 1}}
