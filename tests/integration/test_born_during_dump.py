"""Children born after discovery listed the job (hangscope/live/newcomers.py), on real processes.

GIVEN a parent listed before its child is born THEN the child is a newcomer: its parent, its
birth after the listing, the CPU it used since, its command line redacted. GIVEN a child born
before the listing (discovery missed it for another reason) THEN it is none.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from support import poll

from hangscope.collect import procfs
from hangscope.live.newcomers import newcomers, since_boot
from hangscope.model import Process

PARENT = """
import subprocess, sys
sys.stdin.readline()  # the test's go: spawn the worker now
child = subprocess.Popen([sys.executable, "-c",
                          "while True: sum(range(1000))", "--token=s3cr3t-value"])
print(child.pid, flush=True)
child.wait()
"""


@pytest.fixture
def parent() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        for pid in procfs.read_children(proc.pid):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        proc.kill()
        proc.wait(timeout=10)


def _spawn(proc: subprocess.Popen[str]) -> int:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    child = int(proc.stdout.readline())
    stat = procfs.read_stat(child)
    poll(lambda: (s := procfs.read_stat(child)) is not None and s.cpu_ticks > 0,
         "the child to use CPU", 30)
    assert stat is not None
    return child


def test_a_child_born_after_the_listing_is_a_newcomer(parent: subprocess.Popen[str]) -> None:
    listed = since_boot()
    child = _spawn(parent)
    (found,) = newcomers([Process(pid=parent.pid, state="S")], listed, redact=True)
    assert found.pid == child and found.ppid == parent.pid
    assert 0.0 <= found.born_s < 30.0
    assert found.cpu_s > 0 and found.state in ("R", "S")
    assert "-c" in found.title and "s3cr3t-value" not in found.title, found.title


def test_a_child_older_than_the_listing_is_none(parent: subprocess.Popen[str]) -> None:
    _spawn(parent)
    assert newcomers([Process(pid=parent.pid, state="S")], since_boot(), redact=True) == ()
