"""A newcomer's reports (issue 20 items 4, 10, 11, 12, 15): what a user reads in a dump.

GIVEN a real hung straggler job (4 gloo ranks, rank 3 spins in Python, ranks 0-2 wait in
all_reduce), WHEN ``hangscope dump PID`` runs as a process at 80 columns (text) and as
Markdown, THEN the report says only what applies, once, in the words the table uses, and the
Markdown renders (CommonMark, markdown-it-py) with its paths and frames whole.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from markdown_it import MarkdownIt

WINDOW = ("--window", "2", "--samples", "3")


@pytest.fixture(scope="module")
def straggler_reports(shared_demo: Any) -> dict[str, str]:
    """The text (80 columns) and Markdown dumps of one hung straggler job."""
    import support

    job = shared_demo("straggler")
    out = {}
    for fmt in ("text", "md"):
        result = support.run_cli("dump", str(job.pid), "--format", fmt, *WINDOW, timeout=120,
                                 env={"COLUMNS": "80"})
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        out[fmt] = result.stdout
    return out


def _verdict_box(text: str) -> str:
    return text[text.index("VERDICT"):text.index("╰")]


def _table_row(text: str, rank: str) -> str:
    table = text[text.index("\nProcesses\n"):]
    return next(line for line in table.splitlines()
                if re.match(rf"\s*{re.escape(rank)}\s+\d+\s+rank\b", line))


@pytest.mark.extended
def test_stuck_column_is_a_lower_bound_from_the_first_sample(
        straggler_reports: dict[str, str]) -> None:
    # THEN the waiting ranks read at least "≥ 2 s" (unchanged over the 2 s window; longer
    # where the kernel says the thread has been off CPU longer: its se.exec_start), the
    # spinning rank "moving"; never a bare count from the attach
    text = straggler_reports["text"]
    header = next(line for line in text[text.index("\nProcesses\n"):].splitlines()[2:3])
    assert "same" in header  # not "stuck": an idle or paused job's stack stays the same too
    for rank in ("0", "1", "2"):
        assert _at_least_s(_table_row(text, rank)) >= 2, _table_row(text, rank)
    assert "moving" in _table_row(text, "3")
    md_rows = [line for line in straggler_reports["md"].splitlines()
               if line.startswith("| 0 |")]
    assert md_rows and _at_least_s(md_rows[0]) >= 2, md_rows


def _at_least_s(row: str) -> int:
    """The seconds of a row's "≥ N s" / "≥ N min" / "≥ N h" stuck time (0: none)."""
    found = re.search(r"≥ (\d+) (s|min|h)\b", row)
    if found is None:
        return 0
    return int(found.group(1)) * {"s": 1, "min": 60, "h": 3600}[found.group(2)]


def test_gloo_job_has_no_nccl_notes_nor_its_ports(straggler_reports: dict[str, str]) -> None:
    # THEN a gloo job gets no NCCL RAS or Flight Recorder note, no advice to set a variable
    # that does nothing without NCCL, and no list of the ports its ranks listen on
    for report in straggler_reports.values():
        for noise in ("NCCL RAS", "Flight Recorder", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
                      "listens on TCP", "No NCCL in this job"):
            assert noise not in report, noise


def test_straggler_box_has_one_bullet_for_the_waiting_ranks(
        straggler_reports: dict[str, str]) -> None:
    box = _verdict_box(straggler_reports["text"])
    bullets = [line for line in box.splitlines() if line.startswith("│   · ")]
    # THEN one bullet for ranks 0-2 (their PIDs listed), one for rank 3; none per waiting rank
    assert sum("ranks 0-2 (PIDs " in b for b in bullets) == 1, box
    assert not any(re.search(r"· rank [012] \(PID", b) for b in bullets), box
    assert sum("rank 3 (PID " in b for b in bullets) == 1, box
    # and no "stuck" bullet follows the rank shown progressing
    after = bullets[next(i for i, b in enumerate(bullets) if "rank 3 (PID " in b) + 1:]
    assert not any("stuck" in b for b in after), box


def test_labels_say_each_pid_once_and_never_as_a_range(
        straggler_reports: dict[str, str]) -> None:
    for report in straggler_reports.values():
        # THEN no "PID 12 (PID 12)", no "PIDs 12-14" (a range reads as ranks)
        assert not re.search(r"PID (\d+) \(PID \1\)", report)
        assert not re.search(r"PIDs \d+-\d+", report)
        # and a stack is named by who it is, not by its role ("stack of other")
        assert "stack of other" not in report
        assert "stack of rank 0 (PID " in report


def test_markdown_renders_with_code_spans_and_even_indents(
        straggler_reports: dict[str, str]) -> None:
    md = straggler_reports["md"]
    html = MarkdownIt("commonmark").enable("table").render(md)
    # THEN the verdict's frames are code spans (underscores and <module> survive GitHub)
    assert re.search(r"<code>preprocess_batch \(straggler\.py:\d+\)</code>", html), html[:2000]
    # and no emphasis opens inside a sentence of the report (an `_` of a path or a name)
    assert "<em>" not in html
    # and every frame line of a stack block has the same indent, native or Python
    blocks = re.findall(r"```\n(.*?)```", md, re.S)
    assert blocks
    for block in blocks:
        indents = {len(line) - len(line.lstrip()) for line in block.splitlines() if line}
        assert len(indents) == 1, block


@pytest.mark.extended
def test_a_job_without_ranks_names_each_process_once(tmp_path: Any) -> None:
    # GIVEN two plain Python processes (a client polling for a reply its server never sends)
    from support import TARGETS, run_cli, verdict_job

    with verdict_job("select_loop", tmp_path, ["client", "server"],
                     jobs=TARGETS / "calm_jobs.py") as job:
        result = run_cli("dump", str(job.pids["client"]), *WINDOW, timeout=120,
                         env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    text = result.stdout
    # THEN no "PID 12 (PID 12)" in the verdict's bullets, no "stack of other (PID 12)"
    assert not re.search(r"PID (\d+) \(PID \1\)", text), text
    assert "stack of other" not in text, text
    assert f"PID {job.pids['server']}" in text


def test_demo_says_what_it_does_in_a_whole_sentence() -> None:
    import support

    # WHEN a newcomer runs a demo
    result = support.run_cli("demo", "deadlock", "--samples", "2", "--window", "0.5",
                             timeout=180)
    assert result.returncode == 0, result.stderr
    # THEN the line before the report is a whole sentence naming the command it stands for
    line = next(row for row in result.stderr.splitlines() if "demo is hung" in row)
    assert re.search(r"diagnosing it, as `hangscope dump \d+` does\.$", line), line
