"""The fan-out on a real node: this machine reached through a transport that runs the remote
command here (what ssh would run on a node), with hangscope shipped into a private temporary
directory, sampling a real hung demo job.

GIVEN the deadlock demo WHEN every node is dumped with ``--no-progress`` THEN the node's dump
watched no progress (the option reached it; it was dropped before), and without it the node
does watch progress: the sampling options travel in the request, not by hand.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from hangscope.collect import procfs
from hangscope.live.sampler import SampleOptions
from hangscope.remote.fanout import dump_nodes
from hangscope.remote.find import Spec, spec_for
from hangscope.remote.request import remote_argv
from hangscope.remote.transport import Transport


@dataclass(frozen=True)
class Here(Transport):
    """The node is this machine: the command runs as ssh would run it there."""

    name: str = "local"

    def argv(self, node: str, command: list[str]) -> list[str]:
        return list(command)


def test_no_progress_reaches_the_node_and_progress_is_watched_without_it(demo_job) -> None:
    job = demo_job("deadlock")
    spec = spec_for(job.pid) or Spec(
        "name", "", "^" + re.escape(" ".join(procfs.read_cmdline(job.pid))) + "$")
    fast = SampleOptions(samples=2, window=1.0)
    quiet, watched = (
        dump_nodes(Here(), ["here"], remote_argv(spec, options), timeout=240.0,
                   ship="always", python=sys.executable)[0]
        for options in (SampleOptions(samples=2, window=1.0, progress=False), fast))
    for answer in (quiet, watched):
        assert answer.snapshot is not None, answer.error
        assert answer.shipped  # the shipped zipapp of this checkout ran, not an installed one
        assert job.pid in {p.pid for p in answer.snapshot.processes}
    assert quiet.snapshot.progress is None
    assert all(r.progress is None for r in quiet.snapshot.readings)
    assert watched.snapshot.progress is not None and watched.snapshot.progress.ranks
