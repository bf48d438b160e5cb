"""DataLoader workers forked after a Hugging Face tokenizer's thread pool ran
(tests/targets/frameworks/tokenizer_fork.py; blind round 42's 03, tokenizers#187).

GIVEN ``TOKENIZERS_PARALLELISM=true`` and a batch encode before the workers fork THEN each
worker waits in the library's rayon latch forever: the workers the suspects, the tokenizers
pool named from its native frames, and the variable to set (it read a Python lock at the
collate's line, inherited locked). GIVEN the variable unset THEN the library's guard turns
parallelism off in the children: progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_verdict

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "tokenizer_fork.py"


def test_workers_forked_after_the_tokenizers_pool_ran_wait_in_it(tmp_path: Path) -> None:
    # the two workers, forked as the loop asks for its first batch, asleep in their encode
    got = job_verdict("forced", tmp_path, ["main"], JOBS, timeout=90, sleepers=2)
    verdict, text = got.verdict, got.text
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert sorted(verdict["suspects"]) == sorted(got.sleepers), verdict
    summary = verdict["summary"]
    assert "in native code, rayon_core::" in summary, summary
    assert "(tokenizers.abi3.so), a lock of Hugging Face tokenizers' rayon thread pool, which " \
        f"ran in the main process (PID {got.launcher}) before it forked" in summary, summary
    assert "set TOKENIZERS_PARALLELISM=false" in summary, summary


def test_workers_the_library_guarded_at_fork_progress(tmp_path: Path) -> None:
    got = job_verdict("guarded", tmp_path, ["main"], JOBS, timeout=90)
    assert got.verdict["kind"] == "progressing", (got.verdict, got.text)
