"""Stacks decoded from dumps: equal ones are one tuple, and decoding says what it said
(GIVEN / WHEN / THEN)."""

from __future__ import annotations

import json

import pytest

from hangscope.errors import DumpFileError
from hangscope.model import Frame
from hangscope.model.serialize import decode, to_dict

_STACK = (Frame(name="wait", file="/lib/libc.so.6", native=True, module="/lib/libc.so.6"),
          Frame(name="all_reduce", file="/t/distributed_c10d.py", line=3252),
          Frame(name="step", file="/home/u/train.py", line=57, loops=((50, 60),)))


def _json(frames: tuple[Frame, ...]) -> object:
    """What ``json.loads`` gives for the frames: fresh lists, dicts and strings."""
    return json.loads(json.dumps(to_dict(frames)))


def test_given_ranks_with_equal_stacks_when_decoded_then_they_share_one_tuple() -> None:
    # GIVEN three ranks' stacks as decoded JSON, the third after another stack
    other = _STACK[1:]
    # WHEN each is decoded
    first = decode(tuple[Frame, ...], _json(_STACK))
    second = decode(tuple[Frame, ...], _json(_STACK))
    between = decode(tuple[Frame, ...], _json(other))
    third = decode(tuple[Frame, ...], _json(_STACK))
    # THEN equal stacks are one tuple, equal to the frames written, and others stay apart
    assert first == _STACK and between == other
    assert second is first and third is first
    assert between is not first


def test_given_a_stack_with_a_bad_field_after_a_good_one_then_decoding_names_the_field() -> None:
    # GIVEN a good stack decoded, then one whose line is a string
    decode(tuple[Frame, ...], _json(_STACK))
    bad = _json(_STACK)
    bad[2]["line"] = "57"  # type: ignore[index]
    # WHEN it is decoded THEN the error names the field, as without sharing
    with pytest.raises(DumpFileError, match=r"\[2\]\.line"):
        decode(tuple[Frame, ...], bad)
