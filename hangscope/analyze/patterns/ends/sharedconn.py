"""One connection, several processes: a socket inherited through fork and used by each.

A client object (a key-value store's, an HTTP session's) opened at import time or before
``fork`` is copied into every child with its socket: parent and children then write their
requests into one connection and read each other's replies. Where the server serves a
connection in order, a blocking request of one (a BLPOP, a long poll) holds every later
request on that connection, the one that would satisfy it included, and all of them wait.

The kernel fact: two or more processes blocked reading the same connected socket (one TCP
connection, the same local and remote ends; or one Unix socket inode). Read after the
cycles (analyze/patterns/waitpatterns.py): a cycle says more where there is one.
"""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph, hop, sends, site_words, thread_words
from hangscope.model.waits import WaitPattern
from hangscope.words import verb, who

#: Edges whose object names one connection (a TCP edge's ends, a Unix socket's inode); a
#: store edge names only the store's address, which every rank's own connection shares.
_CONNECTIONS = ("tcp", "unix")


def shared_connection(g: Graph) -> WaitPattern | None:
    by_object: dict[str, list[int]] = {}
    for i, edge in enumerate(g.edges):
        if edge.kind in _CONNECTIONS and edge.to_pid not in (None, edge.pid) \
                and not sends(edge):
            by_object.setdefault(edge.object, []).append(i)
    for obj, found in by_object.items():
        pids = list(dict.fromkeys(g.edges[i].pid for i in found))
        if len(pids) < 2:
            continue
        procs = [g.procs[p] for p in pids if p in g.procs]
        # Who opened it: the one whose children the others are (it forked them holding it).
        opener = next((p for p in procs if any(q.ppid == p.pid for q in procs)), procs[0])
        kids = [p for p in procs if p.pid != opener.pid]
        first = next(i for i in found if g.edges[i].pid == opener.pid)
        server = g.edges[first].to_pid
        chain = (f"{who(opener)} and {', '.join(who(p) for p in kids[:4])}"
                 f"{f' and {len(kids) - 4} more' if len(kids) > 4 else ''} wait for replies "
                 f"on one connection, {obj}: the same socket, inherited through fork, so their "
                 "requests and replies interleave on it, and a server that answers a "
                 "connection in order holds every request behind one that blocks (the request "
                 "that would end it included). Open a connection in each process after fork "
                 f"(not at import time, not before it); {hop(g, first)}")
        handler = g.threads.get((server or 0, g.edges[first].to_tid or 0))
        onward = [i for i in g.out.get(server or 0, []) if handler is not None
                  and g.edges[i].tid == handler.tid]
        if onward:
            chain += f"; {hop(g, onward[0])}"
        elif handler is not None and server in g.procs and handler.category is not None:
            # the thread serving that connection, where it waits inside its request
            chain += (f"; {thread_words(g.procs[server], handler)} serves that connection and "
                      f"{verb(handler.category, op=handler.op)}{site_words(handler)}")
        members = tuple(dict.fromkeys([opener.pid, *(p.pid for p in kids),
                                       *([server] if server else [])]))
        return WaitPattern("shared_connection", members, chain, (*found[:4], *onward[:1]),
                           opener.pid, g.edges[first].tid)
    return None
