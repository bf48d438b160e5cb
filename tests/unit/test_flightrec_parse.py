"""Flight Recorder dumps captured on two H200s (torch 2.11, format 2.10) and hostile files."""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangscope.collect import flightrec
from hangscope.model import Process, RankInfo
from hangscope.model import nccl as ev

FR = Path(__file__).resolve().parent.parent / "fixtures" / "nccl" / "flight_recorder"


def _dump(case: str, rank: int) -> ev.FrDump:
    path = FR / case / f"nccl_trace_rank_{rank}"
    return flightrec.parse_dump(flightrec.load_bytes(path.read_bytes()), rank, str(path))


def test_behind_rank0_is_at_two_with_its_call_site() -> None:
    dump = _dump("behind", 0)
    (group,) = dump.groups
    assert (group.name, group.desc, group.ranks) == ("0", "default_pg", (0, 1))
    assert (group.last_enqueued, group.last_completed) == (2, 1)
    last = dump.entries[-1]
    assert (last.seq, last.op, last.state) == (2, "all_reduce", "scheduled")
    assert last.site == "decode_step (serve.py:107)"
    assert last.input_sizes == ((1048576,),) and last.input_dtypes == ("Float",)


def test_extra_op_records_the_extra_all_gather() -> None:
    dump = _dump("extra_op", 1)
    assert [(e.seq, e.op) for e in dump.entries] == [
        (1, "all_reduce"), (2, "all_gather"), (3, "all_reduce")]
    assert dump.entries[1].site == "gather_logits (serve.py:114)"
    assert dump.comm_lib_version == "2.28.9"


def test_json_form_with_numbers_as_strings() -> None:
    """torch's JSON dump (``_dump_fr_trace_json``) writes pg_status numbers as strings."""
    obj = pickle.loads((FR / "behind" / "nccl_trace_rank_0").read_bytes())
    obj["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in
                        obj["pg_status"].items()}
    obj["entries"] = [{**e, "process_group": list(e["process_group"])} for e in obj["entries"]]
    data = json.dumps(obj).encode()
    dump = flightrec.parse_dump(flightrec.load_bytes(data), 0, "x")
    assert dump.groups[0].last_enqueued == 2
    assert dump.entries[-1].site == "decode_step (serve.py:107)"


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # what a planted file would do: call os.system on load
        return (os.system, (f"touch {self.marker}",))


def test_planted_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    prefix = tmp_path / "nccl_trace_rank_"
    planted = {"version": "2.10", "pg_status": {}, "entries": [_RunsCode(marker)]}
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(planted))
    # a good dump beside it is still read
    (tmp_path / "nccl_trace_rank_1").write_bytes((FR / "behind" / "nccl_trace_rank_1").read_bytes())
    proc = Process(pid=os.getpid(), rank=RankInfo(global_rank=0),
                   environ={"TORCH_FR_DUMP_TEMP_FILE": str(prefix)})
    reading = flightrec.read([proc], job_start=time.time() - 60, trigger=False)
    assert not marker.exists()
    assert [d.rank for d in reading.dumps] == [1]
    (refusal,) = [n for n in reading.notes if "nccl_trace_rank_0" in n]
    assert "refused" in refusal and "posix.system" in refusal


def test_only_planted_files_is_a_refusal_note(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(_RunsCode(marker)))
    proc = Process(pid=os.getpid(), rank=RankInfo(global_rank=0),
                   environ={"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")})
    reading = flightrec.read([proc], job_start=None, trigger=False)
    assert reading.status == ev.REFUSED_FILE and not reading.dumps
    assert "refused" in reading.note and not marker.exists()


