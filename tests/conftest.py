"""Shared fixtures: hung demo jobs, the hangscope CLI, py-spy."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

# The repository root and tests/ are on sys.path through ``pythonpath`` in pyproject.toml, so
# plain ``pytest`` on an uninstalled checkout finds ``hangscope`` and ``support`` too.
from support import REPO_ROOT  # noqa: F401  # the name tests imported from here
from support import cli_env as _cli_env  # noqa: F401  # the name tests imported from here

if TYPE_CHECKING:
    from hangscope.demo.jobs import DemoJob

StartDemo = Callable[..., "DemoJob"]
RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


def _demo_factory(stack: ExitStack, workdir: Callable[[str], Path],
                  shared: bool) -> StartDemo:
    """``start(name, timeout=90.0) -> DemoJob``: each job killed when ``stack`` closes;
    ``shared``: one job per demo name, handed to every caller."""
    from hangscope.demo.jobs import running_demo

    jobs: dict[str, DemoJob] = {}

    def start(name: str, timeout: float = 90.0) -> DemoJob:
        if shared and name in jobs:
            return jobs[name]
        # One workdir per start, so two jobs of one demo never share a ready file.
        job = stack.enter_context(running_demo(name, workdir=workdir(name), timeout=timeout))
        jobs[name] = job
        return job

    return start


@pytest.fixture
def demo_job(tmp_path: Path) -> Iterator[StartDemo]:
    """Factory: ``start(name, timeout=90.0) -> DemoJob``; everything is killed at teardown."""
    counter = iter(range(1, 1 << 30))
    with ExitStack() as stack:
        yield _demo_factory(stack, lambda name: tmp_path / f"demo-{next(counter)}-{name}",
                            shared=False)


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartDemo]:
    """Like ``demo_job``, but each demo runs once for the whole module: for tests that only
    read the job (dump it, list it), never change it."""
    with ExitStack() as stack:
        yield _demo_factory(stack, lambda name: tmp_path_factory.mktemp(f"demo-{name}"),
                            shared=True)


@pytest.fixture
def hangscope_cli() -> RunCli:
    """``run(*args, timeout=60.0, env=None, input=None)``: ``python -m hangscope ARGS``."""
    from support import run_cli

    return run_cli


def find_py_spy() -> str | None:
    """The py-spy binary: on PATH, or next to this interpreter (a venv's bin/)."""
    found = shutil.which("py-spy")
    if found:
        return found
    candidate = Path(sys.executable).parent / "py-spy"
    return str(candidate) if candidate.is_file() else None


@pytest.fixture
def py_spy() -> str:
    """Path of the py-spy binary (skips the test if there is none)."""
    path = find_py_spy()
    if path is None:
        pytest.skip("py-spy not installed")
    return path


# Hypothesis's per-example deadline (200 ms by default) measures the machine, not the code, on
# 4 workers sharing 2 cores; a generous one still catches a pathological example. (Speed is
# asserted by the ``quiet`` tests, and measured in benchmarks/.)
settings.register_profile("hangscope", deadline=timedelta(seconds=2))
settings.load_profile("hangscope")


# -- parallel workers (pytest-xdist) --------------------------------------------------------
#
# ``python -m pytest`` runs the tests on several workers (``-n`` in pyproject.toml) with
# ``--dist loadgroup``. Every test without an ``xdist_group`` mark is grouped by its module, so
# a module's tests run on one worker, in order, and a module-scoped job (``shared_demo``, a
# dumped broken server) is started once. A test marked ``quiet`` runs alone: no other test of
# any worker runs while it does (its assertion measures time or needs the PIDs to itself).


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "quiet: runs alone, no other test alongside (timing, "
                                       "PID reuse): see tests/conftest.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # before xdist's own hook reads the marks
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _share_files() -> tuple[int, int] | None:
    """The two lock files every worker of this run opens (None outside xdist): a turnstile
    that makes a waiting ``quiet`` test first in line, and the shared/exclusive lock itself."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    base = Path(tempfile.gettempdir()) / f"hangscope-tests-{run}"
    return tuple(os.open(f"{base}.{name}", os.O_RDWR | os.O_CREAT, 0o666)  # type: ignore[return-value]
                 for name in ("turnstile", "lock"))


_SHARE: tuple[int, int] | None = None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Every test holds the run's lock shared; a ``quiet`` test holds it alone. Outermost
    (tryfirst), so the wait for the lock is not counted by pytest-timeout."""
    global _SHARE
    if _SHARE is None:
        _SHARE = _share_files() or (-1, -1)
    turnstile, lock = _SHARE
    if lock < 0:
        yield
        return
    alone = item.get_closest_marker("quiet") is not None
    fcntl.flock(turnstile, fcntl.LOCK_EX)  # a waiting quiet test holds it: nobody new starts
    try:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    finally:
        fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
