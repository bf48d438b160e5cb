"""`hangscope dump --find SPEC` (what every node runs): a real process found by its
environment or its command line, the spec derived from a rank for the other nodes, and the
errors a user sees."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator

import pytest
from support import Target, run_cli, running_target

from hangscope.errors import ProcessNotFound, UsageError
from hangscope.remote.find import find_job_pid, find_pids, parse_spec, spec_for


@pytest.fixture
def marked_process(tmp_path) -> Iterator[tuple[Target, str]]:
    """A real process whose environment carries a unique TORCHELASTIC_RUN_ID (a ready line)."""
    run_id = f"hs-find-{secrets.token_hex(4)}"
    code = ("import os, sys, time\nopen(sys.argv[1], 'a').write(f'{os.getpid()} ready\\n')\n"
            "while True: time.sleep(60)\n")
    with running_target([sys.executable, "-c", code, str(tmp_path / "ready")], tmp_path,
                        tags=["ready"], env={"TORCHELASTIC_RUN_ID": run_id}) as proc:
        yield proc, run_id


def test_find_by_environment(marked_process) -> None:
    proc, run_id = marked_process
    assert find_pids(parse_spec(f"env:TORCHELASTIC_RUN_ID={run_id}")) == [proc.pid]
    assert find_job_pid(parse_spec(f"TORCHELASTIC_RUN_ID={run_id}")) == proc.pid


def test_the_spec_for_other_nodes_comes_from_the_rank(marked_process) -> None:
    proc, run_id = marked_process
    spec = spec_for(proc.pid)
    assert spec is not None and str(spec) == f"env:TORCHELASTIC_RUN_ID={run_id}"


def test_find_by_command_line(marked_process) -> None:
    proc, _ = marked_process
    assert proc.pid in find_pids(parse_spec("name:while True: time\\.sleep"))


def test_nothing_matches_is_a_message() -> None:
    with pytest.raises(ProcessNotFound, match="No process on this node matches"):
        find_job_pid(parse_spec(f"env:TORCHELASTIC_RUN_ID=none-{secrets.token_hex(4)}"))


@pytest.mark.parametrize("text", ["nothing", "env:1BAD=x", "name:(["])
def test_bad_specs_say_how_to_write_one(text: str) -> None:
    with pytest.raises(UsageError, match="--find"):
        parse_spec(text)


def test_cli_without_pid_or_find_says_what_to_give() -> None:
    result = run_cli("dump")
    assert result.returncode == 2
    assert "Give the PID of the job's launcher or of any rank, or --find SPEC." in result.stderr
