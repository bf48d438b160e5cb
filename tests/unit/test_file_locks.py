"""/proc/locks parsing on a real capture (tests/fixtures/locks/proc_locks.txt).

Captured on the development VM with three kinds of lock held at once: an OFD read lock
(F_OFD_SETLK, PID -1), a POSIX lockf with a blocked waiter, and a flock held by one process
with two blocked waiters (the "->" lines; the second waiter is indented one more space).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.collect.locks import parse_proc_locks

CAPTURE = Path(__file__).parent.parent / "fixtures" / "locks" / "proc_locks.txt"


def test_given_real_proc_locks_when_parsed_then_every_kind_holder_and_waiter() -> None:
    records = parse_proc_locks(CAPTURE.read_text())
    assert [(r.index, r.kind, r.pid, r.blocked) for r in records] == [
        (1, "OFDLCK", None, False),
        (2, "POSIX", 13500, False), (2, "POSIX", 13542, True),
        (3, "FLOCK", 10305, False), (3, "FLOCK", 10307, True), (3, "FLOCK", 10306, True),
    ]
    flock = records[3]
    assert flock.device == (0xFE, 0) and flock.inode == 2147657
    assert flock.access == "WRITE" and not flock.mandatory
    assert {r.file_key for r in records[3:]} == {flock.file_key}


def test_given_garbage_lines_when_parsed_then_skipped() -> None:
    assert parse_proc_locks("not a lock line\n\n1: FLOCK\n") == ()
