"""Break a tie between stuck ranks of one replica with what the other replicas do.

Two ranks of DP1 wait in different collectives, one each: no majority inside DP1 says which
side is wrong. The other replicas run the same code: the collective (op and call site) they
wait in now, or that the progress recorder's dense samples saw them pass through, is the
normal path; the tied side that is not on it is the suspect. Without replicas, the training
step's own collective (DDP's gradient all_reduce inside ``backward``, which every rank runs
every step) is the normal path: the side elsewhere left the step (an evaluation-only gather,
a skipped batch).
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.facts import Facts, all_working
from hangscope.analyze.evidence.identity import group_labels, rank_label, replica_key
from hangscope.analyze.evidence.progress_sites import signature
from hangscope.analyze.rules.leftloop import left_loop, parted
from hangscope.frameworks import COLLECTIVE_METHODS, RANK_HOOKS
from hangscope.frameworks.torch_distributed import implicit_collective, in_ddp_backward
from hangscope.model import ELSE_OF, Category, Frame, Group, Process, in_library


def _normal_path(facts: Facts, members: Sequence[Process]) -> dict[str, list[Process]]:
    """Collective signature -> the ranks of other replicas seen in it (now or while watched)."""
    key = replica_key(members[0])
    if not key:
        return {}  # no replicas: nobody outside the compared ranks runs the same code
    seen: dict[str, list[Process]] = {}
    for proc in facts.subjects:
        if replica_key(proc) == key or not replica_key(proc):
            continue
        sigs: list[str] = []
        working = proc.working_thread
        if working is not None and working.category is Category.COLLECTIVE and working.op:
            sigs.append(signature(working.op, working.site))
        measured = facts.progress.get(proc.key)
        if measured is not None:
            sigs.extend(measured.seen)
        for sig in dict.fromkeys(sigs):
            seen.setdefault(sig, []).append(proc)
    return seen


def break_tie(facts: Facts, members: Sequence[Process],
              tied: Sequence[Group]) -> tuple[Group, str] | None:
    """The tied group on the other replicas' path, and the sentence that says so; None when
    the other replicas show no path, or show more than one of the tied groups'."""
    path = _normal_path(facts, members)
    normal = [g for g in tied if g.op and signature(g.op, g.site) in path]
    if len(normal) != 1:
        step, guarded = _training_step(facts, tied), _rank_guarded(facts, tied)
        ahead = _guarded_call_before(facts, tied)
        if ahead is not None and (step is None or step[0] is ahead[0]):
            return ahead
        if step is not None and guarded is not None and step[0] is guarded[0]:
            return guarded  # the same side, and the test that leads the other off it
        return (step or guarded or _in_rank_hook(facts, tied) or left_loop(facts, tied)
                or _passed_new_group(facts, tied) or _one_apart(facts, tied))
    group = normal[0]
    sig = signature(group.op or "", group.site)
    who = ", ".join(rank_label(p) for p in path[sig][:8])
    return group, (f"The other replicas ({who}) run {sig} too: that is the normal path")


