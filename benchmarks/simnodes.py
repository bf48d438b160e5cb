"""A transport whose nodes are local commands: ``sh -c 'sleep D; exec cat DIR/NODE.json'``.

For benchmarks/multinode.py ``simulated``: the coordinator gets a real dump per node after
that node's sampling time, as over ssh, while the simulation itself costs one sh, one sleep
and one cat per node (no Python process), so the machine measures the coordinator.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from hangscope.remote.transport import Transport


@dataclass(frozen=True)
class Simulated(Transport):
    """Node NAME answers DIRECTORY/NAME.json after its delay (``delays``: node -> seconds)."""

    name: str = "simulated"
    directory: str = ""
    delays: Mapping[str, float] = field(default_factory=dict)
    #: Every node at once: a node here is one sh and one sleep, a few hundred kB each.
    parallel: ClassVar[int] = 4096

    def argv(self, node: str, command: list[str]) -> list[str]:
        delay = self.delays.get(node, 0.0)
        path = shlex.quote(f"{self.directory}/{node}.json")
        return ["sh", "-c", f"sleep {delay:g}; exec cat {path}"]
