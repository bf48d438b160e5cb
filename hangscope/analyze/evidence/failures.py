"""Ranks that failed: NCCL and c10d errors in the ranks' output, read from the log tails.

Pure: the lines come from collect/logs.py (``Process.log_errors`` / ``log_tail``). PyTorch
prefixes its own lines with ``[rankN]:``; the lines NCCL adds under one (``ncclRemoteError:
...``, ``Last error:``) belong to the rank named last. Several ranks often write to one file
(a launcher's stdout), so every tail of the job is read and each line goes to its rank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hangscope.model import Process, in_library

_PREFIX = re.compile(r"^\[rank(\d+)\]:")
_WORK = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")
_WATCHDOG = re.compile(r"failure detected by watchdog at work sequence id: (\d+)"
                       r"(?:.*?last enqueued work: (-?\d+), last completed work: (-?\d+))?")
_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout")
TRACEBACK_FILE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_FAILED_FRAME = re.compile(r"^#\d+ (\S+) from (\S+):(\d+)$")  # c10d's failed-collective stack
# (pattern, what it is, whether it blames a peer rather than this rank)
_KINDS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"ncclInvalidUsage|NCCL error:? invalid usage", re.I), "NCCL invalid usage",
     False),
    (re.compile(r"ncclRemoteError|remote process exited", re.I),
     "NCCL remote error (a peer exited or the network failed)", True),
    (re.compile(r"ncclSystemError|NCCL error:? unhandled system error", re.I),
     "NCCL system error", False),
    (re.compile(r"ncclInternalError|NCCL error:? internal error", re.I), "NCCL internal error",
     False),
    (re.compile(r"ncclUnhandledCudaError|unhandled cuda error", re.I), "CUDA error in NCCL",
     False),
    (re.compile(r"CUDA error: ([^.\n]{3,80})"), "CUDA error", False),
    (re.compile(r"CUDA out of memory|OutOfMemoryError"), "CUDA out of memory", False),
    (_TIMEOUT, "NCCL watchdog timeout", True),
)
_SIZES = re.compile(r"message truncated|mismatch in collective sizes|size mismatch", re.I)
_OPS = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "_ALLGATHER_BASE": "all_gather",
        "ALLGATHER_COALESCED": "all_gather", "REDUCE_SCATTER": "reduce_scatter",
        "_REDUCE_SCATTER_BASE": "reduce_scatter", "BROADCAST": "broadcast", "REDUCE": "reduce",
        "BARRIER": "barrier", "ALLTOALL": "all_to_all", "ALLTOALL_BASE": "all_to_all",
        "SEND": "send", "RECV": "recv", "GATHER": "gather", "SCATTER": "scatter",
        "COALESCED": "coalesced"}


@dataclass(frozen=True)
class RankFailure:
    """What one rank's output says failed."""

    rank: int
    kind: str  # "NCCL invalid usage (sizes differ between ranks)", ...
    blames_peer: bool  # a remote error or a timeout: the cause may be another rank
    op: str | None = None
    seq: int | None = None
    watchdog: str | None = None  # "last enqueued #2, last completed #1"
    site: str | None = None  # a traceback's innermost user frame: "fn (x.py:57)"
    line: str = ""  # the line that said it, as evidence


def _by_rank(lines: Iterable[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    current: int | None = None
    for line in lines:
        found = _PREFIX.match(line)
        if found:
            current = int(found.group(1))
        elif not line.strip() or line.startswith("["):  # a line of someone else's
            current = None
        if current is not None:
            out.setdefault(current, []).append(line)
    return out


def _site(lines: Sequence[str]) -> str | None:
    """The innermost traceback frame outside site-packages and the standard library."""
    best = None
    for line in lines:
        found = _FAILED_FRAME.match(line)
        if found and not in_library(found.group(2)):
            return f"{found.group(1)} ({found.group(2).rsplit('/', 1)[-1]}:{found.group(3)})"
        for path, lineno, fn in TRACEBACK_FILE.findall(line):
            if not in_library(path):
                best = f"{fn} ({path.rsplit('/', 1)[-1]}:{lineno})"
    return best





def parse_failure(rank: int, lines: Sequence[str]) -> RankFailure | None:
    """The first NCCL/c10d failure in one rank's lines, with its op, sequence and watchdog."""
    text = "\n".join(lines)
    for pattern, kind, blames in _KINDS:
        found = pattern.search(text)
        if found is None:
            continue
        if pattern.pattern.startswith("CUDA error: ("):
            kind = f"CUDA error: {found.group(1).strip()}"
        if kind == "NCCL invalid usage" and _SIZES.search(text):
            kind += " (sizes differ between ranks)"
        work = _WORK.search(text)
        dog = _WATCHDOG.search(text)
        watchdog = None
        if dog is not None and dog.group(2) is not None:
            watchdog = f"last enqueued #{dog.group(2)}, last completed #{dog.group(3)}"
        seq = int(work.group(1)) if work else (int(dog.group(1)) if dog else None)
        line = next((ln for ln in lines if pattern.search(ln)), found.group(0))
        return RankFailure(rank, kind, blames, _OPS.get(work.group(2)) if work else None, seq,
                           watchdog, _site(lines), line.strip()[:300])
    return None


def failures(processes: Sequence[Process]) -> dict[int, RankFailure]:
    """Each global rank's failure, from every log tail of the job (lines deduplicated)."""
    # Each list on its own (both keep the file's order; a line not prefixed belongs to the
    # prefixed line above it *in that list*), each distinct list once (ranks share a file).
    lists = dict.fromkeys(lst for proc in processes for lst in (proc.log_errors, proc.log_tail)
                          if lst)
    per_rank: dict[int, list[str]] = {}
    for lst in lists:
        for rank, lines in _by_rank(lst).items():
            have = per_rank.setdefault(rank, [])
            have.extend(line for line in lines if line not in have)
    out: dict[int, RankFailure] = {}
    for rank, lines in per_rank.items():
        failure = parse_failure(rank, lines)
        if failure is not None:
            out[rank] = failure
    return out
