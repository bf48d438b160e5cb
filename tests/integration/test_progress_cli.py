"""Progress measured by the CLI on a real torchrun-style gloo job (tests/targets/progress_gloo.py).

GIVEN 4 gloo ranks whose steps are almost all ``time.sleep`` (rank 0) or waiting for rank 0 in
``all_reduce`` (ranks 1-3), every stack sample the same most of the time, WHEN ``hangscope
dump PID --format json`` runs 5 times on the running job (20 in the slow tier), THEN every one
reads progressing and says which evidence decided. With ``--no-progress``, or when ``py-spy
record`` fails, the dump still succeeds, says why progress was not measured, and decides from the
stack samples.
Readiness: each rank appends a line to a ready file once in its steady state (polled).
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import TARGETS, run_cli, running_target

from hangscope.collect.pyspy import find_pyspy

# The progress jobs measure CPU and wakeups of 4 busy ranks: one such job at a time.
pytestmark = pytest.mark.xdist_group("progress")
NPROC = 4
RUNS = 5  # the default tier; the slow tier runs SOAK_RUNS
SOAK_RUNS = 20


@pytest.fixture(scope="module")
def sleepy_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The launcher PID of a running sleepy job (each rank in its steady state: a ready line
    each); its process group is killed at teardown."""
    workdir = tmp_path_factory.mktemp("progress-cli")
    with running_target([sys.executable, str(TARGETS / "progress_gloo.py"), "sleepy", "--nproc",
                         str(NPROC), "--ready-file", str(workdir / "ready")], workdir,
                        ready=lambda t: len(t.ready_lines()) >= NPROC) as job:
        yield job.launcher


def dump_json(pid: int, *extra: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = run_cli("dump", str(pid), "--format", "json", *extra, timeout=120.0, env=env)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def _all_progressing(pid: int, runs: int) -> None:
    wrong = []
    for _ in range(runs):
        data = dump_json(pid)
        verdict, progress = data["verdict"], data["progress"]
        # Under load the dump's own native pauses of the ranks can stall the job for most of
        # the window (the extended tier once saw no collective complete in 2.4 s): the job
        # then reads "Slow, not hung" (the same verdict kind, the window's decision "slow"),
        # never hung nor stuck.
        if verdict["kind"] != "progressing" or progress["decision"] not in (
                "progressing", "slow"):
            wrong.append((verdict["summary"], progress["reason"]))
            continue
        assert verdict["summary"].startswith(("Progressing over ", "Slow, not hung: "))
        decided = {r["evidence"] for r in progress["ranks"]}
        assert len(progress["ranks"]) == NPROC and decided <= {"python", "counters"}
        assert "(Python lines, py-spy record)" in " ".join(verdict["evidence"]) or \
            "(kernel counters)" in " ".join(verdict["evidence"])
    assert wrong == [], f"{len(wrong)} of {runs} dumps did not read progressing: {wrong[:3]}"


@pytest.mark.extended
def test_given_sleepy_torchrun_job_then_5_of_5_dumps_read_progressing(sleepy_job: int) -> None:
    _all_progressing(sleepy_job, RUNS)


# 20 real dumps of ~2.5 s each (the native round, then the whole 2 s window), more on a loaded
# machine: past the suite's 180 s default.
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_given_sleepy_torchrun_job_then_20_of_20_dumps_read_progressing(sleepy_job: int) -> None:
    _all_progressing(sleepy_job, SOAK_RUNS)


@pytest.mark.extended
def test_given_sleepy_job_then_the_text_report_says_which_evidence_decided(
        sleepy_job: int) -> None:
    result = run_cli("dump", str(sleepy_job), timeout=120.0)
    assert result.returncode == 0, result.stderr
    assert "Progressing over" in result.stdout
    assert "kernel counters" in result.stdout or "Python lines" in result.stdout


@pytest.mark.extended
def test_given_no_progress_flag_then_no_measurement_and_the_stack_samples_decide(
        sleepy_job: int) -> None:
    data = dump_json(sleepy_job, "--no-progress")
    assert data["progress"] is None
    assert not data["verdict"]["summary"].startswith("Progressing over")
    assert not any("progress" in note.lower() for note in data["notes"])


def test_given_py_spy_record_failing_then_a_note_and_the_stack_samples_decide(
        sleepy_job: int, tmp_path: Path) -> None:
    # A py-spy whose record subcommand fails as an old or broken one does; dump is the real one.
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = record ]; then echo "Error: record is not supported here" >&2; exit 1; fi\n'
        f'exec {find_pyspy()} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    data = dump_json(sleepy_job, env={"HANGSCOPE_PYSPY": str(wrapper)})
    assert data["progress"]["ranks"] == []
    notes = [n for n in data["notes"] if n.startswith("Progress not measured for PID")]
    assert len(notes) == 1, data["notes"]
    assert "record is not supported here" in notes[0]
    assert data["verdict"]["kind"] in ("all_waiting", "progressing", "straggler", "unknown")
    assert not data["verdict"]["summary"].startswith("Progressing over")


@pytest.mark.extended
def test_given_one_process_busy_in_one_c_call_then_slow_not_proven_hung(tmp_path: Path) -> None:
    # A catastrophically backtracking regex: one Python line, 100% CPU, no GPU. Neither a move
    # nor a hang can be proven: the verdict says so, and which evidence it looked at.
    with running_target([sys.executable, str(TARGETS / "progress_single.py"), "regex",
                         str(tmp_path / "ready")], tmp_path, tags=["regex"], timeout=30) as job:
        data = dump_json(job.launcher)
    assert data["progress"]["decision"] == "slow"
    assert [r["evidence"] for r in data["progress"]["ranks"]] == ["counters"]
    summary = data["verdict"]["summary"]
    assert f"Slow, not proven hung: PID {job.launcher} (the thread ran" in summary, summary
    assert "a spin or work" in summary
    assert any("slow (kernel counters)" in line for line in data["verdict"]["evidence"])