def _training_step(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """The one tied group whose ranks all wait in DDP's gradient all_reduce inside backward."""
    step = [g for g in tied if all_working(facts.snapshot, g.pids, in_ddp_backward)]
    if len(step) != 1:
        return None
    who = group_labels(facts.snapshot, step[0].pids)
    verb = "waits" if len(step[0].pids) == 1 else "wait"
    return step[0], (f"{who[:1].upper()}{who[1:]} {verb} in DDP's gradient all_reduce inside "
                     "backward, which every rank runs every training step: that is the "
                     "normal path")


def _rank_guarded(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """Of two tied groups, the one whose ranks reached their collective through an ``if`` on
    the rank (``if trainer.is_global_zero:``, from the source: ``Frame.guards``) is the odd
    one: only the ranks that pass the test call it, and the others never join (a checkpoint or
    an evaluation gathered on rank 0 only: Lightning#19045, accelerate#2785). The other group
    is on the normal path."""
    def guard(group: Group) -> str | None:
        found = set()
        for pid in group.pids:
            proc = facts.snapshot.process(pid)
            working = proc.working_thread if proc is not None else None
            tests = [g for f in (working.frames if working is not None else ())
                     if not f.native for g in f.guards]
            if not tests:
                return None
            found.add(tests[-1])  # the innermost test
        return found.pop() if len(found) == 1 else None

    guards = [guard(g) for g in tied]
    odd = _the_one(guards)
    if odd is None:
        return None
    group, normal = tied[odd], tied[1 - odd]
    who = group_labels(facts.snapshot, group.pids)
    verb = "calls" if len(group.pids) == 1 else "call"
    test, _, where = (guards[odd] or "").rpartition(" (")
    # (collect/framework_lines.py names the else of a test so: its ranks fail the test)
    orelse = test.startswith(ELSE_OF)
    test = test.removeprefix(ELSE_OF)
    head = f"{who[:1].upper()}{who[1:]} {verb} {group.op or 'its collective'} "
    if test.startswith("@"):  # a function decorated to run on some ranks only
        return normal, (f"{head}inside a function decorated `{test}` ({where}: only the "
                        "ranks it runs on call it, so the others never join; keep the "
                        "collective out of that function, or call it on every rank first")
    proc = facts.snapshot.process(group.pids[0])
    working = proc.working_thread if proc is not None else None
    hidden = implicit_collective(working.frames) if working is not None else None
    return normal, (f"{head}{'in the else of' if orelse else 'under'} `if {test}:` ({where}: "
                    f"only the ranks that {'fail' if orelse else 'pass'} that test call it, "
                    "so the others never join; " + (
                        f"{hidden}" if hidden else "call it on every rank, or keep the "
                        "collective out of the rank's branch"))


def _guarded_call_before(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """Of two tied groups, the one whose ranks reached their collective after a call, under an
    ``if`` on the rank, of a framework method that runs a collective inside (``Frame.
    guarded_before``; frameworks ``collective_methods``: Fabric.save ends in a barrier) is the
    odd one: that inner collective, run by the ranks that pass the test only, paired with the
    others' next one, so they went on while these wait in theirs (Lightning#20027)."""
    def found(group: Group) -> tuple[str, str, str, str, str] | None:
        seen = {_inner_collective(facts.snapshot.process(pid)) for pid in group.pids}
        return seen.pop() if len(seen) == 1 else None

    hits = [found(g) for g in tied]
    odd = _the_one(hits)
    if odd is None:
        return None
    call, test, what, why, site = hits[odd]  # type: ignore[misc]
    group, normal = tied[odd], tied[1 - odd]
    who = group_labels(facts.snapshot, group.pids)
    others = group_labels(facts.snapshot, normal.pids)
    one = len(normal.pids) == 1
    test_text, _, test_at = test.rpartition(" (")
    return normal, (
        f"{who[:1].upper()}{who[1:]} called {call} under `if {test_text}:` ({test_at} before "
        f"its {group.op or 'collective'} at {site}: {what}, which {others} "
        f"{'does' if one else 'do'} not run: it paired with {_possessive(others)} next "
        f"collective, so "
        f"{'it' if one else 'they'} went on to {normal.op or 'the next'} while {who} "
        f"{'waits' if len(group.pids) == 1 else 'wait'} in its {group.op or 'collective'}: the "
        f"ranks are one collective apart. Call {call.split(' (')[0]} on every rank: {why}")


def _inner_collective(proc: Process | None) -> tuple[str, str, str, str, str] | None:
    """(call, test, what it runs, why every rank may call it, site) of the nearest guarded call
    before the program's line of ``proc``'s working thread to a framework method that runs a
    collective inside, the framework's own frames in that stack saying whose method it is."""
    frames = proc.working_thread.frames if proc and proc.working_thread else ()
    files = [f.file or "" for f in frames]
    for frame in (f for f in frames if not f.native and not in_library(f.file)):
        for said in reversed(frame.guarded_before):
            call, _, test = said.partition(" under ")
            method = call.split(" (")[0].rsplit(".", 1)[-1]
            for name, path, what, why in COLLECTIVE_METHODS:
                if name == method and any(path in file for file in files):
                    return call, test, what, why, frame.location
    return None


def _possessive(name: str) -> str:
    """``rank 1`` -> ``rank 1's``; ``ranks 1-3`` -> ``ranks 1-3'``."""
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def _passed_new_group(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """Of two tied groups, one waits in ``new_group`` at a call of straight-line code that the
    other has passed: its stack, where the two part, is at a later line of the same function,
    outside any loop of it. The other's ``new_group`` there completed, so it was paired with an
    earlier one of the waiting side's (process groups are matched by how many each rank has
    created, pytorch#173608): the waiting side created one group more before, in code only it
    ran (a tracker built on rank 0 alone, pytorch#134314). It is the odd one."""
    found = parted(facts, tied)
    if found is None:
        return None
    stacks, depth = found
    for inside, past in ((0, 1), (1, 0)):
        group = tied[inside]
        if group.category is not Category.COMM_INIT or group.op != "new_group":
            continue
        here, there = stacks[inside][depth], stacks[past][depth]
        if here.line is None or there.line is None or there.line <= here.line or any(
                first <= here.line <= last for first, last in here.loops):
            continue
        odd = group_labels(facts.snapshot, group.pids)
        ahead = group_labels(facts.snapshot, tied[past].pids)
        return tied[past], (
            f"{ahead[:1].upper()}{ahead[1:]} has passed the new_group that {odd} waits in: "
            f"it is at {there.name} ({there.short_file}:{there.line}), past line {here.line} "
            f"where {odd} made that call; its own new_group there completed, paired with an "
            f"earlier one of {odd} (groups are matched by how many each rank has created), so "
            f"{odd} created one group more before, in code only it ran (under a rank test, or "
            "in an object only it builds)")
    return None


def _one_apart(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """Of two tied groups in different collectives, one is further along the same straight-line
    code: its stack, where the two part, is at a later line of the same function, outside any
    loop of it and not in the other arm of an ``if`` (the program's source read; a library's
    is not, and its line order stands). Collectives pair by their order on each rank, so its
    collectives up to there were paired with the other side's: the side behind made one
    collective more before this point (a call on one rank only: under a test of the rank, or
    on a value only that rank holds, such as a metric logged on rank 0 alone, Lightning#19045).
    It is the odd one."""
    found = parted(facts, tied)
    if found is None or tied[0].op == tied[1].op or any(
            g.category is not Category.COLLECTIVE for g in tied):
        return None
    stacks, depth = found
    for behind, ahead in ((0, 1), (1, 0)):
        here, there = stacks[behind][depth], stacks[ahead][depth]
        if here.line is None or there.line is None or there.line <= here.line or any(
                first <= here.line <= last for first, last in here.loops) or _arms(here, there):
            continue
        inner = stacks[behind][depth + 1] if depth + 1 < len(stacks[behind]) else None
        if inner is not None and inner.name.rsplit(".", 1)[-1] in ("__exit__", "__aexit__"):
            return None  # at a with's line, past its body: ``there`` may be inside the body
        if not in_library(here.file) and here.loop_kind is None:
            return None  # the program's source unread: its loops and branches unknown
        odd = group_labels(facts.snapshot, tied[behind].pids)
        further = group_labels(facts.snapshot, tied[ahead].pids)
        return tied[ahead], (
            f"Both are in {here.name} ({here.short_file}), {further} further along (line "
            f"{there.line}, {odd} at line {here.line}): collectives pair by their order on "
            f"each rank, so {odd} made one collective more than {further} before this point, "
            "in code only it ran (under a test of the rank, or on a value only it holds, such "
            "as a metric logged or computed on one rank): make every rank call the same "
            "collectives in the same order")
    return None


def _arms(here: Frame, there: Frame) -> bool:
    """The two lines are in the two arms of one ``if`` (``Frame.branches``: the else's test
    carries ``ELSE_OF``): neither is further along than the other."""
    return any(ELSE_OF + test in there.branches or (test.startswith(ELSE_OF) and
               test.removeprefix(ELSE_OF) in there.branches) for test in here.branches)


def _in_rank_hook(facts: Facts, tied: Sequence[Group]) -> tuple[Group, str] | None:
    """Of two tied groups, the one whose ranks wait inside a user's hook that the framework
    calls on some ranks only (frameworks ``rank_hooks``: Lightning's ``prepare_data`` on local
    rank 0, the other ranks in its barrier around it) is the odd one: a collective there is
    one the other ranks never call (Lightning#2299)."""
    def hook(group: Group) -> tuple[str, Frame] | None:
        proc = facts.snapshot.process(group.pids[0])
        working = proc.working_thread if proc is not None else None
        frames = [f for f in (working.frames if working is not None else ()) if not f.native]
        for k, frame in enumerate(frames):  # innermost first: the user's frame, then callers
            for function, path, words in RANK_HOOKS:
                if frame.name == function and (frame.file or "").endswith(path):
                    own = next((f for f in frames[:k] if not in_library(f.file)), None)
                    return (words, own) if own is not None else None
        return None

    found = [hook(g) for g in tied]
    odd = _the_one(found)
    if odd is None:
        return None
    words, own = found[odd]  # type: ignore[misc]
    who = group_labels(facts.snapshot, tied[odd].pids)
    verb = "calls" if len(tied[odd].pids) == 1 else "call"
    return tied[1 - odd], (
        f"{who[:1].upper()}{who[1:]} {verb} {tied[odd].op or 'its collective'} inside "
        f"{own.name} ({own.short_file}:{own.line}), in {words}: the others never call it; "
        "move the collective to a hook every rank runs (setup)")


def _the_one(found: Sequence[object]) -> int | None:
    """Of two tied groups' findings, the position of the only one found; None where there are
    not two groups, or both or neither has one."""
    if len(found) != 2 or sum(f is not None for f in found) != 1:
        return None
    return 0 if found[0] is not None else 1
