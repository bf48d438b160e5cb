"""CUDA graph capture seen inside ``with torch.cuda.graph(g):`` (issue 19, item 4).

No torch frame is on the stack there, so the frame's own source says it. The capture is
real (tests/fixtures/gpu/capture_nccl/, H200, demo/gpu/nccl_jobs.py ``capture``): rank 0
captures an NCCL all_reduce and then waits on the CPU group inside the block; rank 1 has left
its block. ``nccl_jobs.py.txt`` is the source that ran; the dumps point at it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import FIXTURES

from hangscope.analyze import analyze
from hangscope.analyze.evidence.classify import classify_thread
from hangscope.collect import source
from hangscope.collect.pyspy import parse_dump
from hangscope.model import Thread
from hangscope.model.serialize import load

CAPTURE = FIXTURES / "gpu" / "capture_nccl"


def _main_thread(rank: int) -> Thread:
    text = (CAPTURE / f"rank{rank}.locals.json").read_text()
    text = text.replace("@SOURCE@/nccl_jobs.py", str(CAPTURE / "nccl_jobs.py.txt"))
    dump = parse_dump(1, text, native=True)
    raw = next(t for t in dump.threads if any(f.name == "rank_main" for f in t.frames))
    return classify_thread(Thread(tid=raw.tid, name=raw.name, frames=raw.frames,
                                  active=raw.active, python=True))


def test_a_rank_waiting_inside_the_capture_block_is_in_capture() -> None:
    thread = _main_thread(0)
    assert thread.context == "cuda_graph_capture"
    assert thread.op == "all_reduce"
    frame = next(f for f in thread.frames if f.capture)
    assert frame.capture == "torch.cuda.graph(g) (nccl_jobs.py.txt:152)"


def test_a_rank_past_its_capture_block_is_not() -> None:
    assert _main_thread(1).context is None


def test_the_live_dump_says_capture_in_the_verdict() -> None:
    snap = analyze(load(FIXTURES / "nccl/live_h200/capture-plain.dump.json"))
    assert "inside CUDA graph capture" in snap.verdict.summary


def test_with_blocks_are_found_by_alias_and_import() -> None:
    code = ("import torch.cuda as tc\nfrom torch.cuda import graph as G\n"
            "def f(g, h):\n    with tc.graph(g):\n        a()\n        b()\n"
            "    with G(h), open('x'):\n        c()\n    with torch.no_grad():\n        d()\n")
    blocks = source.capture_blocks(ast.parse(code))
    assert [(first, last, text) for first, last, text, _ in blocks] == [
        (5, 6, "tc.graph(g)"), (8, 8, "G(h)")]


def test_unreadable_or_unparsable_sources_give_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n  graph\n")
    assert source.capture_block(str(bad), 2) is None
    assert source.capture_block(str(tmp_path / "missing.py"), 1) is None
