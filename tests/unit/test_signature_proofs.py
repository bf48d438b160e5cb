"""Every row of the signature table is proven by a real stack in tests/fixtures.

A row is proven when some real captured thread (a recorded snapshot, or a raw py-spy capture)
is classified by that row: it is the first row of analyze/evidence/signatures.py that matches. A new
row without such a stack fails here; record one (tests/fixtures/record.py, or a capture like
tests/fixtures/gpu) instead of inventing frames. The rows still waiting for a real stack are
listed below with why, and a row that gains one must leave the list.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

from support import FIXTURES

from hangscope.analyze.evidence.signatures import SIGNATURES, match_frame
from hangscope.collect.pyspy import parse_dump
from hangscope.errors import HangscopeError
from hangscope.model import Frame
from hangscope.model.serialize import load

#: Rows with no real stack in the fixtures yet, and what recording one needs.
UNPROVEN = {
    "gil": "a thread parked in take_gil while another holds the GIL in C, dumped --native",
    "io": "a rank inside torch.load/safetensors on slow storage",
}


def _real_stacks() -> Iterator[tuple[str, tuple[Frame, ...]]]:
    for path in sorted(FIXTURES.rglob("*.json")):
        name = str(path.relative_to(FIXTURES))
        if path.name.endswith((".native.json", ".py.json")):
            dump = parse_dump(1, path.read_text(), native=path.name.endswith(".native.json"))
            yield from ((name, t.frames) for t in dump.threads)
            continue
        try:
            snap = load(path)
        except (HangscopeError, ValueError):
            continue  # not a snapshot (NCCL RAS, p2p locals, ...)
        yield from ((name, t.frames) for p in snap.processes for t in p.threads)


@cache
def proofs() -> dict[str, list[str]]:
    """Signature id -> the fixture files with a real stack it classifies."""
    found: dict[str, list[str]] = {}
    for name, frames in _real_stacks():
        for sig in SIGNATURES:
            if match_frame(sig, frames) is not None:
                if name not in found.setdefault(sig.id, []):
                    found[sig.id].append(name)
                break
    return found


def test_every_signature_row_has_a_real_stack_that_proves_it() -> None:
    missing = sorted(sig.id for sig in SIGNATURES if sig.id not in proofs())
    assert missing == sorted(UNPROVEN), (
        f"rows without a real stack: {missing}; listed as waiting for one: {sorted(UNPROVEN)}")


def test_the_proofs_are_read_from_real_captures() -> None:
    """The scan itself works: the demos' collectives and the H200 sync are found."""
    assert "mismatch.json" in " ".join(proofs()["collective"])
    assert any(Path(n).name == "sync.native.json" for n in proofs()["cuda_sync"])
