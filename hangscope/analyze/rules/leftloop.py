"""Which of two tied sides of a mismatch left the loop first: the one that had fewer steps.

Two ranks running the same code wait in different collectives, one each: no majority says
which side is wrong. Their stacks do. Followed from the outermost frame, they part at one
function, where they run different lines:

- one line is inside the body of a loop of the program's own (``Frame.loops``, from its
  source) and the other is past that loop's end: that rank has left the loop while its peer
  still runs it
  (the empty batch skipped with ``continue``, pytorch#152964; one shard shorter than the
  other);
- or one of them is still inside a framework's loop over its batches, called from there
  (Lightning's epoch loop: frameworks ``batch_loops``), and the other has returned from that
  call and runs a later line: it finished its epoch while its peer has batches left
  (Lightning#9851: ranks with different numbers of batches).

Either way the rank past the loop ran fewer steps and is the odd one; the one still inside is
on the normal path. A rank's collectives are paired with its peers' in order, so the first
pair that differs is where one side ran out. But where the rank inside waits under an ``if``
within the loop's body (``Frame.branches``: ``if preds.shape[1] < MAX_NEW:`` around a
``pad_across_processes``, accelerate#1110), its collective runs only on the ranks whose data
pass that test: the rank past the loop may have run every step without one, and the rank in
the branch is the odd one.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.identity import group_labels
from hangscope.frameworks import BATCH_LOOPS
from hangscope.model import ELSE_OF, Frame, Group

_FEWER = ("ran fewer steps: it skipped a step's collectives (a `continue` or `break` on some "
          "ranks) or had fewer items (uneven data per rank). Every rank must run the loop's "
          "collectives the same number of times: give each the same number of batches, or "
          "run a step's collectives on every rank")


def _python_frames(group: Group, facts: Facts) -> list[Frame]:
    """The Python frames of the group's first rank's working thread, outermost first."""
    proc = facts.snapshot.process(group.pids[0]) if group.pids else None
    working = proc.working_thread if proc is not None else None
    return [f for f in reversed(working.frames) if not f.native] if working is not None else []


def _parting(a: list[Frame], b: list[Frame]) -> int | None:
    """The depth at which two stacks run the same function at different lines, with every
    frame above it the same; None where they part otherwise."""
    for depth, (x, y) in enumerate(zip(a, b, strict=False)):
        if (x.name, x.file) != (y.name, y.file):
            return None
        if x.line != y.line:
            return depth
    return None


def parted(facts: Facts, tied: Sequence[Group]) -> tuple[list[list[Frame]], int] | None:
    """Two tied groups' Python stacks (outermost first), and the depth at which they run the
    same function at different lines; None for more than two groups or stacks that part
    otherwise."""
    if len(tied) != 2:
        return None
    stacks = [_python_frames(g, facts) for g in tied]
    depth = _parting(*stacks)
    return None if depth is None else (stacks, depth)


def _in_batch_loop(frames: Sequence[Frame]) -> Frame | None:
    return next((f for f in frames for function, end in BATCH_LOOPS if f.runs(function, end)),
                None)


def _past(inside: list[Frame], past: list[Frame], depth: int) -> str | None:
    """How ``past`` has left a loop that ``inside`` still runs, at the frame where they part;
    None where it has not."""
    here, there = inside[depth], past[depth]
    if here.line is None or there.line is None:
        return None
    for first, last in here.loops:
        # In the loop's body, not on its header: a frame at a ``for`` header may still be
        # evaluating the iterable, before the loop's first item (a request loop's
        # ``for req in self.recv_requests():`` with its broadcast inside), not inside it.
        if first < here.line <= last and there.line > last:
            return (f"waits after the loop at {here.name} ({here.short_file}:{first}-{last}), "
                    f"at line {there.line}")
    loop = _in_batch_loop(inside[depth + 1:])
    if loop is not None and there.line > here.line and _in_batch_loop(past[depth + 1:]) is None:
        after = past[depth + 1] if len(past) > depth + 1 else there
        return (f"finished its batches ({loop.name}) and waits past that loop, in "
                f"{after.name} ({after.short_file}:{after.line})")
    return None


def left_loop(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """Of two tied groups, the one still inside the loop that the other has left (the normal
    path), and the sentence that says so."""
    found = parted(facts, tied)
    if found is None:
        return None
    stacks, depth = found
    for inside, past in ((0, 1), (1, 0)):
        how = _past(stacks[inside], stacks[past], depth)
        if how is None:
            continue
        gone = group_labels(facts.snapshot, tied[past].pids)
        still = group_labels(facts.snapshot, tied[inside].pids)
        test = _branch(stacks[inside][depth])
        if test is not None:
            return tied[past], (
                f"{still[:1].upper()}{still[1:]} waits {test} inside the loop, a test of its "
                f"own values, while {gone} {how}: a collective under such a test "
                f"runs only on the ranks whose values pass it, and {gone}'s never did (or it "
                "ran fewer steps). Every rank must make the same collective calls: call it "
                "on every rank (pad every batch), or branch on a value all ranks agree on "
                "(an all_reduce of the flag)")
        return tied[inside], (f"{gone[:1].upper()}{gone[1:]} {how}, while {still} is still "
                              f"inside it: {gone} {_FEWER}")
    return None


def _branch(frame: Frame) -> str | None:
    """The test of the innermost ``if`` that holds ``frame``'s line inside its innermost loop
    of the program's own (``if preds.shape[1] < MAX_NEW (evaluate.py:65)``); None where the
    line is under none there."""
    if not frame.loops or not frame.branches:
        return None
    first, last = frame.loops[-1]
    for test in reversed(frame.branches):
        text, _, where = test.rpartition(" (")
        at = where.rpartition(":")[2].rstrip(")")
        if at.isdigit() and first < int(at) <= last:
            if text.startswith(ELSE_OF):
                return f"in the else of `if {text.removeprefix(ELSE_OF)}` ({where}"
            return f"under `if {text}` ({where}"
    return None
