"""A read without pausing that py-spy fails is read again, paused (hangscope/collect/pyspy.py).

GIVEN a py-spy that fails every ``--nonblocking`` dump the way it does when a running process
changes its thread states under it ("Failed to get stack traces"; a busy Ray Data driver lost
all three of its rounds so, and read "all waiting: it sleeps") and answers a paused one THEN
the unpaused dump returns the paused one's stack. GIVEN a py-spy that fails both THEN the
first failure, as before.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hangscope.collect import pyspy

FAKE = '''#!{python}
import json, os, sys
args = sys.argv[1:]
if "--nonblocking" in args or os.environ.get("HS_FAIL_ALL"):
    sys.stderr.write("Error: Failed to get stack traces\\n")
    sys.exit(1)
pid = int(args[args.index("--pid") + 1])
print(json.dumps([{{"pid": pid, "thread_id": 1, "thread_name": "MainThread",
                    "os_thread_id": pid, "active": True, "owns_gil": False,
                    "frames": [{{"name": "get_output_blocking", "filename": "/job/x.py",
                                "module": None, "short_filename": "x.py", "line": 567,
                                "locals": None}}]}}]))
'''


def _fake(tmp_path: Path) -> str:
    path = tmp_path / "py-spy"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def test_an_unpaused_read_that_fails_is_read_again_paused(tmp_path: Path) -> None:
    result = pyspy.dump(os.getpid(), native=False, nonblocking=True, pyspy=_fake(tmp_path))
    assert result.ok, result.error
    (thread,) = result.threads
    assert [f.name for f in thread.frames] == ["get_output_blocking"]


def test_a_paused_read_that_fails_too_keeps_the_first_failure(tmp_path: Path,
                                                              monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HS_FAIL_ALL", "1")
    result = pyspy.dump(os.getpid(), native=False, nonblocking=True, pyspy=_fake(tmp_path))
    assert not result.ok and result.error == "py-spy: Failed to get stack traces", result
