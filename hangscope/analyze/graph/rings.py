"""A cycle of the wait-for graph the short way round (read by the cycle pattern of
analyze/patterns/waitpatterns.py)."""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph
from hangscope.analyze.graph.zmqedges import receive_edge


def shorter_ring(g: Graph, ring: list[int]) -> list[int]:
    """``ring`` through a shorter way round where a member's thread has another wait (a poll
    of several pipes, a wait for any child: any of them could end it) whose walk comes back
    into the ring sooner: a parent polling both children's sentinels waits on each, and the
    cycle through the child its queue's reader blocks is the one that says why (the other
    child waits behind it). Every hop of either way is a wait, so both are cycles."""
    nodes = [(g.edges[i].pid, g.edges[i].tid) for i in ring]
    for k, i in enumerate(ring):
        edge = g.edges[i]
        for j in g.out.get(edge.pid, []):
            alt = g.edges[j]
            if j == i or alt.tid != edge.tid or alt.object == edge.object or alt.to_pid is None \
                    or alt.to_pid not in g.procs or (alt.to_pid == alt.pid and alt.to_tid is None):
                continue  # (its own process holding the other end: a walk ends there)
            path, _ = g.walk(alt.to_pid, alt.to_tid)
            detour = [j]
            for p in path:
                here = (g.edges[p].pid, g.edges[p].tid)
                if here in nodes:
                    m = (nodes.index(here) - k) % len(ring)  # where it comes back, from k
                    turned = ring[k:] + ring[:k]
                    new = [*detour, *turned[m:]] if m else detour  # m 0: back at k itself
                    if len(new) < len(ring) and not _only_messages(g, new, ring):
                        return shorter_ring(g, new)
                    break
                detour.append(p)
    return ring


def _only_messages(g: Graph, new: list[int], ring: list[int]) -> bool:
    """The shorter way is zmq receives alone (each waits, as the kernel shows it, on every
    connection of its process) where the ring held a wait of a definite end (a reply on a
    TCP connection): two peers that message each other both ways are no cause, the request
    that went round is (an engine's worker calling back the server that waits on it)."""
    return all(receive_edge(g.edges[i]) for i in new) and any(
        (e := g.edges[i]).kind == "tcp" and not receive_edge(e) and not e.probable
        for i in ring)
