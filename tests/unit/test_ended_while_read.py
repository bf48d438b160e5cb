"""A job that ends while it is read is not hung (rules/exiting.py ``ended``).

GIVEN a real DDP job (tests/targets/frameworks/ddp_jobs.py ``ddp_finish``) told to stop once
the dump's first py-spy ran: both ranks exited inside the window, torchrun reaped them and
exited with code 0 (tests/fixtures/frameworks/ddp_finish_during_dump.dump.json) THEN
progressing, nobody blamed, the launcher's zombie said as a passing state (it read "missing
rank", both ranks suspects, and "whatever waits for it waits forever"). GIVEN the same with
any sign of a failure (an error line in a log, an exit code other than 0) THEN the missing
ranks stand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hangscope.analyze import analyze
from hangscope.model import Severity, Snapshot, VerdictKind
from hangscope.model.serialize import from_dict

DUMP = Path(__file__).parent.parent / "fixtures" / "frameworks" / "ddp_finish_during_dump.dump.json"


def _read(change: Any = None) -> Snapshot:
    data = json.loads(DUMP.read_text())
    if change is not None:
        change(data["processes"])
    return analyze(from_dict(data))


def test_given_every_rank_exited_during_the_dump_and_the_launcher_with_code_0_then_ended(
        ) -> None:
    snap = _read()
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict
    launcher = next(p for p in snap.processes if p.role == "launcher")
    assert verdict.summary.startswith(
        "The job ended while it was read: ranks 0-1 (PIDs "), verdict.summary
    assert f"the launcher (PID {launcher.pid}) exited with code 0 during it" in verdict.summary
    zombie = next(f for f in snap.findings if f.id == "proc.zombie")
    assert zombie.severity is Severity.INFO, zombie
    assert "during the dump" in zombie.message and "forever" not in zombie.message, zombie


def _error_line(procs: list[dict[str, Any]]) -> None:
    rank = next(p for p in procs if p["role"] == "rank")
    rank["log_errors"] = ["[rank1]: RuntimeError: Connection closed by peer"]


def _launcher_failed(procs: list[dict[str, Any]]) -> None:
    next(p for p in procs if p["role"] == "launcher")["exit_code"] = 1


def test_given_the_same_job_with_an_error_in_a_log_or_a_failed_launcher_then_not_ended(
        ) -> None:
    for change in (_error_line, _launcher_failed):
        verdict = _read(change).verdict
        assert verdict is not None and verdict.kind is VerdictKind.MISSING_RANK, (change, verdict)
