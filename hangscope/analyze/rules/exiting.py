"""Ranks that finished, and a rank that cannot: its main code returned, and Python joins a
non-daemon thread (``threading._shutdown``) or multiprocessing a non-daemon child process (its
exit hook ``_exit_function``) that never ends.

A rank that exited with code 0 finished. One already reaped leaves no exit code; where every
rank still alive has itself returned from its main code, the job's code ran to its end, and the
absent ranks are taken to have finished as well (a failed rank's traceback or an NCCL error in
the job's output is an earlier rule's). Neither is missing. The suspect is the rank that cannot
finish; the sentence names the thread or child it joins and where that one waits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hangscope.analyze.evidence.facts import BUSY, Facts
from hangscope.analyze.evidence.working import notified_wait
from hangscope.analyze.evidence.world import finished_ranks
from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.model import Process, Role, Severity, Thread, Verdict, VerdictKind, rank_id
from hangscope.words import innermost_call, rank_set, short_who, verb, who


def _main_thread(proc: Process) -> Thread | None:
    return next((t for t in proc.threads if t.tid == proc.pid), None)


def _main_frames_in(proc: Process, name: str, file_end: str) -> bool:
    main = _main_thread(proc)
    return main is not None and any(
        not f.native and f.name == name and (f.file or "").endswith(file_end)
        for f in main.frames)


def joins_threads_at_exit(proc: Process) -> bool:
    """Its main thread is in ``threading._shutdown``: main returned, non-daemon threads run."""
    return _main_frames_in(proc, "_shutdown", "threading.py")


def joins_children_at_exit(proc: Process) -> bool:
    """multiprocessing's atexit hook (``_exit_function`` in multiprocessing/util.py) joins
    every non-daemon child process before the process can exit."""
    return _main_frames_in(proc, "_exit_function", "multiprocessing/util.py")


def is_exiting(proc: Process) -> bool:
    """Its main code returned and it waits at exit for threads or child processes."""
    return joins_threads_at_exit(proc) or joins_children_at_exit(proc)


def joined_threads(proc: Process) -> list[Thread]:
    """The live Python threads ``threading._shutdown`` waits for (every one but main)."""
    return [t for t in proc.threads
            if t.tid != proc.pid and t.python and not t.helper and t.frames]


def exiting_words(proc: Process) -> str | None:
    """``rank 0 is exiting: ... (log-uploader)`` for a process joining threads or child
    processes at exit."""
    if joins_children_at_exit(proc):
        kids = ", ".join(f"PID {c}" for c in proc.children[:4]) or "a child process"
        return (f"{short_who(proc)} is exiting: its main code returned, and multiprocessing "
                f"joins its non-daemon child process ({kids}) before it can exit")
    if not joins_threads_at_exit(proc):
        return None
    others = [t.name or str(t.tid) for t in joined_threads(proc)]
    joined = (f"the non-daemon thread{'s' if len(others) > 1 else ''} {', '.join(others[:4])}"
              if others else "a non-daemon thread")
    raised = _raised(proc)
    how = (f"its main code ended with an exception ({raised.rstrip('.')}) that the launcher "
           "never sees" if raised else "its main code returned")
    return f"{short_who(proc)} is exiting: {how}, and Python joins {joined} before it can exit"


#: An exception's last line in a log (``IndexError: Target 12 is out of bounds.``).
_EXCEPTION = re.compile(r"^\w+(?:Error|Exception|Interrupt)(?::.*)?$")


def _raised(proc: Process) -> str | None:
    """The exception that ended the process's main code, from its log: the last error line of
    its own (torch's launchers prefix each rank's lines ``[rankN]:``) that names one."""
    rank = proc.rank.global_rank if proc.rank is not None else None
    prefix = f"[rank{rank}]:" if rank is not None else None
    for line in reversed(proc.log_errors):
        text = line.strip()
        if prefix is not None:
            if not text.startswith(prefix):
                continue
            text = text[len(prefix):].strip()
        if _EXCEPTION.match(text):
            return text[:160]
    return None


def finished(facts: Facts) -> tuple[Process, ...]:
    """Ranks that exited with code 0."""
    return finished_ranks(facts.processes)


def at_exit(facts: Facts) -> tuple[Process, ...]:
    """The live ranks, where every one of them has returned from its main code and waits at
    exit; empty where any live rank still runs its code."""
    gone = {g.key for g in facts.gone}
    live = [p for p in facts.subjects if p.role is Role.RANK and p.key not in gone]
    return tuple(live) if live and all(is_exiting(p) for p in live) else ()


def job_finished(facts: Facts) -> bool:
    """Every rank that is not running finished: the exited ones with code 0, and those reaped
    without a trace where the live ranks are all past their main code (or none is missing)."""
    if not facts.has_ranks:
        return False
    done = finished(facts)
    if any(p.key not in {d.key for d in done} for p in facts.gone) or any(
            p.is_zombie and p.role in (Role.RANK, Role.OTHER) and p not in done
            for p in facts.processes):
        return False  # a rank killed, failed, stopped or exited unread: it did not finish
    missing = facts.missing
    absent = (missing.count_missing if missing is not None else 0) - len(done)
    return bool(done or missing is not None) and (absent <= 0 or bool(at_exit(facts)))


def ended(facts: Facts) -> Verdict | None:
    """The job ended while it was read: every subject exited during the dump (alive when
    found, gone by the last read: a launcher reaps its ranks as they exit, so no exit code is
    left) or with code 0, and nothing says one failed (an exit code other than 0, an error
    line in a log of the job, a rank missing before the dump began). Not hung: the
    "missing" ranks finished."""
    subjects = facts.subjects
    during = [p for p in facts.processes if p.ended_while_read]
    done = {p.key for p in finished(facts)}
    if not during or not subjects or any(
            not p.ended_while_read and p.key not in done for p in subjects):
        return None
    if any((p.is_zombie and p.exit_code not in (0, None)) or p.log_errors
           for p in facts.processes):
        return None  # one failed, or may have: the rules for a failure say which
    missing = facts.missing
    if missing is not None and missing.count_missing > sum(
            1 for p in subjects if p.role is Role.RANK):
        return None  # ranks were missing before the dump began
    ranks = [p for p in subjects if p.ended_while_read]
    others = [p for p in during if p not in ranks]
    what = [f"{rank_set([rank_id(p) for p in ranks], facts.is_rank)} (PID"
            f"{'s' if len(ranks) > 1 else ''} {', '.join(str(p.pid) for p in ranks)}) "
            f"exited during the dump"] if ranks else []
    what += [f"{who(p)} exited "
             f"{'with code 0 ' if p.exit_code == 0 else ''}during it" for p in others]
    summary = ("The job ended while it was read: " + "; ".join(what) + ", and no log of "
               "the job has an error. Nothing is hung; dump it again if it still seems to be.")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (), evidence(facts))


def _joined_wait(facts: Facts, proc: Process) -> str:
    """What the rank joins at exit, and where that waits: ``the non-daemon thread uploader,
    which waits in Queue.get at upload_loop (jobs.py:52)``."""
    if joins_children_at_exit(proc):
        by_pid = {p.pid: p for p in facts.processes if p.host == proc.host}
        kids = [by_pid[c] for c in proc.children if c in by_pid]
        if not kids:
            return "its non-daemon child processes (multiprocessing's exit hook)"
        kid = kids[0]
        thread = kid.working_thread
        where = f", which {_waits(thread)}" if thread is not None else ""
        more = f" (and {len(kids) - 1} more)" if len(kids) > 1 else ""
        return f"its non-daemon child process PID {kid.pid}{more}{where}"
    threads = joined_threads(proc)
    if not threads:
        return "a non-daemon thread"
    first = threads[0]
    more = f" (and {len(threads) - 1} more)" if len(threads) > 1 else ""
    return f"the non-daemon thread {first.name or first.tid}{more}, which {_waits(first)}"


def _waits(thread: Thread) -> str:
    """``waits in Queue.get at upload_loop (jobs.py:52)``."""
    call = notified_wait(thread)
    name = call.name if call is not None else innermost_call(thread)
    doing = f"waits in {name}" if name is not None and thread.category not in BUSY \
        else verb(thread.category)
    return doing + (f" at {thread.site}" if thread.site else "")


def _joined_stuck(facts: Facts, proc: Process) -> bool:
    if joins_children_at_exit(proc):
        kids = [p for p in facts.processes if p.host == proc.host and p.pid in proc.children]
        return all(all(blocked(t) for t in k.threads if t.python) for k in kids)
    return all(blocked(t) for t in joined_threads(proc))


def cannot_exit(facts: Facts) -> Verdict | None:
    """Every rank finished but those stuck at exit, joining what never ends."""
    exiting = at_exit(facts)
    if not exiting or not job_finished(facts):
        return None
    stuck = [p for p in exiting if p.key in facts.stuck and _joined_stuck(facts, p)]
    if len(stuck) < len(exiting):
        return None  # what it joins still works: it will exit
    parts = [f"{short_who(p)} (PID {p.pid}) returned from its main code, but "
             f"{'multiprocessing' if joins_children_at_exit(p) else 'Python'} joins "
             f"{_joined_wait(facts, p)}, before it can exit; nothing left in it runs to end "
             "that wait" for p in stuck]
    summary = "Cannot exit: " + "; ".join(parts) + "." + _finished_words(facts, stuck)
    return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                   tuple(p.pid for p in stuck), evidence(facts), tuple(p.host for p in stuck))


def _finished_words(facts: Facts, stuck: Sequence[Process]) -> str:
    """`` Ranks 0-1 finished (exit code 0).`` with what says so."""
    done = finished(facts)
    missing = facts.missing
    bits = []
    if done:
        bits.append(f"PID{'s' if len(done) > 1 else ''} "
                    f"{', '.join(str(p.pid) for p in done)} exited with code 0")
    absent = (missing.count_missing if missing is not None else 0) - len(done)
    if absent > 0 and missing is not None:
        names = ", ".join(missing.missing) if missing.missing else str(absent)
        bits.append(f"rank{'s' if absent > 1 else ''} {names} exited and "
                    f"{'were' if absent > 1 else 'was'} reaped (no exit code is left; the "
                    "job's code ran to its end, as "
                    f"{rank_set([rank_id(p) for p in stuck], facts.is_rank)}'s did)")
    if not bits:
        return ""
    return " The other ranks finished: " + "; ".join(bits) + "."

