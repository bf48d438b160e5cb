"""DataLoader workers forked after a Hugging Face tokenizer's thread pool ran
(tests/targets/frameworks/tokenizer_fork.py; blind round 42's 03, tokenizers#187).

GIVEN ``TOKENIZERS_PARALLELISM=true`` and a batch encode before the workers fork THEN each
worker waits in the library's rayon latch forever: the workers the suspects, the tokenizers
pool named from its native frames, and the variable to set (it read a Python lock at the
collate's line, inherited locked). GIVEN the variable unset THEN the library's guard turns
parallelism off in the children: progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, asleep_children, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "tokenizer_fork.py"


def test_workers_forked_after_the_tokenizers_pool_ran_wait_in_it(tmp_path: Path) -> None:
    with verdict_job("forced", tmp_path, ["main"], timeout=90, jobs=JOBS) as job:
        # the two workers, forked as the loop asks for its first batch, asleep in their encode
        workers = asleep_children(job.launcher, 2)
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert sorted(verdict["suspects"]) == sorted(w.pid for w in workers), verdict
    summary = verdict["summary"]
    assert "in native code, rayon_core::" in summary, summary
    assert "(tokenizers.abi3.so), a lock of Hugging Face tokenizers' rayon thread pool, which " \
        f"ran in the main process (PID {job.launcher}) before it forked" in summary, summary
    assert "set TOKENIZERS_PARALLELISM=false" in summary, summary


def test_workers_the_library_guarded_at_fork_progress(tmp_path: Path) -> None:
    with verdict_job("guarded", tmp_path, ["main"], timeout=90, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
