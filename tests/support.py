"""What the tests share: waiting with a deadline, running the CLI, real captured snapshots.

Imported by tests in every tier (tests/ is on sys.path through tests/conftest.py). Nothing
here sleeps and hopes: every wait polls a condition against a deadline and says what it
waited for when it gives up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hangscope.analyze import analyze
from hangscope.model import Snapshot
from hangscope.serialize import load

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"
GPU_DUMPS = FIXTURES / "gpu" / "validation"
TARGETS = TESTS / "targets"

if TYPE_CHECKING:
    from textual.pilot import Pilot

T = TypeVar("T")


def poll(condition: Callable[[], T | None], what: str, timeout: float = 20.0,
         interval: float = 0.05) -> T:
    """Call ``condition`` until it returns something truthy; fail naming ``what`` at the
    deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


async def until(pilot: Pilot, condition: Callable[[], object], what: str,
                timeout: float = 10.0) -> None:
    """Let a Textual app run until ``condition()`` holds, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a ``python -m hangscope`` child that imports this checkout."""
    import hangscope

    env = dict(os.environ)
    package_parent = Path(hangscope.__file__).resolve().parent.parent
    if package_parent == REPO_ROOT:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def run_cli(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m hangscope ARGS`` as a user runs it: text out, exit code, no exception."""
    return subprocess.run([sys.executable, "-m", "hangscope", *args], capture_output=True,
                          text=True, timeout=timeout, env=cli_env(env), input=input,
                          check=False)


def fixture_path(name: str) -> Path:
    """A recorded dump by name: ``mismatch`` (tests/fixtures/snapshots) or ``sync`` (the
    H200 validation run, tests/fixtures/gpu/validation/sync.dump.json)."""
    for path in (SNAPSHOTS / f"{name}.json", GPU_DUMPS / f"{name}.dump.json"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"no recorded snapshot named {name!r}")


@cache
def reanalysed(name: str) -> Snapshot:
    """A recorded real snapshot, analysed again by the current analyzer (cached per run)."""
    return analyze(load(fixture_path(name)))


def recorded_names() -> list[str]:
    """Every recorded snapshot: the demo recordings, then the H200 validation dumps."""
    return sorted(p.stem for p in SNAPSHOTS.glob("*.json")) + sorted(
        p.name.removesuffix(".dump.json") for p in GPU_DUMPS.glob("*.dump.json"))
