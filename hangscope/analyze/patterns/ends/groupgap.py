"""A process in a collective whose group's other member waits elsewhere inside its program.

An engine that sets up its own gloo group (vLLM's data-parallel engines: no RANK, a per-step
``all_reduce`` while a wave runs) blocks in that collective until every member calls it. A
member that waits for a message in its own loop instead (an engine left idle in its input
poll while its peer stepped into the wave, vllm-project/vllm#39366) has not got to it: the
collective is the hang, and that member the suspect. The message waits of the engine's idle
loops around it (a front end waiting for output, a coordinator polling) are how an idle engine
waits, not a deadlock of their own (analyze/patterns/ends/zmqends.py ``owes_nothing``).
"""

from __future__ import annotations

from hangscope.analyze.graph.collectiveedges import MESH_HOW
from hangscope.analyze.graph.waitwalk import Graph, hop, site_words, thread_words
from hangscope.model.waits import WaitPattern
from hangscope.words import verb


def group_gap(g: Graph) -> WaitPattern | None:
    """The first collective whose gloo peer waits elsewhere in its program
    (collectiveedges ``mesh_edges``), the peer the suspect; None where there is none."""
    for i, edge in enumerate(g.edges):
        if edge.kind != "collective" or not edge.how.startswith(MESH_HOW):
            continue
        peer = g.procs.get(edge.to_pid or 0)
        thread = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        if peer is None or thread is None or thread.category is None:
            continue
        chain = (f"{hop(g, i)}; {thread_words(peer, thread)} "
                 f"{verb(thread.category, op=thread.op)}{site_words(thread)}: it has not got "
                 "to the collective, which cannot return without it (a member of the group "
                 "that should be in it waits for something else first: a message that did "
                 "not come, a wake-up it did not give itself)")
        return WaitPattern("sink", (peer.pid, edge.pid), chain, (i,), peer.pid, thread.tid)
    return None
