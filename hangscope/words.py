"""How hangscope says things: sizes, durations, rank sets and "who" a process is.

Every report, finding, verdict and TUI cell takes its words from here, so that one process is
named the same way everywhere and a size reads the same in a finding and in a table cell.
Pure functions over the model; no I/O.
"""

from __future__ import annotations

import math
import operator
import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice

from hangscope.model import Category, Group, Process, RankInfo, Role, Thread, rank_id
from hangscope.model.categories import CATEGORIES
from hangscope.titles import ray_actor


def ascending(values: Sequence[int]) -> bool:
    """Each value above the one before: distinct and sorted already (a merge's rank order),
    checked in one pass where a set and a sort of 131,072 ranks would run."""
    return all(map(operator.lt, values, islice(values, 1, None)))


def compact_ranks(ranks: Iterable[int]) -> str:
    """``[0,1,2,3,7]`` -> ``0-3,7``; ``-`` for none."""
    # A group's ranks come distinct and ascending (each time a verdict or finding names them)
    values: Sequence[int] = ranks if isinstance(ranks, (list, tuple)) and ascending(
        ranks) else sorted(set(ranks))
    if not values:
        return "-"
    # The runs by halving: a stretch of distinct sorted values is one run when its ends are
    # as far apart as its length says, so 131,072 ranks in a few runs take a few dozen tests,
    # not a step per rank. Runs that halving cut in two are joined again.
    runs: list[list[int]] = []
    stack = [(0, len(values) - 1)]
    while stack:
        lo, hi = stack.pop()
        if values[hi] - values[lo] == hi - lo:
            if runs and runs[-1][1] + 1 == values[lo]:
                runs[-1][1] = values[hi]
            else:
                runs.append([values[lo], values[hi]])
            continue
        mid = (lo + hi) // 2
        stack += ((mid + 1, hi), (lo, mid))  # the lower half first
    return ",".join(f"{start}-{end}" if end > start else str(start) for start, end in runs)


def ranks_found(found: int, expected: int | None) -> str:
    """``4/4``, ``3/4`` (missing ranks); more than expected is ``2 (1 expected)``: never
    ``2/1``, a fraction over one that reads as a typo."""
    if expected is None:
        return str(found)
    return f"{found}/{expected}" if found <= expected else f"{found} ({expected} expected)"


def rank_set(ranks: Sequence[int], is_rank: bool) -> str:
    """``rank 3``, ``ranks 0-2,7``; ``PID 12``, ``PIDs 12, 13, 14`` when the numbers are PIDs."""
    if not is_rank:
        return pid_list(ranks)
    if len(ranks) == 1:  # one rank: no sort of a set (this runs once per rank in evidence)
        return f"rank {ranks[0]}"
    return f"ranks {compact_ranks(ranks)}"


def pid_list(pids: Sequence[int], limit: int = 6) -> str:
    """``PID 12``, ``PIDs 12, 13, 95``: PIDs are listed, never a range (``12-13`` reads as
    ranks, and consecutive PIDs are chance), the first ``limit`` and a count of the rest."""
    if len(pids) == 1:
        return f"PID {pids[0]}"
    values = sorted(set(pids))
    shown = ", ".join(map(str, values[:limit]))
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return f"PIDs {shown}{more}"


def program(proc: Process) -> str:
    """The program's base name: ``ptxas``, ``python3``; a Ray actor by its title
    (``ray::Trainer.train``); ``?`` when unknown."""
    actor = ray_actor(proc.title or " ".join(proc.cmdline))
    if actor is not None:
        return f"ray actor {actor}"
    # A title (setproctitle) is one argv string with spaces: only its first word is a path
    # ("ckpt-converter --inbox inbox/" keeps its arguments, not what follows the last "/").
    first, sep, rest = proc.cmdline[0].partition(" ") if proc.cmdline else ("", "", "")
    head = first.rsplit("/", 1)[-1] + sep + rest
    return head.strip() or (proc.exe or "").rsplit("/", 1)[-1] or "?"


#: Axes in the order a rank label names them (outermost replica first).
LABEL_AXES = ("dp", "pp", "attn_cp", "cp", "pcp", "dcp", "tp", "moe_dp", "moe_ep", "ep")


def coordinates_label(coords: Mapping[str, int]) -> str:
    """``{"dp": 1, "tp": 1}`` -> ``DP1·TP1``: the one way coordinates are written; empty for
    none."""
    return "·".join(f"{axis.upper()}{coords[axis]}" for axis in LABEL_AXES if axis in coords)


