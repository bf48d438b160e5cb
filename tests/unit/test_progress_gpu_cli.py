"""The integrated CLI's real H200 dumps of healthy and hung GPU workloads, analysed again.

tests/fixtures/progress/gpu_cli/NAME.json is the first of ten `hangscope dump --format json`
runs per workload on one H200 (demo/gpu/healthy.py; docs/gpu.md "Busy or progressing?").
GIVEN such a dump WHEN the current analyzer reads it again THEN healthy work still reads
progressing and a spinning kernel still reads all waiting, decided by the GPU.
"""

from __future__ import annotations

import pytest
import support

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

GPU_CLI = support.FIXTURES / "progress" / "gpu_cli"


@pytest.mark.parametrize(("workload", "kind"), [
    ("matmul", VerdictKind.PROGRESSING),
    ("train", VerdictKind.PROGRESSING),
    ("decode", VerdictKind.PROGRESSING),
    ("spin", VerdictKind.ALL_WAITING),
    ("spin_flag", VerdictKind.ALL_WAITING),
])
def test_given_real_h200_dump_when_reanalysed_then_same_verdict(workload: str,
                                                                 kind: VerdictKind) -> None:
    recorded = load(GPU_CLI / f"{workload}.json")
    assert recorded.verdict is not None and recorded.verdict.kind is kind
    again = analyze(recorded)
    assert again.verdict is not None and again.verdict.kind is kind
    if kind is VerdictKind.ALL_WAITING:
        assert "spinning kernel" in again.verdict.summary
