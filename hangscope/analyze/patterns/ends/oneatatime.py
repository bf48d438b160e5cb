"""A group call asked of its members one at a time: a driver whose own loop gets each member's
call before it submits the next one, where the call is a rendezvous or a collective that
returns only once every member of the group is in it.

``for w in workers: ray.get(w.setup.remote(addr, port))``: the first actor's ``setup`` runs
``init_process_group`` for a world of N and waits for the other N-1, whose ``setup`` the loop
submits only after the first returns (the anyscale worker-group template and verl submit
every member's call, then get them together; ray-project/ray#3307). The actor in the
rendezvous only waits: the driver's loop is the cause. Read from the program's own frame
(``Frame.gets_one``: a get with no timeout of one submitted call's result, not of a list;
``Frame.loop_kind`` "walk": a ``for`` over items) and the member's category.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import own_frame
from hangscope.analyze.graph.waitwalk import Graph, hop, site_words, thread_words
from hangscope.model import Category
from hangscope.model.waits import WaitPattern
from hangscope.words import verb, who

#: What the member waits in: a call that returns once every member of its group is in it.
_GROUP_CALLS = frozenset({Category.COMM_INIT, Category.COLLECTIVE})


def one_at_a_time(g: Graph) -> WaitPattern | None:
    """The chain from a driver whose loop gets one member's group call at a time to the
    member waiting in that call for the others; None where there is none."""
    for i, edge in enumerate(g.edges):
        end = g.procs.get(edge.to_pid or 0)
        waiter = g.threads.get((edge.pid, edge.tid))
        if end is None or waiter is None or end.pid == edge.pid:
            continue
        thread = g.threads.get((end.pid, edge.to_tid)) if edge.to_tid else end.working_thread
        if thread is None or thread.category not in _GROUP_CALLS:
            continue
        frame = own_frame(waiter)
        if frame is None or not frame.gets_one or frame.loop_kind != "walk":
            continue
        method = frame.gets_one[0]
        driver = g.procs[edge.pid]
        chain = (f"{hop(g, i)}; {thread_words(end, thread)} "
                 f"{verb(thread.category, op=thread.op)}{site_words(thread)}, which returns "
                 f"only once every member of its group is in it; the loop of {who(driver)} "
                 f"at {frame.name} ({frame.short_file}:{frame.line}) gets each member's "
                 f"{method} before it submits the next, so the members after this one are "
                 f"never asked: submit every member's {method} first, then get all the "
                 "results at once")
        return WaitPattern("sink", (driver.pid, end.pid), chain, (i,), driver.pid, edge.tid)
    return None