def test_stale_linked_and_foreign_files_are_not_read(tmp_path: Path) -> None:
    good = (FR / "behind" / "nccl_trace_rank_0").read_bytes()
    old = tmp_path / "nccl_trace_rank_0"
    old.write_bytes(good)
    os.utime(old, (1, 1))
    (tmp_path / "elsewhere").write_bytes(good)
    (tmp_path / "nccl_trace_rank_1").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "nccl_trace_rank_2").write_bytes(good)
    os.chown(tmp_path / "nccl_trace_rank_2", 4242, 4242)
    proc = Process(pid=os.getpid(), rank=RankInfo(global_rank=0),
                   environ={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")})
    reading = flightrec.read([proc], job_start=time.time() - 60, trigger=False)
    assert reading.dumps == ()
    text = " ".join(reading.notes)
    assert "older than the job" in text and "symbolic link" in text and "uid 4242" in text


def test_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flightrec, "MAX_BYTES", 1024)
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes((FR / "behind" / "nccl_trace_rank_0").read_bytes())
    with pytest.raises(flightrec.DumpError, match="larger than"):
        flightrec.read_file(str(path), None, None)


@pytest.mark.quiet  # a time is the assertion: run alone
def test_no_reader_fifo_is_a_note_not_a_hang(tmp_path: Path) -> None:
    pipe = tmp_path / "frpipe_0.pipe"
    os.mkfifo(pipe)
    start = time.monotonic()
    problem = flightrec.poke(str(pipe), os.getuid())
    assert problem is not None and "nobody reads" in problem
    assert time.monotonic() - start < 0.5


@pytest.mark.quiet  # a time is the assertion: run alone
def test_reader_that_never_reads_does_not_hang(tmp_path: Path) -> None:
    """A rank that opened its FIFO but never reads: the pipe fills, each poke returns at once."""
    pipe = tmp_path / "frpipe_0.pipe"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
    try:
        start = time.monotonic()
        results = [flightrec.poke(str(pipe), os.getuid()) for _ in range(40000)]
        assert time.monotonic() - start < 10
        assert results[0] is None
        assert any(r and "is full" in r for r in results)
    finally:
        os.close(fd)


@pytest.mark.quiet  # a time is the assertion: run alone
def test_trigger_waits_at_most_the_deadline(tmp_path: Path) -> None:
    """A rank whose pipe is read but who never writes a dump: the reader gives up on time."""
    pipe = tmp_path / "frpipe_3.pipe"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = Process(pid=os.getpid(), rank=RankInfo(global_rank=3), environ={
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(tmp_path / "frpipe_"),
            "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")})
        start = time.monotonic()
        reading = flightrec.read([proc], job_start=None, deadline_s=0.5)
        assert time.monotonic() - start < 1.5
        assert reading.triggered == (3,) and reading.status == ev.TIMEOUT
        assert os.read(fd, 16) == b"1\n"
    finally:
        os.close(fd)


def test_trigger_reads_the_fresh_dump(tmp_path: Path) -> None:
    """A reader that answers the pipe as torch's monitor does: writes the dump, which is read."""
    pipe = tmp_path / "frpipe_0.pipe"
    os.mkfifo(pipe)
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(b"stale")
    os.utime(dump, (time.time() - 30, time.time() - 30))
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)

    def monitor() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if os.read(fd, 16):
                    dump.write_bytes((FR / "behind" / "nccl_trace_rank_0").read_bytes())
                    return
            except BlockingIOError:
                pass
            time.sleep(0.02)

    thread = threading.Thread(target=monitor)
    thread.start()
    try:
        proc = Process(pid=os.getpid(), rank=RankInfo(global_rank=0), environ={
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(tmp_path / "frpipe_"),
            "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")})
        reading = flightrec.read([proc], job_start=None, deadline_s=3)
    finally:
        thread.join()
        os.close(fd)
    assert reading.status == ev.READ and reading.triggered == (0,)
    assert reading.dumps[0].entries[-1].op == "all_reduce"


def test_regular_file_named_like_a_pipe_is_not_written(tmp_path: Path) -> None:
    fake = tmp_path / "frpipe_0.pipe"
    fake.write_text("keep")
    assert "not a FIFO" in (flightrec.poke(str(fake), os.getuid()) or "")
    assert fake.read_text() == "keep"


