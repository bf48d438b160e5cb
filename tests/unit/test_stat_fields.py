"""``/proc/PID/stat`` read field by field as proc(5) numbers them.

GIVEN a stat line whose every field holds its own number THEN each parsed field is the one
proc(5) names (majflt was read from field 10, minflt: a healthy DDP rank allocating its
embedding took ~230,000 minor faults in the window and was reported to "crawl" on major page
faults, blind round 29's 02). GIVEN this process touching 64 MiB of fresh memory (minor
faults only) THEN the major faults read from /proc are the kernel's own count
(``getrusage``), not the minor ones.
"""

from __future__ import annotations

import os
import resource

from hangscope.collect.procfs import parse_stat, read_stat


def test_every_field_is_read_from_its_own_position() -> None:
    # field N holds N (fields 1 and 2 are the pid and the comm, with a space and a paren)
    line = "7 (a b) c) S " + " ".join(str(n) for n in range(4, 53))
    stat = parse_stat(7, line)
    assert stat is not None
    assert (stat.comm, stat.state, stat.ppid, stat.pgrp, stat.session, stat.tpgid) == (
        "a b) c", "S", 4, 5, 6, 8)
    assert (stat.majflt, stat.utime, stat.stime, stat.start_ticks, stat.vsize) == (
        12, 14, 15, 22, 23)
    assert (stat.start_stack, stat.processor, stat.exit_status) == (28, 39, 52)


def test_fresh_memory_is_minor_faults_not_major_ones() -> None:
    before, usage = read_stat(os.getpid()), resource.getrusage(resource.RUSAGE_SELF)
    block = bytearray(64 << 20)
    for offset in range(0, len(block), 4096):  # one write a page: a fault a page
        block[offset] = 1
    after, later = read_stat(os.getpid()), resource.getrusage(resource.RUSAGE_SELF)
    assert before is not None and after is not None
    assert later.ru_minflt - usage.ru_minflt >= 10_000  # the pages were faulted in
    assert after.majflt - before.majflt == later.ru_majflt - usage.ru_majflt
    assert after.majflt - before.majflt < 1_000
