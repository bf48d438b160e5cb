"""An item a multiprocessing Queue dropped: its feeder thread failed to send it, and whoever
waits for it waits forever.

``multiprocessing.Queue.put`` only appends to a buffer; the process's ``QueueFeederThread``
pickles each item and writes it to the queue's pipe. An item that does not pickle (it holds a
lock, a socket, an open file, a lambda) fails there, after ``put`` returned: the feeder prints
the traceback (``multiprocessing/queues.py ... in _feed``) and goes on with the next item, the
failed one gone (cpython#84376, #109554). The consumer's ``get`` waits for it with nothing
wrong on any stack; the job's processes all idle in their queues' gets, which the wait-for
graph reads as a cycle (the parent waits for results, the workers for tasks the parent sends
once it has them). The traceback in the job's log is the cause. Only where no subject moved.
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.working import progressing_pids
from hangscope.analyze.graph.queueedges import in_queue_get
from hangscope.analyze.graph.stackindex import index_of
from hangscope.analyze.graph.waitwalk import site_words
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.model import Process, Severity, Verdict, VerdictKind
from hangscope.words import pid_list, who

#: The feeder thread's frame in a traceback: it failed while sending an item.
_FEED = re.compile(r'multiprocessing/queues\.py", line \d+, in _feed')
#: A traceback's last line: the exception, ``TypeError: cannot pickle '_thread.lock' object``.
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)\b")
_QUEUES = "multiprocessing/queues.py"


def lost_put(facts: Facts) -> Verdict | None:
    snap = facts.snapshot
    if facts.moving or progressing_pids(snap) or not index_of(snap.processes).has_file(
            _QUEUES):
        return None  # (no stack in a multiprocessing queue: no log read, at any scale)
    raised = _feed_failure(facts.processes)
    if raised is None:
        return None
    waiting = [p for p in facts.subjects if not p.is_exited
               and p.working_thread is not None and in_queue_get(p.working_thread)]
    if not waiting:
        return None
    # the consumer of the lost item: the job's target where it waits, else the first waiter
    consumer = next((p for p in waiting if p.pid == snap.job.target), waiting[0])
    graph = snap.wait_graph
    writers = list(dict.fromkeys(
        e.to_pid for e in (graph.edges if graph is not None else ())
        if e.pid == consumer.pid and e.kind in ("pipe", "fifo") and e.to_pid is not None
        and e.to_pid != consumer.pid))
    by_pid = {p.pid: p for p in snap.processes}
    putters = sorted((by_pid[pid] for pid in writers if pid in by_pid), key=lambda p: p.pid)
    site = site_words(consumer.working_thread)
    from_whom = f" for what {pid_list([p.pid for p in putters])} put on it" if putters else ""
    summary = (
        f"A message lost: a multiprocessing Queue's feeder thread could not send an item and "
        f"dropped it; the job's log says \"{raised[:200]}\" from multiprocessing/queues.py "
        f"_feed (put() had returned: only the log hears of it). {who(consumer)} waits in "
        f"Queue.get{site}{from_whom}, and that item never comes. Make what is put picklable "
        "(no locks, sockets, open files or lambdas; pickle.dumps it before put() to fail "
        "there), and give get() a timeout.")
    suspects = tuple(p.pid for p in putters) or (consumer.pid,)
    hosts = tuple(by_pid[pid].host for pid in suspects)
    return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary, suspects,
                   evidence(facts), hosts)


def _feed_failure(processes: tuple[Process, ...]) -> str | None:
    """The exception line of a feeder thread's traceback in a log the job writes."""
    for proc in processes:
        lines = proc.log_tail
        for i, line in enumerate(lines):
            if _FEED.search(line):
                return next((t.strip() for t in lines[i + 1:] if _RAISED.match(t)), None)
    return None

