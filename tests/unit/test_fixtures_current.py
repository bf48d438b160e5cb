"""The recorded snapshots carry what the current analyzer derives from their raw facts.

When classification, a rule or a finding changes, this fails until
``.venv/bin/python -m tests.fixtures.regen`` rewrites them (and the TUI snapshots that show
them are reviewed with ``pytest tests/tui --snapshot-update``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from support import FIXTURES

_spec = importlib.util.spec_from_file_location("fixtures_regen", FIXTURES / "regen.py")
assert _spec is not None and _spec.loader is not None
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)


def test_recorded_snapshots_are_analysed_by_the_current_analyzer() -> None:
    stale = [p.name for p in regen.stale()]
    assert stale == [], f"run python -m tests.fixtures.regen: {stale}"


def test_regeneration_replaces_an_older_analysis(tmp_path: Path) -> None:
    """A file whose verdict another analyzer wrote is rewritten to today's, raw facts kept."""
    path = FIXTURES / "snapshots" / "mismatch.json"
    text = path.read_text()
    older = tmp_path / "mismatch.json"
    older.write_text(text.replace("The odd one out is rank 3.", "Rank 3 is the odd one.", 1))
    assert older.read_text() != text
    assert regen.current(older) == regen.current(path)
    assert "The odd one out is rank 3." in regen.current(older)
