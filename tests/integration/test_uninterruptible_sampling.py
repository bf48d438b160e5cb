"""A rank in uninterruptible sleep (state D) is sampled once, briefly, then reported from /proc.

ptrace cannot stop a task in D until it leaves the kernel, so a py-spy that stops its target
waits out the whole ``--timeout`` on it, in every round. The target is real: the parent of a
``vfork`` whose child never execs (tests/targets/vfork_stuck.py) sits in D.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import TARGETS, poll, running_target

# Its assertion is a time (one short read, not a 4 s --timeout): run alone.
pytestmark = pytest.mark.quiet


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_process_in_state_d_costs_one_short_read_not_a_timeout_per_round(
        hangscope_cli: Any, tmp_path: Path) -> None:
    with running_target([sys.executable, str(TARGETS / "vfork_stuck.py"), "--ready-file",
                         str(tmp_path / "ready")], tmp_path,
                        tags=["vfork"]) as proc:
        poll(lambda: _state(proc.pid) == "D", "state D")
        started = time.monotonic()
        result = hangscope_cli("dump", str(proc.pid), "--format", "json", "--samples", "3",
                               "--window", "0.4", "--timeout", "4", timeout=120)
        elapsed = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        doc = json.loads(result.stdout)
        stuck = next(p for p in doc["processes"] if p["pid"] == proc.pid)
        assert stuck["state"] == "D"
        # Three rounds of a py-spy that waits for the stop would cost 3 x 4 s (and more with a
        # native retry); one short non-stopping read and /proc facts cost far less than one.
        assert elapsed < 4, f"{elapsed:.1f} s: the D process cost a --timeout"
        (finding,) = [f for f in doc["findings"] if f["id"] == "proc.uninterruptible"
                      and f["evidence"]["pid"] == proc.pid]
        assert "uninterruptible sleep (state D)" in finding["message"]
        if os.geteuid() == 0:  # /proc/PID/stack needs root
            assert any("vfork" in line for line in stuck["kernel_stack"]), stuck["kernel_stack"]
        frames = [f["name"] for t in stuck["threads"] for f in t["frames"]]
        assert "main" in frames, "the one short read did not get the Python stack"
        assert _state(proc.pid) == "D", "hangscope changed the target's state"
