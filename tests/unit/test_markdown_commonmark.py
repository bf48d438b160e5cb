"""The Markdown report as GitHub renders it (issue 20 item 11), through a CommonMark renderer.

GIVEN a recorded NCCL-less dump and the Flight Recorder note hangscope writes for a job that
has NCCL but no dump (its real wording, from collect/flightrec.py), WHEN the report is rendered
by markdown-it-py, THEN the note's path and setting keep every underscore, no italics open,
and frames in the verdict are code.
"""

from __future__ import annotations

from dataclasses import replace

import support
from markdown_it import MarkdownIt

from hangscope.model.serialize import load
from hangscope.render.markdown import code_spans, render_markdown

FR_NOTE = ("Flight Recorder: no dump of this job at /tmp/nccl_trace_rank_* (start the job with "
           "TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/frpipe_ to be able to ask for one).")


def _html(md: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(md)


def test_flight_recorder_note_keeps_its_underscores_and_no_italics() -> None:
    snap = load(support.SNAPSHOTS / "mismatch.json")
    html = _html(render_markdown(replace(snap, notes=(*snap.notes, FR_NOTE))))
    assert "<code>/tmp/nccl_trace_rank_*</code>" in html
    assert "<code>TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/frpipe_</code>" in html
    assert "<em>" not in html


def test_verdict_frames_are_code_spans() -> None:
    html = _html(render_markdown(load(support.SNAPSHOTS / "mismatch.json")))
    assert "<code>gather_metrics (mismatch.py:68)</code>" in html
    assert "<code>all_gather</code>" in html


def test_code_spans_leave_existing_spans_and_plain_words_alone() -> None:
    assert code_spans("ranks 0-2 wait in `all_reduce` at step (a.py:3)") == \
        "ranks 0-2 wait in `all_reduce` at `step (a.py:3)`"
    assert code_spans("state S, CPU 0%, 2.0 s") == "state S, CPU 0%, 2.0 s"


def test_the_job_line_says_ranks_only_for_a_job_of_ranks() -> None:
    """A uvicorn server has no ranks: its Markdown job line said "ranks 0" (which reads as
    every rank missing) where the text header says none; a job of ranks keeps its count."""
    blind = support.FIXTURES / "blind"
    server = render_markdown(load(blind / "uvicorn_lifespan_never_yields.dump.json"))
    job_line = next(line for line in server.splitlines() if line.startswith("**Job**"))
    assert "ranks" not in job_line, job_line
    ranks = render_markdown(load(blind / "accelerate_pad_branch_rank1.dump.json"))
    assert " · ranks 2/2 · " in ranks, ranks.splitlines()[2]
