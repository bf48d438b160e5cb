"""The kernel-log reader on this machine's real log: newest records kept, unreadable said."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hangscope.collect import kmsg


def _mark() -> str:
    """Write a harmless line (no OOM/Xid words: no other test may take it for an event)."""
    marker = f"hangscope-kmsg-reader-test {os.getpid()} {time.monotonic_ns()}"
    try:
        with open("/dev/kmsg", "w") as fh:
            fh.write(f"<6>{marker}\n")
    except OSError as exc:
        pytest.skip(f"cannot write /dev/kmsg here: {exc.strerror}")
    return marker


@pytest.mark.skipif(os.geteuid() != 0, reason="writing a line to /dev/kmsg needs root")
@pytest.mark.parametrize("reader", ["device", "any"])
def test_reader_keeps_the_newest_records_when_it_cannot_keep_all(
        reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = _mark()
    monkeypatch.setattr(kmsg, "MAX_RECORDS", 5)  # far fewer than the ring holds
    monkeypatch.delenv(kmsg.ENV_OVERRIDE, raising=False)
    records = kmsg._records_from_device(kmsg.KMSG) if reader == "device" else kmsg._records()
    assert len(records) <= 5
    assert any(marker in r for r in records), records


def test_unreadable_log_gives_a_note_not_silence(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kmsg.ENV_OVERRIDE, str(tmp_path / "no-such-kmsg"))
    lines, note = kmsg.read([os.getpid()], time.time())
    assert lines == ()
    assert note is not None and note.startswith("kernel log not checked: ")
    assert "No such file" in note and "dmesg" in note


def test_readable_log_gives_no_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "kmsg.txt"
    log.write_text(f"[  100.000000] Out of memory: Killed process {os.getpid()} (python)\n")
    monkeypatch.setenv(kmsg.ENV_OVERRIDE, str(log))
    lines, note = kmsg.read([os.getpid()], None)
    assert note is None
    assert len(lines) == 1 and "Killed process" in lines[0]
