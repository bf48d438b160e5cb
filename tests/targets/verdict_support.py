"""The verdict tests' helpers, kept under their old name: they live in tests/support.py now
(``verdict_job``, ``dump_json``, ``show_text``), on the one harness ``running_target``."""

from __future__ import annotations

from support import TARGETS, Job, dump_json, show_text, verdict_job
from support import VERDICT_JOBS as JOBS

__all__ = ["JOBS", "TARGETS", "Job", "dump_json", "show_text", "verdict_job"]
