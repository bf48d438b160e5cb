"""The key a store waiter waits for: its calling line's expression, filled from that frame's
locals in a real ``py-spy dump --locals --json`` (tests/fixtures/store/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangscope.analyze.evidence.store_key import store_keys

FIXTURE = Path(__file__).parent.parent / "fixtures" / "store" / "wait.rank1.locals.json"


def _threads() -> tuple[list[object], int]:
    threads = json.loads(FIXTURE.read_text())
    return threads, threads[0]["os_thread_id"]


@pytest.mark.parametrize(("line", "op", "keys"), [
    ('        store.wait([f"step{step}/saved"])', "wait", ("step2/saved",)),
    ('    raw = store.get(f"step{step}/saved")', "get", ("step2/saved",)),
    ('    store.get("ckpt/latest")', "get", ("ckpt/latest",)),
    # not a key for sure: a call, a local that is no string, two calls of the op on one line
    ("    store.get(key_for(step))", "get", ()),
    ("    store.get(port)", "get", ()),
    ('    store.get("a") or store.get("b")', "get", ()),
    # a statement continued on the next line: no half key
    ("    store.wait([f\"step{step}/saved\",", "wait", ()),
])
def test_the_key_is_the_calling_lines_expression_over_the_frames_locals(
        line: str, op: str, keys: tuple[str, ...]) -> None:
    threads, tid = _threads()
    assert store_keys(threads, tid, lambda path, number: line, op) == keys


def test_no_line_no_key() -> None:
    threads, tid = _threads()
    assert store_keys(threads, tid, lambda path, number: None, "wait") == ()
    assert store_keys(threads, tid + 1, lambda path, number: "store.get('x')", "get") == ()
