"""A process out of file descriptors: its open fds at its RLIMIT_NOFILE.

Past the soft limit every ``open``, ``socket``, ``accept``, ``pipe`` and ``connect`` fails with
EMFILE ("Too many open files"). A server then cannot accept (asyncio and most loops log it and
retry later, looking idle), a client cannot reach its database, a worker cannot open its next
file; the job stops with every thread in an ordinary wait. The fds say what filled the table:
TCP connections in CLOSE_WAIT (the peer closed them; this process never called close) to one
address are a connection leak (a client or pool created per request and never closed).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hangscope.model import Process, Snapshot

#: Fewer free fds than this under the limit counts as exhausted: a library keeps a few spare.
_SLACK = 3
_CLOSE_WAIT = 8  # the kernel's TCP state number


@dataclass(frozen=True)
class Exhausted:
    """A process at its fd limit, and what its fds are."""

    proc: Process
    leaked: str  # "246 TCP connections in CLOSE_WAIT to 127.0.0.1:6379", or ""
    said: str  # its output's EMFILE line, or ""


def exhausted(snap: Snapshot) -> list[Exhausted]:
    """Every live process of the job with (almost) no fd left under its limit."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    out = []
    for proc in snap.processes:
        limit, count = proc.fd_limit, proc.num_fds
        if proc.is_exited or not limit or count is None or count < limit - _SLACK:
            continue
        leaked = ""
        mine = kernel.process(proc.pid) if kernel is not None else None
        if mine is not None and kernel is not None:
            inodes = {r.inode for r in mine.fds if r.target.startswith("socket:")}
            waiting = Counter(c.remote for c in kernel.tcp
                              if c.inode in inodes and c.state == _CLOSE_WAIT)
            if waiting:
                remote, n = waiting.most_common(1)[0]
                leaked = f"{n} TCP connections in CLOSE_WAIT to {remote}"
        said = next((line.strip() for line in reversed((*proc.log_errors, *proc.log_tail))
                     if "Too many open files" in line or "EMFILE" in line), "")
        out.append(Exhausted(proc, leaked, said))
    return out


def exhausted_words(item: Exhausted) -> str:
    """``256 open files, at its limit of 256 (RLIMIT_NOFILE, soft): ...``"""
    proc = item.proc
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(proc.fds.items(),
                                                           key=lambda kv: -kv[1])[:3])
    kinds = f": {kinds}" if kinds else ""
    text = (f"{proc.num_fds} open files, at its limit of {proc.fd_limit} (RLIMIT_NOFILE, "
            f"soft){kinds}: "
            "every new socket, file, pipe or accepted connection fails with EMFILE (Too many "
            "open files), so it can neither accept nor connect and waits")
    if item.leaked:
        text += (f"; {item.leaked}: the peer closed them and this process never did, a "
                 "connection leak (a client or pool made per request and never closed)")
    else:
        text += "; raise the limit (ulimit -n) only after finding what holds them"
    if item.said:
        text += f". Its output says: {item.said[:160]!r}"
    return text
