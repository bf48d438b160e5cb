"""The fan-out's one-thread conversations (remote/exchange.py) with local commands as nodes.

GIVEN nodes that are ``sh -c`` one-liners (what ssh would run there) WHEN they are dumped at
once THEN each answer is parsed, a hung node is killed at its deadline, a failing one says
why, a node that asks for the bundle when there is none to ship says so alone, and 200
nodes answer together when the transport allows it; a dump that may hold control
characters is still scrubbed.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from hangscope.errors import ToolMissing
from hangscope.model.serialize import from_dict
from hangscope.remote import fanout
from hangscope.remote.fanout import _parse, dump_nodes, fanout_width
from hangscope.remote.transport import Ssh, Transport

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multinode" / "gloo3x2-node01.json"


@dataclass(frozen=True)
class Shell(Transport):
    """Node NAME runs ``scripts[NAME]`` here (FIXTURE's path is $F)."""

    name: str = "shell"
    scripts: dict[str, str] = field(default_factory=dict)
    parallel: ClassVar[int] = 1024

    def argv(self, node: str, command: list[str]) -> list[str]:
        return ["sh", "-c", f"F={shlex.quote(str(FIXTURE))}; {self.scripts[node]}"]


def test_answers_errors_and_deadlines_in_node_order() -> None:
    scripts = {"plain": "cat $F", "installed": "echo HANGSCOPE:installed; cat $F",
               "hung": "exec sleep 30", "broken": "echo 'hangscope: error: no job' >&2; exit 3",
               "garbled": "echo '{not json'"}
    start = time.monotonic()
    answers = dump_nodes(Shell(scripts=scripts), list(scripts), [], timeout=1.0)
    assert time.monotonic() - start < 5
    by = {a.node: a for a in answers}
    assert [a.node for a in answers] == list(scripts)
    assert by["plain"].snapshot is not None and by["installed"].snapshot is not None
    assert not by["installed"].shipped
    assert by["hung"].error == "shell timed out after 1 s"
    assert by["broken"].error == "error: no job"
    assert (by["garbled"].error or "").startswith("sent an unreadable dump")


def test_nothing_to_ship_fails_only_the_node_that_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_bundle() -> bytes:
        raise ToolMissing("py-spy is not installed here.", "Install py-spy.")

    monkeypatch.setattr(fanout, "bundle", no_bundle)
    scripts = {"asks": "echo HANGSCOPE:send; exec cat >/dev/null", "has": "cat $F"}
    asks, has = dump_nodes(Shell(scripts=scripts), list(scripts), [], timeout=10.0)
    assert asks.error == "py-spy is not installed here." and asks.snapshot is None
    assert has.snapshot is not None


def test_two_hundred_nodes_at_once(tmp_path: Path) -> None:
    # Each node answers only once all 200 have started (a barrier in files): asked in waves
    # of 64, none would answer before its deadline. (200: within a soft limit of 1,024 open
    # files, 4 per node.)
    nodes = [f"n{i:03d}" for i in range(200)]
    barrier = (f"touch {tmp_path}/$0; until [ $(ls {tmp_path} | wc -l) -ge 200 ]; do "
               f"sleep 0.05; done; cat {FIXTURE}")
    scripts = {n: f"sh -c {shlex.quote(barrier)} {n}" for n in nodes}
    answers = dump_nodes(Shell(scripts=scripts), nodes, [], timeout=60.0)
    assert all(a.snapshot is not None for a in answers), [a.error for a in answers][:3]


def test_width_is_the_transports_bound_within_the_open_file_limit() -> None:
    assert fanout_width(Shell(), 10) == 10
    assert fanout_width(Shell(), 5000) <= 1024
    assert fanout_width(Ssh(), 1000) == 64
    assert fanout_width(Ssh(), 1000, 200) == 200  # --fanout
    assert fanout_width(Ssh(), 10, 200) == 10


@pytest.mark.parametrize("value", ["0", "5000"])
def test_a_fanout_out_of_bounds_is_a_usage_error(value: str) -> None:
    import argparse

    from hangscope.commands import nodes as flags
    from hangscope.errors import UsageError
    from hangscope.live.sampler import SampleOptions

    parser = argparse.ArgumentParser()
    flags.add_arguments(parser)
    args = parser.parse_args(["--nodes", "a,b", "--find", "env:K=1", "--fanout", value])
    with pytest.raises(UsageError, match="--fanout must be between 1 and 4,096"):
        flags.request_from(args, None, SampleOptions())
    args = parser.parse_args(["--nodes", "a,b", "--find", "env:K=1", "--fanout", "200"])
    assert flags.request_from(args, None, SampleOptions()).where.fanout == 200


def test_a_dump_with_control_characters_is_still_scrubbed() -> None:
    data = json.loads(FIXTURE.read_text())
    data["processes"][0]["threads"][0]["name"] = "evil\x1b[2J\u202e"
    text = json.dumps(data)
    assert _parse(text) == from_dict(json.loads(text))
    assert "\x1b" not in _parse(text).processes[0].threads[0].name
    clean = FIXTURE.read_text()
    assert _parse(clean) == from_dict(json.loads(clean))
