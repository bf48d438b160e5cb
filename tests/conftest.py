"""Shared fixtures: hung demo jobs, the hangscope CLI, py-spy."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Plain ``pytest`` (unlike ``python -m pytest``) does not put the repository
# root on sys.path, so an uninstalled checkout would not find ``hangscope``.
if importlib.util.find_spec("hangscope") is None:
    sys.path.insert(0, str(REPO_ROOT))

if TYPE_CHECKING:
    from hangscope.demojobs import DemoJob

StartDemo = Callable[..., "DemoJob"]
RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def demo_job(tmp_path: Path) -> Iterator[StartDemo]:
    """Factory: ``start(name, timeout=90.0) -> DemoJob``; everything is killed at teardown."""
    from hangscope.demojobs import running_demo

    with ExitStack() as stack:
        started = 0

        def start(name: str, timeout: float = 90.0) -> DemoJob:
            nonlocal started
            started += 1
            # One workdir per start, so two jobs of one demo never share a ready file.
            workdir = tmp_path / f"demo-{started}-{name}"
            return stack.enter_context(running_demo(name, workdir=workdir, timeout=timeout))

        yield start


def _cli_env(extra: dict[str, str] | None) -> dict[str, str]:
    import hangscope

    env = dict(os.environ)
    # Make the child import the same hangscope as this test process, even
    # when that is an uninstalled checkout.
    package_parent = Path(hangscope.__file__).resolve().parent.parent
    if package_parent == REPO_ROOT:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


@pytest.fixture
def hangscope_cli() -> RunCli:
    """``run(*args, timeout=60.0, env=None, input=None)``: ``python -m hangscope ARGS``."""

    def run(
        *args: str,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hangscope", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_cli_env(env),
            input=input,
            check=False,
        )

    return run


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