_GOOD = (FR / "extra_op" / "nccl_trace_rank_1").read_bytes()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_GOOD)), st.binary(max_size=64), st.integers(0, len(_GOOD)))
def test_fuzz_truncated_and_corrupted_pickles(cut: int, junk: bytes, at: int) -> None:
    data = _GOOD[:cut]
    data = data[:at] + junk + data[at:]
    try:
        obj = flightrec.load_bytes(data)
    except flightrec.DumpError:
        return
    flightrec.parse_dump(obj, 1, "x")


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.sampled_from(
                        ["entries", "pg_status", "pg_config", "frames", "collective_seq_id",
                         "profiling_name", "process_group", "input_sizes", "ranks", "name",
                         "last_enqueued_collective", "is_p2p", "filename", "line"]),
                        kids, max_size=6), max_leaves=40))
def test_fuzz_dump_shapes(value: object) -> None:
    data = pickle.dumps(value)
    try:
        obj = flightrec.load_bytes(data)
    except flightrec.DumpError:
        return
    flightrec.parse_dump(obj, 0, "x")


def test_the_variables_the_collectors_read_survive_the_env_allow_list() -> None:
    from hangscope.collect import procfs, ras

    assert set(flightrec.ENV_KEYS + ras.ENV_KEYS) <= set(procfs.JOB_ENV_KEYS)


def test_buffer_size_zero_says_the_recorder_is_off(tmp_path: Path) -> None:
    proc = Process(pid=os.getpid(), rank=RankInfo(global_rank=0), environ={
        "TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "t_")})
    reading = flightrec.read([proc], trigger=False)
    assert reading.status == ev.NONE_FOUND and "TORCH_FR_BUFFER_SIZE=0" in reading.note


def test_a_lone_main_process_is_asked_as_rank_zero(tmp_path: Path) -> None:
    from hangscope.model import Role

    pipe = tmp_path / "frpipe_0.pipe"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = Process(pid=os.getpid(), role=Role.MAIN, environ={
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(tmp_path / "frpipe_"),
            "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")})
        reading = flightrec.read([proc], deadline_s=0.2)
        assert reading.triggered == (0,) and os.read(fd, 16) == b"1\n"
    finally:
        os.close(fd)


def test_a_process_with_no_rank_holding_rank_3s_pipe_is_rank_3(tmp_path: Path) -> None:
    """mp.spawn ranks carry no RANK; the debug-info pipe a rank holds open names it. A real
    process opens ``frpipe_3.pipe`` as torch's monitor does and answers it with a dump."""
    import subprocess
    import sys

    from hangscope.analyze.evidence.flightrec.rank_evidence import with_collective_ranks
    from hangscope.model import Role

    pipe, out = tmp_path / "frpipe_3.pipe", tmp_path / "nccl_trace_rank_3"
    os.mkfifo(pipe)
    src = FR / "behind" / "nccl_trace_rank_0"
    child = subprocess.Popen([sys.executable, "-c", (
        "import os, shutil, sys\n"
        f"fd = os.open({str(pipe)!r}, os.O_RDWR)\n"
        f"open({str(tmp_path / 'ready')!r}, 'w').close()\n"
        "os.read(fd, 8)\n"
        f"shutil.copy({str(src)!r}, {str(out)!r} + '.tmp')\n"
        f"os.replace({str(out)!r} + '.tmp', {str(out)!r})\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline and child.poll() is None, "child did not start"
            time.sleep(0.05)
        proc = Process(pid=child.pid, role=Role.OTHER, python=True, environ={
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(tmp_path / "frpipe_"),
            "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")})
        reading = flightrec.read([proc], None, trigger=True, deadline_s=20)
        assert reading.placed == ((3, child.pid),) and reading.triggered == (3,)
        assert reading.fresh == (3,)
        (numbered,) = with_collective_ranks([proc], None, reading)
        assert numbered.rank is not None and numbered.rank.global_rank == 3
        assert numbered.role is Role.RANK and numbered.rank.source == "collectives"
    finally:
        child.kill()
        child.wait(timeout=30)