def rank_label(info: RankInfo | None) -> str:
    """The one label of a rank: ``DP1·TP1`` where it has coordinates, else its number
    (``3``), ``?`` where it has neither, ``-`` for no rank at all. Tables, the TUI and sentences
    (``short_who``) all name ranks with it."""
    if info is None:
        return "-"
    present = {axis: value for axis in LABEL_AXES
               if (value := getattr(info, axis, None)) is not None}
    # A lone TP coordinate is the rank number users know, as sentences say it (analyze/
    # identity.py): the table's "TP3" beside the banner's "rank 3" read as two ranks.
    if present and set(present) != {"tp"}:
        return coordinates_label(present)
    return str(info.key) if info.key is not None else "?"


def short_who(proc: Process) -> str:
    """``rank 3``, ``DP1·TP1``, else ``PID 123``: the name inside a sentence that already gives
    the PID (with a DP or PP coordinate, "rank 1" would name one process of each replica)."""
    info = proc.rank
    if info is not None and info.replicated:
        return rank_label(info)
    if info is not None and info.key is not None:
        return f"rank {info.key}"
    return f"PID {proc.pid}"


def who(proc: Process) -> str:
    """``rank 3 (PID 123)``, ``the launcher (PID 100)``, ``ptxas (PID 130)``, ``PID 9 (python)``."""
    if proc.role in (Role.RANK, Role.ENGINE_CORE) and proc.is_rank_numbered:
        return f"{short_who(proc)} (PID {proc.pid})"
    if proc.role is Role.COMPILER:
        return f"{program(proc)} (PID {proc.pid})"
    if proc.role is Role.OTHER:
        return f"PID {proc.pid}" + (f" ({program(proc)})" if proc.cmdline else "")
    # "the main (PID 9)" read as a truncated sentence: the role is a process's
    word = "main process" if proc.role is Role.MAIN else str(proc.role).replace("_", " ")
    return f"the {word} (PID {proc.pid})"


def who_on(proc: Process, several: bool) -> str:
    """:func:`who`, with the node where the job spans hosts (PIDs repeat there):
    ``rank 5 (PID 14 on node03)``."""
    if not (several and proc.host):
        return who(proc)
    return who(proc).replace(f"PID {proc.pid}", f"PID {proc.pid} on {proc.host}", 1)


def who_list(procs: Sequence[Process], limit: int = 4) -> str:
    """``PID 7 (a), PID 8 (b) and 3 more``: each named, the first ``limit`` of them."""
    shown = ", ".join(who(p) for p in procs[:limit])
    return shown + (f" and {len(procs) - limit} more" if len(procs) > limit else "")


def who_many(procs: Sequence[Process]) -> str:
    """``rank 0 (PID 12)``; ``ranks 0-3 and the launcher (PID 10)``; ``5 processes``."""
    if len(procs) == 1:
        return who(procs[0])
    ranked = [p for p in procs if p.role in (Role.RANK, Role.ENGINE_CORE) and p.is_rank_numbered]
    ranked_pids = {p.pid for p in ranked}
    others = [p for p in procs if p.pid not in ranked_pids]
    parts = []
    if ranked:
        numbers = compact_ranks(rank_id(p) for p in ranked)
        if any(p.rank is not None and p.rank.replicated
               for p in ranked):  # replicas share rank numbers: name each by coordinates
            numbers = ", ".join(short_who(p) for p in ranked)
        if len(ranked) == 1:
            parts.append(who(ranked[0]))
        else:  # a scattered set of thousands of ranks is a count, not a list
            parts.append(f"ranks {numbers}" if len(numbers) <= 40 else f"{len(ranked)} ranks")
    if len(others) <= 2:
        parts.extend(who(p) for p in others)
    else:
        parts.append(f"{len(others)} other processes")
    return " and ".join(parts) if len(parts) <= 2 else ", ".join(parts[:-1]) + " and " + parts[-1]


def size(value: int | None, iec: bool = False) -> str:
    """Bytes for a reader: ``871M``, ``23.5G`` (``iec``: ``871 MiB``, ``23.5 GiB``); ``?``.

    Whole numbers up to mebibytes, one decimal from gibibytes on: 871.3M is noise, 1.5G is not.
    """
    if value is None:
        return "?"
    amount = float(value)
    for unit in ("B", "K", "M", "G", "T"):
        if amount < 1024 or unit == "T":
            number = f"{amount:.0f}" if unit in ("B", "K", "M") else f"{amount:.1f}"
            if not iec:
                return number + unit
            return f"{number} {unit}" if unit == "B" else f"{number} {unit}iB"
        amount /= 1024
    raise AssertionError("unreachable: the loop returns at T")


