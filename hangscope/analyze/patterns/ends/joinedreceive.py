"""A chain that begins with a thread joining another of its process and comes back to that
process: the joined thread waits for a message nobody will send, so the join never returns.

``asyncio.run`` ends by joining the default executor's threads
(``loop.shutdown_default_executor()``: a ``_do_shutdown`` thread in ``Thread.join``); a
blocking receive handed to ``run_in_executor`` and left there when its awaiting task was
cancelled keeps its thread in the receive for ever (cpython#111358; Python 3.11 has no
timeout on that join). The process's event loop then idles in its selector awaiting the
shutdown, which the chain's first thread does: not a request's coroutine waiting on a lost
reply (analyze/patterns/waitpatterns.py words an idle loop at a chain's end that way).
"""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph, thread_words


def joined_receive(g: Graph, path: list[int]) -> str:
    """The sentence for a chain from a join back into its own process; "" for any other."""
    first, last = g.edges[path[0]], g.edges[path[-1]]
    if first.kind != "thread" or first.to_pid != first.pid or last.to_pid != first.pid \
            or len(path) < 2 or g.edges[path[1]].kind not in ("unix", "tcp"):
        return ""
    proc = g.procs.get(first.pid)
    if proc is None:
        return ""
    joined = thread_words(proc, g.threads.get((first.pid, first.to_tid or 0)))
    return (f": {joined} waits for a message its peer will never send (the peer waits for "
            "work from this process), so the join never returns; a thread blocked in a "
            "receive does not end by itself: close its socket or give the receive a timeout "
            "(zmq.RCVTIMEO) before joining it (asyncio.run joins the default executor's "
            "threads at exit: a receive handed to run_in_executor and left there when its "
            "task was cancelled holds it; use a zmq.asyncio socket instead)")
