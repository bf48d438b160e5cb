"""Node sets in ClusterShell/Slurm syntax: expansion, folding, and the errors a user sees."""

from __future__ import annotations

import pytest

from hangscope.errors import UsageError
from hangscope.remote.nodeset import expand, fold


@pytest.mark.parametrize(("text", "names"), [
    ("node[01-04]", ["node01", "node02", "node03", "node04"]),
    ("node[01-02,07],login", ["node01", "node02", "node07", "login"]),
    ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),
    ("a,b,a", ["a", "b"]),
    ("rack[1-2]n[1-2]", ["rack1n1", "rack1n2", "rack2n1", "rack2n2"]),
    ("node[8-11]", ["node8", "node9", "node10", "node11"]),
    ("host.example.com", ["host.example.com"]),
])
def test_expand(text: str, names: list[str]) -> None:
    assert expand(text) == names


@pytest.mark.parametrize(("names", "text"), [
    (["node01", "node02", "node03", "node05"], "node[01-03,05]"),
    (["node1", "node2", "node10"], "node[1-2,10]"),
    (["gpu1-ib", "gpu2-ib", "login"], "gpu[1-2]-ib,login"),
    (["node07"], "node07"),
])
def test_fold(names: list[str], text: str) -> None:
    assert fold(names) == text
    assert sorted(expand(text)) == sorted(names)


def test_a_thousand_nodes_fold_back_to_one_range() -> None:
    names = expand("node[0001-1000]")
    assert len(names) == 1000 and names[-1] == "node1000"
    assert fold(names) == "node[0001-1000]"


@pytest.mark.parametrize(("text", "says"), [
    ("node[01-04", "leaves a bracket open"),
    ("node01-04]", "closes a bracket"),
    ("node[04-01]", "runs backwards"),
    ("node[a-b]", "is not a number or a range"),
    ("node[[1-2]]", "nests brackets"),
    ("node[1-1000000]", "more than"),
    ("", "names no node"),
    ("no de", "is not a host name"),
])
def test_bad_node_sets_say_why(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        expand(text)
