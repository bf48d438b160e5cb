"""A rank at a console prompt on a FIFO that stands in for its terminal, on real gloo jobs
(tests/targets/prompt_jobs.py).

GIVEN rank 0 at a ``cmd.Cmd`` prompt reading a FIFO whose write end every rank and the launcher
hold (inherited), while ranks 1-2 wait in barrier for it THEN no deadlock: the prompt nobody
answers, rank 0 the suspect at its own line, the holders of the write end named as able to
answer. GIVEN the launcher answering the console every 20 ms (the healthy twin) THEN
progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_dump

JOBS = TARGETS / "prompt_jobs.py"
TAGS = ["launcher", "rank0", "rank1", "rank2"]


def _verdict(mode: str, tmp_path: Path) -> tuple[dict, dict[str, int]]:
    data, pids = job_dump(mode, tmp_path, TAGS, JOBS)
    return data["verdict"], pids


def test_a_rank_at_a_console_prompt_on_a_fifo_its_peers_could_write_is_the_suspect(
        tmp_path: Path) -> None:
    verdict, pids = _verdict("unanswered", tmp_path)
    assert (verdict["kind"], verdict["suspects"]) == ("wait_chain", [pids["rank0"]]), verdict
    summary = verdict["summary"]
    line = JOBS.read_text().splitlines().index(
        "            Console(stdin=commands, stdout=sys.stdout).cmdloop()") + 1
    assert summary.startswith("A prompt nobody answers: "), summary
    assert (f"rank 0 (PID {pids['rank0']}) waits for input on FIFO "
            f"{tmp_path / 'job-unanswered' / 'console'} at rank_main (prompt_jobs.py:{line}) "
            "(a prompt), which nobody answers") in summary, summary
    assert "hold its write end and could answer, but none writes" in summary, summary
    assert "waits in barrier" in summary, summary


@pytest.mark.extended
def test_a_rank_whose_console_the_launcher_answers_is_progressing(tmp_path: Path) -> None:
    verdict, _ = _verdict("answered", tmp_path)
    assert verdict["kind"] == "progressing", verdict
