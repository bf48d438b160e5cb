"""Rank coordinates from the titles SGLang and vLLM set, and the expected world from flags.

The titles are the literal strings those engines set with setproctitle (sglang
``scheduler_DP{d}_TP{t}`` etc., vllm ``VLLM::Worker_DP0_PP1_TP0``); field order varies.
"""

from __future__ import annotations

import pytest

from hangscope.analyze.evidence.identity import (
    comparable_groups,
    coordinates,
    duplicate_labels,
    rank_key,
    rank_label,
    title_coordinates,
)
from hangscope.analyze.evidence.roles import expected_ranks, role_and_rank
from hangscope.analyze.evidence.world import describe_missing, missing_ranks
from hangscope.model import Job, Process, Role


@pytest.mark.parametrize(("title", "coords", "label"), [
    ("sglang::scheduler_DP1_TP1", {"dp": 1, "tp": 1}, "DP1·TP1"),
    ("sglang::scheduler_PP2_TP1", {"pp": 2, "tp": 1}, "PP2·TP1"),
    ("sglang::scheduler_TP3_EP3", {"tp": 3, "ep": 3}, "TP3·EP3"),
    ("sglang::scheduler_TP1_ATTN_CP1", {"tp": 1, "attn_cp": 1}, "ATTN_CP1·TP1"),
    ("sglang::scheduler_DP0_TP2_MOE_DP1", {"dp": 0, "tp": 2, "moe_dp": 1}, "DP0·TP2·MOE_DP1"),
    ("VLLM::Worker_DP0_PP1_TP0", {"dp": 0, "pp": 1, "tp": 0}, "DP0·PP1·TP0"),
    ("VLLM::Worker_TP0_DCP0", {"tp": 0, "dcp": 0}, "DCP0·TP0"),
    ("VLLM::EngineCore_DP1", {"dp": 1}, "DP1"),
])
def test_given_engine_title_then_coordinates_and_label(title: str, coords: dict[str, int],
                                                       label: str) -> None:
    assert title_coordinates(title) == coords
    role, rank = role_and_rank([title], {}, is_root=False, has_children=False)
    proc = Process(pid=10, role=role, rank=rank, title=title)
    assert coordinates(proc) == coords
    assert rank_label(proc) == label


def test_given_moe_dp_then_not_the_replica() -> None:
    _, rank = role_and_rank(["sglang::scheduler_TP2_MOE_DP1"], {}, False, False)
    assert rank is not None and rank.dp is None and rank.tp == 2


def test_given_dp_rank_in_env_only_then_dp_coordinate() -> None:
    _, rank = role_and_rank(["sglang::scheduler_TP1"], {"SGLANG_DP_RANK": "1"}, False, False)
    assert rank is not None and rank.dp == 1


def test_given_two_replicas_then_same_tp_rank_never_one_label() -> None:
    procs = []
    for pid, title in enumerate(["sglang::scheduler_DP0_TP1", "sglang::scheduler_DP1_TP1",
                                 "sglang::scheduler_DP0_TP0", "sglang::scheduler_DP1_TP0"]):
        role, rank = role_and_rank([title], {}, False, False)
        procs.append(Process(pid=100 + pid, role=role, rank=rank, title=title))
    assert duplicate_labels(procs) == {}
    assert len({rank_key(p) for p in procs}) == 4
    groups = comparable_groups(procs)
    assert sorted(sorted(p.pid for p in g) for g in groups) == [[100, 102], [101, 103]]


def test_given_env_ranks_then_plain_rank_label_and_pid_fallback() -> None:
    role, rank = role_and_rank(["python", "train.py"], {"RANK": "3", "WORLD_SIZE": "4"}, False,
                               False)
    assert rank_label(Process(pid=5, role=role, rank=rank)) == "rank 3"
    assert rank_label(Process(pid=5)) == "PID 5"


def test_given_sglang_dp_attention_then_dp_does_not_multiply() -> None:
    args = {"--tp-size": "4", "--dp-size": "2", "--enable-dp-attention": "true"}
    assert expected_ranks(args, [], "sglang")[0] == 4
    assert expected_ranks({"--tp-size": "4", "--dp-size": "2"}, [], "sglang")[0] == 8


def test_given_dp_tp_flags_and_a_missing_scheduler_then_named_by_coordinates() -> None:
    procs = []
    for pid, title in enumerate(["sglang::scheduler_DP0_TP0", "sglang::scheduler_DP0_TP1",
                                 "sglang::scheduler_DP1_TP0"]):
        role, rank = role_and_rank([title], {}, False, False)
        procs.append(Process(pid=100 + pid, role=role, rank=rank, title=title, state="S"))
    job = Job(kind="sglang", args={"--dp-size": "2", "--tp-size": "2"})
    missing = missing_ranks(procs, job)
    assert missing is not None and missing.missing == ("DP1·TP1",)
    assert describe_missing(missing).startswith(
        "expected 4 ranks (--dp-size 2 --tp-size 2), found DP0·TP0, DP0·TP1, DP1·TP0: "
        "rank DP1·TP1 is missing")
    assert role is Role.RANK
