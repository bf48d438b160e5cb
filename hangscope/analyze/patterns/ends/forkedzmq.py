"""A process waiting on zmq sockets it inherited across ``fork``: they never move a message.

A zmq context runs I/O threads (``ZMQbg/IO/0``, frameworks/zmq.py) that own its sockets'
connections; ``fork`` copies only the calling thread, so a child that uses a context its
parent created (a module-level ``zmq.Context()`` imported before a fork start, pyzmq#1049)
has sockets with no I/O thread: its connects are never carried out, its sends stay queued,
its receives wait for ever, and nothing fails. The kernel's thread list says it: a process
blocked in a zmq receive or poll with no such thread.
"""

from __future__ import annotations

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.graph.zmqedges import in_zmq_receive, io_thread, zmq_receive_stack
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def forked_context(g: Graph) -> WaitPattern | None:
    """A process waiting in a zmq receive or poll that runs no zmq I/O thread: its sockets
    belong to a context created before it was forked (fork copies only the calling thread,
    so the context's I/O threads stayed in the parent): none of them ever connects, sends or
    receives (pyzmq#1049; a module-level ``zmq.Context()`` imported before a fork start)."""
    for proc in g.having(zmq_receive_stack):
        thread = proc.working_thread
        if proc.is_exited or proc.role in HELPER_ROLES or thread is None \
                or thread.state != "S" or not in_zmq_receive(thread) \
                or len(proc.threads) < (proc.num_threads or 0) or any(
                    io_thread(t) for t in proc.threads):
            continue  # (every thread listed, none of them zmq's I/O thread)
        parent = g.procs.get(proc.ppid)
        forked = parent is not None and any(
            io_thread(t) for t in parent.threads)
        # who waits for it: its parent first (the front end that forked it), else another
        waiting = sorted((p for p in g.procs.values() if p is not proc and not p.is_exited
                          and (w := p.working_thread) is not None and in_zmq_receive(w)),
                         key=lambda p: p is not parent)
        origin = (f"a context {who(parent)} created before it forked it" if forked
                  else "a context created before the process was forked")
        chain = (f"{thread_words(proc, thread)} waits for a zmq message{site_words(thread)} "
                 f"on sockets of {origin}: it runs no zmq I/O thread (ZMQbg/IO; fork copies "
                 "only the calling thread), so its sockets never connect, send or receive")
        if waiting:
            other = waiting[0]
            chain += (f"; {who(other)} waits{site_words(other.working_thread)} for what it "
                      "would send")
        chain += (": create the context in the child (a new zmq.Context() after the fork), "
                  "or start it with the spawn method")
        members = (proc.pid, *(p.pid for p in waiting[:1]))
        return WaitPattern("forked_context", members, chain, (), proc.pid, thread.tid)
    return None
