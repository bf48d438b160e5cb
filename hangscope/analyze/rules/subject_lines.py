"""The evidence lines every verdict shares: one per subject (who, state, CPU, wait channel,
whether its stack moved, and what the progress watcher decided).

Ranks whose lines say the same thing (the waiting ranks of a straggler, say) are one line,
``ranks 0-2 (PIDs 80, 81, 82), ...``: three copies of the same three lines bury the one rank
that differs. Lines differ only in counts (``one stack in 185 samples``) fold, their counts
written as a range; lines that name different PIDs (who each waits for) never fold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from math import copysign

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.progress import DECIDED_BY
from hangscope.model import Process, Role
from hangscope.words import pid_list, short_who, who_many

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A number that names a process: two lines that name different ones say different things.
_PID_BEFORE = re.compile(r"(?:PIDs? |PID\s)$")


def evidence(facts: Facts) -> tuple[str, ...]:
    """One line per subject, or per run of ranks that are alike: who, state, CPU, wait
    channel, whether its stack moved, what the progress watcher decided."""
    lines: list[tuple[list[Process], list[str]]] = []
    folded: dict[tuple[str, ...], int] = {}
    # Each distinct line worded and shaped once: the 131,072 ranks of a job say a handful.
    worded: dict[tuple[object, ...], str] = {}
    shapes: dict[str, tuple[str, ...]] = {}
    for proc in facts.subjects:
        rest = _words_of(facts, proc, worded)
        shape = shapes.get(rest)
        if shape is None:
            shape = shapes[rest] = _shape(rest)
        at = folded.get(shape) if _foldable(proc) else None
        if at is None:
            if _foldable(proc):
                folded[shape] = len(lines)
            lines.append(([proc], [rest]))
        else:
            lines[at][0].append(proc)
            lines[at][1].append(rest)
    return tuple(f"{_name(members)}, {_merge(rests)}" for members, rests in lines)


def _foldable(proc: Process) -> bool:
    return proc.role in (Role.RANK, Role.ENGINE_CORE) and proc.is_rank_numbered


def _name(members: Sequence[Process]) -> str:
    """``rank 3 (PID 12)``, ``ranks 0-2 (PIDs 12, 13, 14)``; ``PID 12`` (never twice)."""
    if len(members) == 1:
        proc = members[0]
        name = short_who(proc)
        return name if name.startswith("PID") else f"{name} (PID {proc.pid})"
    return f"{who_many(members)} ({pid_list([p.pid for p in members])})"


def _words_of(facts: Facts, proc: Process, worded: dict[tuple[object, ...], str]) -> str:
    """``_facts_of``, once per distinct set of what it reads where no progress was measured
    for ``proc`` (then its line reads only these fields)."""
    if facts.progress.get(proc.key) is not None:
        return _facts_of(facts, proc)
    working = proc.working_thread
    cpu = proc.cpu_percent
    # (-0.0 equals 0.0 but is written "-0": the one pair of equal values worded apart)
    cpu_key = (cpu, cpu == 0 and copysign(1.0, cpu) < 0) if cpu is not None else None
    key = (proc.state, cpu_key) if working is None else (
        proc.state, cpu_key, working.wchan, working.samples, working.stuck)
    rest = worded.get(key)
    if rest is None:
        rest = worded[key] = _facts_of(facts, proc)
    return rest


def _facts_of(facts: Facts, proc: Process) -> str:
    working = proc.working_thread
    bits = [f"state {proc.state or '?'}"]
    if proc.cpu_percent is not None:
        bits.append(f"CPU {proc.cpu_percent:.0f}%")
    if working is not None:
        if working.wchan:
            bits.append(f"wchan {working.wchan}")
        if working.samples > 1:
            bits.append("stack unchanged in all "
                        f"{working.samples} samples" if working.stuck else "stack moved")
    measured = facts.progress.get(proc.key)
    if measured is not None:  # which evidence decided, in its own words
        bits.append(f"{measured.decision} ({DECIDED_BY[measured.evidence]}): "
                    f"{measured.reason}")
    return ", ".join(bits)


def _shape(line: str) -> tuple[str, ...]:
    """The words of ``line`` with its counts left out, but the PIDs it names kept."""
    parts: list[str] = []
    last = 0
    for match in _NUMBER.finditer(line):
        words = line[last:match.start()]
        parts.append(words)
        parts.append(match.group() if _PID_BEFORE.search(words) else "#")
        last = match.end()
    parts.append(line[last:])
    return tuple(parts)


def _merge(rests: Sequence[str]) -> str:
    """The first line with each count the others give differently written as a range."""
    first = rests[0]
    # (each distinct line read once: the values of each count are the same set)
    counts = [list(_NUMBER.finditer(rest)) for rest in dict.fromkeys(rests)]
    out: list[str] = []
    last = 0
    for slot, mine in enumerate(counts[0]):
        out.append(first[last:mine.start()])
        values = sorted({m[slot].group() for m in counts}, key=float)
        out.append(values[0] if len(values) == 1 else f"{values[0]}-{values[-1]}")
        last = mine.end()
    out.append(first[last:])
    return "".join(out)
