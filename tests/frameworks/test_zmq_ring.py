"""A ring of PUSH/PULL sockets at their high-water mark (tests/targets/frameworks/zmq_ring.py,
SGLang-shaped: front, scheduler, detokenizer; blind round 38's 01).

GIVEN a front that sends its whole batch before it reads any output THEN a deadlock of the
three processes, each waiting to send to the next (it read a cycle of two, the scheduler and
the detokenizer "waiting for a reply" from each other: a blocked send's edges went to the
peers of every connection its zmq I/O threads hold, the one it reads from too; now only to
those holding bytes it sent that the peer has not read, sock_diag's wqueue), and the advice
for full queues, naming the front (its loops send and never read; it was the first by the
walk, and a ring whose front is the launcher's last child named the scheduler). GIVEN a thread
of the front draining the outputs while it sends THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_ring.py"
TAGS = ["front", "scheduler", "detokenizer"]


@pytest.mark.parametrize("mode", ["hwm_ring", "hwm_ring_last"])
def test_given_a_front_that_sends_all_before_it_reads_then_a_ring_of_full_sends(
        mode: str, tmp_path: Path) -> None:
    with verdict_job(mode, tmp_path, TAGS, jobs=JOBS) as job:
        for tag in TAGS:  # the ring is closed once each sits in its send
            wait_off_cpu(job.pids[tag], 0.5)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "deadlock", verdict
    summary = verdict["summary"]
    for sender, taker in (("front", "scheduler"), ("scheduler", "detokenizer"),
                          ("detokenizer", "front")):
        hop = summary[summary.index(f"PID {pids[sender]} (python) waits to send on Unix "):]
        assert f"to PID {pids[taker]} (python)" in hop.split(";")[0], (sender, summary)
    assert "a ring of full queues" in summary, summary
    assert "zmq.SNDHWM and zmq.RCVHWM 0" in summary, summary
    # the front's loops send and never read; the others' loops read too
    assert f"PID {pids['front']} (python), whose loop sends all its work before it reads, " \
        "closes it" in summary, summary
    assert verdict["suspects"][0] == pids["front"], verdict


def test_given_a_front_that_drains_its_outputs_while_it_sends_then_progressing(
        tmp_path: Path) -> None:
    with verdict_job("hwm_drained", tmp_path, TAGS, jobs=JOBS) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict

