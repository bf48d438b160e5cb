"""How long a thread has been off CPU, and the stuck times that use it (issue 20 item 4).

GIVEN real /proc captures (tests/fixtures/sched: a ``sleep`` 1.5 s after it started and the
reader's own clock on the same CPU), THEN the parser reads ``se.exec_start`` and the CPU, and
the difference is the 1.5 s. GIVEN a recorded dump whose waiting rank's thread is marked off
CPU for 5 minutes, THEN the text and Markdown ``same`` column and the TUI's stuck time say
``≥ 5 min``, while a rank whose stack moved still says ``moving``; a dump recorded before the
field loads with it unknown.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import support

from hangscope.collect.procfs import exec_start_ms, parse_stat
from hangscope.model import Snapshot
from hangscope.model.serialize import dumps, from_dict, load
from hangscope.render.markdown import render_markdown
from hangscope.render.text import measured_moving, stuck_cell
from hangscope.tui.history import History

SCHED = support.FIXTURES / "sched"
SPIN = support.FIXTURES / "healthy" / "spin.dump.json"
WAITER, SPINNER = 20985, 20986  # a rank waiting in all_reduce; one spinning in a loop line


def test_exec_start_of_a_real_sched_file() -> None:
    thread = exec_start_ms((SCHED / "sleep.sched").read_text())
    now = exec_start_ms((SCHED / "reader.sched").read_text())
    assert thread == pytest.approx(45207525.681864)
    assert now is not None and thread is not None
    assert (now - thread) / 1000 == pytest.approx(1.509, abs=0.001)  # the 1.5 s it slept
    stat = parse_stat(8340, (SCHED / "sleep.stat").read_text())
    assert stat is not None and stat.processor == 0 and stat.state == "S"


@pytest.mark.parametrize("text", [None, "", "sched_debug off\n",
                                  "se.exec_start : nan\n", "se.exec_start : \n",
                                  "8340 (sleep) S 8337 8337\n"])
def test_no_or_a_broken_exec_start_is_unknown(text: str | None) -> None:
    assert exec_start_ms(text) is None


def off_cpu(snap: Snapshot, pid: int, seconds: float) -> Snapshot:
    """``snap`` with ``pid``'s working thread off CPU for ``seconds``."""
    proc = snap.process(pid)
    assert proc is not None and proc.working_thread is not None
    tid = proc.working_thread.tid
    return replace(snap, processes=tuple(
        replace(p, threads=tuple(replace(t, off_cpu_s=seconds) if t.tid == tid else t
                                 for t in p.threads)) if p.pid == pid else p
        for p in snap.processes))


def test_a_dump_from_before_the_field_loads_with_it_unknown() -> None:
    snap = load(SPIN)
    assert all(t.off_cpu_s is None for p in snap.processes for t in p.threads)
    assert '"off_cpu_s"' not in SPIN.read_text()
    again = from_dict(json.loads(dumps(off_cpu(snap, WAITER, 301.5))))
    assert again.process(WAITER).working_thread.off_cpu_s == 301.5  # type: ignore[union-attr]


def test_a_stuck_stack_off_cpu_longer_than_the_window_reads_that_long() -> None:
    snap = off_cpu(off_cpu(load(SPIN), WAITER, 301.5), SPINNER, 301.5)
    moving = measured_moving(snap)
    waiter, spinner = snap.process(WAITER), snap.process(SPINNER)
    assert waiter is not None and spinner is not None
    assert stuck_cell(waiter, snap, moving) == "≥ 5 min"
    assert stuck_cell(spinner, snap, moving) == "moving"  # its lines moved: unchanged
    rows = {line.split(" | ")[1]: line for line in render_markdown(snap).splitlines()
            if line.startswith("| ") and " | rank | " in line}
    assert "| ≥ 5 min |" in rows[str(WAITER)] and "| moving |" in rows[str(SPINNER)]
    history = History()
    history.update(snap, now=1000.0)
    assert history.stuck_for[waiter.key] == pytest.approx(301.5)
    assert history.stuck_for[spinner.key] is None
    # The next snapshot's thread was woken by the last one's py-spy pause: the bound stays.
    history.update(off_cpu(snap, WAITER, 0.8), now=1010.0)
    assert history.stuck_for[waiter.key] == pytest.approx(311.5)


def test_off_cpu_shorter_than_the_window_keeps_the_window() -> None:
    snap = off_cpu(load(SPIN), WAITER, 0.3)
    waiter = snap.process(WAITER)
    assert waiter is not None
    assert stuck_cell(waiter, snap, measured_moving(snap)) == "≥ 2 s"