def duration(seconds: float) -> str:
    """For sentences: ``42 s``, ``3 min 12 s``, ``2 h 5 min``, ``3 d 4 h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def duration_cell(seconds: float | None) -> str:
    """For table cells: ``7s``, ``3m04s``, ``2h05m``; ``moving`` when the stack just changed."""
    if seconds is None:
        return "moving"
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total // 3600}h{(total % 3600) // 60:02d}m"


def at_least(seconds: float | None) -> str:
    """A stuck time, which is a lower bound (the stack has not changed since the first sample
    that saw it, and may not have for long before): ``≥ 5 s``, ``≥ 3 min``, ``≥ 2 h``, rounded
    down; ``moving`` when the stack just changed."""
    if seconds is None:
        return "moving"
    if not math.isfinite(seconds):  # a hand-edited dump's window
        return "-"
    total = int(seconds)
    if total < 60:
        return f"≥ {total} s"
    if total < 3600:
        return f"≥ {total // 60} min"
    return f"≥ {total // 3600} h"


def verb(category: Category, plural: bool = False, op: str | None = None) -> str:
    """``waits in all_reduce``, ``are blocked launching a CUDA kernel``, ``has exited``."""
    return CATEGORIES[category].verb[1 if plural else 0].format(op=op or "a collective")


def doing(group: Group, plural: bool | None = None) -> str:
    """What a group does: ``wait in all_reduce at step (train.py:55), inside CUDA graph
    capture``."""
    many = len(group.ranks) > 1 if plural is None else plural
    what = verb(group.category, many, group.op)
    if group.site:
        what += f" at {group.site}"
    if group.context == "cuda_graph_capture":
        what += ", inside CUDA graph capture"
    return what


def describe(group: Group, is_rank: bool) -> str:
    """``ranks 0-2 wait in all_reduce at sync (train.py:55)``; ``DP0·TP1, DP1·TP1 wait ...``
    where replicas share rank numbers (the group's labels)."""
    return f"{group_names(group, is_rank)} {doing(group)}"


def group_names(group: Group, is_rank: bool) -> str:
    """The group's ranks: its labels where it has them (a long list as a count), else the set."""
    if not group.labels:
        return rank_set(group.ranks, is_rank)
    if len(group.labels) > 6:
        return f"{len(group.labels)} ranks ({group.labels[0]} ... {group.labels[-1]})"
    return ", ".join(group.labels)


_SITE = re.compile(r"^(?:[\w<>.]*\.)?([\w<>]+) \([^()]*?:(\d+)\)$")


def fit_site(site: str, width: int) -> str:
    """A call site cut to ``width``, keeping what still says something: the function name and
    line (``ModelRunner.init_memory_pool (sglang_like.py:97)`` -> ``init_memory_pool:97``, then
    ``init_memo…:97``)."""
    if len(site) <= width:
        return site
    match = _SITE.match(site)
    if match is None:
        return site[: max(0, width - 1)] + "…"
    func, line = match.group(1), f":{match.group(2)}"
    if len(func) + len(line) <= width:
        return func + line
    keep = width - len(line) - 1
    return func[:keep] + "…" + line if keep >= 3 else (func + line)[: max(0, width - 1)] + "…"


# -- threads of one process, folded -------------------------------------------------------
def fold_threads(threads: Iterable[Thread]) -> list[tuple[Thread, tuple[Thread, ...]]]:
    """Threads with the same stack (category, call site, Python frames) as one entry: the
    first thread and every thread of its kind, in the order they come. A pool of 966 threads
    idle in one ``queue.get`` is one entry, not 966 stacks."""
    runs: dict[tuple[object, ...], list[Thread]] = {}
    for thread in threads:
        key = (thread.category, thread.site, thread.python, thread.helper,
               thread.stack_key if thread.frames else thread.wchan)
        runs.setdefault(key, []).append(thread)
    return [(members[0], tuple(members)) for members in runs.values()]


def innermost_call(thread: Thread) -> str | None:
    """``Queue.get``: the call the code at the site made (the Python frame just inside it),
    else the innermost Python frame."""
    python = [f for f in thread.frames if not f.native]
    at = next((i for i, f in enumerate(python) if f"{f.name} ({f.location})" == thread.site),
              None)
    if at:
        return python[at - 1].name
    return python[0].name if python else None


def threads_line(members: Sequence[Thread]) -> str:
    """``966 threads are idle in Queue.get at prefetch (x.py:12)``; one thread: its name, tid,
    category and site, as before."""
    first = members[0]
    site = f" at {first.site}" if first.site else ""
    if len(members) == 1:
        return f"thread {first.name or first.tid} (tid {first.tid}): {first.category}{site}"
    category = first.category or Category.UNKNOWN
    call = innermost_call(first)
    inside = f" in {call}" if call and call not in (first.site or "") else ""
    tids = compact_ranks(t.tid for t in members)
    return f"{len(members)} threads {verb(category, plural=True)}{inside}{site} (tids {tids})"



def exit_text(code: int) -> str:
    """``exited with code 1``; ``was killed by SIGABRT (signal 6)`` for a negative code."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name} (signal {-code})"
