"""What a process's fd 1/2 file says, read as its log (collect/logs.py): text is a log; the
binary output of a program writing to its stdout (``xz -c > shard.xz``) is none."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

from hangscope.collect.logs import read_tail


def test_given_a_log_with_colours_then_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"\x1b[32mstep {n}\x1b[0m loss 0.{n}\n" for n in range(50)))
    tail = read_tail(str(log))
    assert tail is not None and tail.tail[-1] == "step 49 loss 0.49", tail


def test_given_compressed_output_then_no_log(tmp_path: Path) -> None:
    shard = tmp_path / "shard-000001.xz.part"
    shard.write_bytes(lzma.compress(os.urandom(20000)))
    assert read_tail(str(shard)) is None


def test_given_a_count_of_zero_errors_then_no_error_line(tmp_path: Path) -> None:
    """Ray's raylet logs its counters every few seconds ("... plasma error: 0", blind round
    30's 04 warned of it as the helper's error line); a count of none is no error. A real one
    on the same shape stays."""
    log = tmp_path / "raylet.out"
    log.write_text("[state-dump] - num chunks received failed / plasma error: 0\n"
                   "[state-dump] - num bytes created total: 1234\n"
                   "gcc: error: unrecognized command-line option '-mfoo'\n"
                   "fetch error: 3 chunks lost\n")
    tail = read_tail(str(log))
    assert tail is not None
    assert tail.errors == ("gcc: error: unrecognized command-line option '-mfoo'",
                           "fetch error: 3 chunks lost"), tail.errors
