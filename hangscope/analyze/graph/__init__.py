"""The wait-for graph: an edge A -> B says thread A cannot move until B acts. ``waitgraph``
builds it from the kernel facts (one module per kind of edge), ``waitwalk`` walks it.
Imports evidence/ only.

Modules (what each reads, what it concludes):

collectiveedges  A rank in a collective waits for the ranks of its group that are in none: wait-
                 for edges.
fdindex          The kernel facts of one snapshot by the keys the wait-for edges join on (built
                 by analyze/graph/waitgraph.py, read by every edge module that follows an fd to
                 its peers).
handoffedges     A thread waiting for a hand-off from its own process waits for the thread that
                 feeds it.
listeners        The job's listener of a local TCP connection whose other end no process holds
                 yet.
liveness         Whether a process or the job still works: the CPU it used and the progress
                 window's decision.
loopedges        Where an asyncio event loop runs, and the wait-for edge of a thread waiting on
                 a future that only that loop can complete.
partners         Which of several holders of one wait's other end to follow first: the likely
                 partner.
queueedges       A put into a full ``multiprocessing.Queue`` waits for the processes that read
                 it.
socketpeers      Who of a socket's peer process the waiter waits on: the thread blocked on that
                 very socket (the connection's handler, not the main thread idle in accept), or,
                 when we wait for a reply and that thread only waits at the head of its loop for
                 our next message, the peer's other threads (one of them, a request handler,
                 sends the reply).
sites            Where a wait is in the user's words: beside a library's frame, the program's
                 own function that called it (never the parent's frames before a fork).
sqliteedges      The wait-for edge of a thread that SQLite's busy handler keeps retrying: the
                 database is locked, and /proc/locks names who holds it.
stackindex       The processes of one snapshot by the stacks of their threads: a pattern asks
                 which processes have a thread whose stack has a fact once per distinct set of
                 stacks, not per rank.
threadedges      Wait-for edges between the threads of one process: Python locks (the holder
                 from the source, ``Frame.holds``/``Frame.takes``, else the probable one), the
                 GIL's owner, thread joins; and the thread-level facts the patterns read (is it
                 blocked, on a lock, its user frame).
ttyedges         Edges of a thread blocked on a terminal: the user's, or a pty whose master the
                 job holds.
waitgraph        The job's wait-for graph: an edge A -> B says thread A cannot move until B
                 acts.
waitwalk         Walking the wait-for graph: who a thread waits for next, and how a thread is
                 named in a chain.
zmqedges         A thread waiting in a ZeroMQ receive waits for the peers of its process's zmq
                 connections.
"""
