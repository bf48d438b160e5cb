"""One rank label everywhere (``words.rank_label``): the verdict's sentences, the text and
Markdown process tables and the TUI's rank column name a rank of a DP x TP job the same way.

GIVEN the real recorded 2x3 DP x TP gloo job hung in mismatched collectives
(tests/fixtures/waits/dp_tp_mismatch.dump.json) WHEN shown as text and Markdown THEN every
rank is ``DP<d>·TP<t>`` in the verdict and in the table, never ``DP<d> TP<t>``.
"""

from __future__ import annotations

import re

from support import FIXTURES, run_cli

from hangscope.model import RankInfo
from hangscope.model.serialize import load
from hangscope.words import rank_label, short_who

DUMP = FIXTURES / "waits" / "dp_tp_mismatch.dump.json"


def test_the_label_names_coordinates_else_the_number() -> None:
    assert rank_label(RankInfo(global_rank=4, dp=1, tp=1)) == "DP1·TP1"
    # A lone TP coordinate is the number sentences say ("rank 3"), not "TP3" (issue 20 item 15)
    assert rank_label(RankInfo(global_rank=3, tp=3)) == "3"
    assert rank_label(RankInfo(tp=3, ep=3)) == "TP3·EP3"
    assert rank_label(RankInfo(global_rank=3)) == "3"
    assert rank_label(RankInfo()) == "?"
    assert rank_label(None) == "-"


def test_sentences_and_tables_name_each_rank_alike() -> None:
    snap = load(DUMP)
    ranks = [p for p in snap.processes if p.rank is not None and p.rank.replicated]
    assert len(ranks) == 6
    for fmt in ("text", "md"):
        out = run_cli("show", str(DUMP), "--format", fmt, timeout=120)
        assert out.returncode == 0, out.stderr
        assert not re.search(r"DP\d TP\d", out.stdout), fmt
        for proc in ranks:
            label = rank_label(proc.rank)
            assert short_who(proc) == label
            row = re.search(rf"^\|? ?{re.escape(label)}\s*\|?\s*{proc.pid}\b", out.stdout, re.M)
            assert row, f"{fmt}: no table row {label} {proc.pid}"
        assert "DP1·TP2" in (snap.verdict.summary if snap.verdict else "")
