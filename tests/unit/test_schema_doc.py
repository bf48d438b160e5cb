"""docs/json-schema.md names every field the JSON carries: the contract stays written down."""

from __future__ import annotations

import dataclasses

from support import REPO_ROOT

from hangscope import model
from hangscope.model import nccl as evidence
from hangscope.model import progress as progress_evidence
from hangscope.model import waits as wait_evidence

DOC = REPO_ROOT / "docs" / "json-schema.md"


def test_every_model_field_is_documented() -> None:
    text = DOC.read_text()
    missing = []
    for cls in (model.Snapshot, model.Host, model.Gpu, model.Job, model.Process, model.Thread,
                model.Frame, model.RankInfo, model.Socket, model.GpuProcessUse, model.Group,
                model.TreeNode, model.Verdict, model.Finding, evidence.CollectiveEvidence,
                evidence.Communicator, evidence.RankPosition, evidence.MissingRank,
                evidence.Disagreement, evidence.Side, evidence.Conclusion,
                progress_evidence.JobProgress, progress_evidence.RankProgress, model.Readings,
                wait_evidence.WaitEvidence, wait_evidence.FileLockRecord,
                wait_evidence.LocalsRead, wait_evidence.P2PCall):
        missing += [f"{cls.__name__}.{f.name}" for f in dataclasses.fields(cls)
                    if f'"{f.name}"' not in text]
    assert missing == [], f"add these fields to docs/json-schema.md: {missing}"


def test_documented_schema_version_is_the_one_written() -> None:
    assert f'"schema": "{model.SCHEMA}"' in DOC.read_text()
