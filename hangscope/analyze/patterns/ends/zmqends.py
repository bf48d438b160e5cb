"""A zmq receive nobody in the job owes a message: the peer that owes it is gone.

A thread in a zmq receive waits, as far as the kernel shows, on every connection its process's
I/O threads hold (analyze/graph/zmqedges.py). When every live process at the other end of
those connections is a server waiting for its *next request* from it (a REP or PULL reading
the connection it accepted on its own bound socket), none of them owes it an answer: the
answer it waits for was owed by a peer that is no longer there (a REQ whose REP was killed
while handling the request: the request died with it; zeromq/libzmq#1227, pyzmq#51). zmq
reconnects to a dead peer's endpoint silently, so nothing fails: the receive waits forever.
Said only where a peer is known to be gone (the job's output says one ended, or a zombie):
without it, the message may have been lost another way (a PUB sent before its SUB joined).

Where the dead peer was the only one, nothing is left at the other end at all: the receiving
process's I/O threads hold no connection (``unpeered_receive``). A socket with no peer is also
what a server waiting for its first client looks like, so this is said only where a process
the waiter started (or a sibling) died of an error: the peer it talked to, most likely.
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.graph.collectiveedges import MESH_HOW
from hangscope.analyze.graph.loopedges import idle_loop
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.graph.zmqedges import (
    OWED_HOW,
    in_zmq_receive,
    receive_edge,
    zmq_receive_stack,
)
from hangscope.analyze.patterns.calm.calm_chain import waits_for_work
from hangscope.model import Process
from hangscope.model.waits import SYSCALLS, WaitEdge, WaitPattern
from hangscope.words import who, who_list

#: A line of the job's output that says a process ended (a reaper's or a launcher's log).
_ENDED = re.compile(r"\b(?:exited|exit code|died|killed|terminated|rc=-?\d+|signal \d+|"
                    r"SIG[A-Z]+|Exception in thread)\b", re.IGNORECASE)


def unowed_receive(g: Graph) -> WaitPattern | None:
    """The first process whose zmq receive no live peer owes a message."""
    # (Its edges, all of a zmq receive, are its working thread's: a thread whose stack is in
    # one. Those processes only, found per distinct stack: not a look at each of 131,072 ranks.)
    for proc in g.having(zmq_receive_stack):
        if proc.is_exited or proc.role in HELPER_ROLES:
            continue
        out = g.live_edges(proc.pid, None)
        if not out or not all(receive_edge(g.edges[i]) for i in out):
            continue
        peers = _peers(g, out)
        if not peers or len(peers) != len({g.edges[i].to_pid for i in out}):
            continue  # an end outside the job: not a question of the job's peers
        ended = gone_peer(g, proc)
        if ended is None or not all(_serves(g, peer, proc.pid) for peer in peers):
            continue  # no sign that a peer is gone: a message lost another way (a slow joiner)
        thread = g.threads.get((proc.pid, g.edges[out[0]].tid))
        them = who_list([g.procs[p] for p in peers])
        one = len(peers) == 1
        chain = (f"{thread_words(proc, thread)} waits for a zmq message{site_words(thread)} "
                 f"that no live process of the job owes it: {them} "
                 f"{'waits' if one else 'wait'} only for {'its' if one else 'their'} next "
                 f"request from it, on the connection{'' if one else 's'} it made; the peer "
                 "that owes the answer is gone (a REQ whose request died with its REP: zmq "
                 "reconnects to a dead endpoint silently; give the socket a receive timeout "
                 "and a retry, or watch the peer's process)")
        if ended:
            chain += f"; {ended}"
        return WaitPattern("sink", (proc.pid, *peers), chain, tuple(out), proc.pid,
                           g.edges[out[0]].tid)
    return None


def unpeered_receive(g: Graph) -> WaitPattern | None:
    """A zmq receive with no peer left at all, after a process the receiver started (or its
    sibling) died of an error: the answer died with it (zeromq/libzmq#1227, its REP aborting
    while it handled the request). Or with peers left, none of which can send it anything
    (each only idles in its event loop, or only waits for its next request from it), after a
    child of it died of an error: an engine waiting for every worker's reply to its collective
    call, one worker dead (a vLLM-shaped engine core; trl#3433)."""
    for proc in g.having(zmq_receive_stack):  # (its working thread's stack is one)
        thread = proc.working_thread
        if proc.is_exited or proc.role in HELPER_ROLES or thread is None \
                or thread.state != "S" or not in_zmq_receive(thread):
            continue
        out = g.live_edges(proc.pid, None)
        dead = next((d for d in g.exited if d.exit_code not in (None, 0)
                     and (d.ppid == proc.pid or (d.ppid == proc.ppid and d.ppid not in (0, 1)
                                                 and not out))), None)
        if dead is None:
            continue  # a server waiting for its first client has no peer either
        if out and not all(_sends_nothing(g, g.edges[i].to_pid, proc.pid) for i in out):
            continue  # (a live peer may still send: read by unowed_receive and the chains)
        relation = "a child of it" if dead.ppid == proc.pid else "its sibling"
        left = ("none of its zmq I/O threads holds a connection" if not out else
                f"{who_list([g.procs[p] for p in _peers(g, out)])} can send it nothing (an "
                "event loop idle with its requests' coroutines parked, or a peer waiting for "
                "its next request from it)")
        why = ("a REQ whose request died with its REP: zmq reconnects to a dead peer's "
               "endpoint silently" if not out else "a router waiting for each worker's reply "
               "is never told one is gone")
        # (the member notes add how it ended: "exited with code 3")
        chain = (f"{thread_words(proc, thread)} waits for a zmq message{site_words(thread)} "
                 f"and no {'live ' if out else ''}peer is left to send one: {left}; the peer "
                 f"that owed the answer is most likely {who(dead)}, {relation}, which died "
                 f"({why}, so the receive never fails); give the socket a receive timeout and "
                 "a retry (zmq.RCVTIMEO, or a Poller with a timeout), and watch "
                 + ("the peers' processes" if out else "the peer's process"))
        # With peers left, the chain through them would name the idle one: this story comes
        # first (a wait nobody can end, analyze/rules/graph.py wait_shape)
        return WaitPattern("dead_peer" if out else "dead_process", (dead.pid, proc.pid), chain,
                           (), dead.pid, None)
    return None


def _peers(g: Graph, out: list[int]) -> list[int]:
    return sorted({pid for i in out if (pid := g.edges[i].to_pid) is not None})


def _sends_nothing(g: Graph, peer: int | None, receiver: int) -> bool:
    """The live peer ``peer`` can send ``receiver`` nothing now: its working thread idles in
    its event loop (every coroutine awaits), or it only waits for its next request from
    ``receiver``."""
    target = g.procs.get(peer) if peer is not None else None
    if target is None or target.working_thread is None:
        return False
    return idle_loop(target.working_thread) or _serves(g, target.pid, receiver)


def _serves(g: Graph, peer: int, client: int) -> bool:
    """``peer``'s working thread only waits for its next request from ``client``."""
    out = g.live_edges(peer, None)
    mine = [i for i in out if g.edges[i].to_pid == client]
    return bool(mine) and all(waits_for_work(g.snap, g.edges[i]) for i in mine)


def gone_peer(g: Graph, proc: Process) -> str | None:
    """Evidence that a process (or a thread) of the job is gone, in words (None: none): a line
    of ``proc``'s output that says one ended (a reaper's, a launcher's, threading's "Exception
    in thread"), or a zombie in the job.
    Without it, a zmq receive nobody seems to owe is as likely a message lost another way (a
    PUB sent before its SUB joined) as one owed by the dead."""
    line = next((ln.strip() for ln in reversed(proc.log_tail[-12:]) if _ENDED.search(ln)), None)
    if line:
        return f"the job's output says: {line[:160]!r}"
    dead = next((p for p in g.snap.processes if p.state == "Z"), None)
    return f"{who(dead)} is a zombie" if dead is not None else None


def owes_nothing(g: Graph, ring: list[int]) -> bool:
    """The ring holds a zmq receive (which waits, as far as the kernel shows, on every
    connection of its process: analyze/graph/zmqedges.py) onto a server that itself only waits
    for its next request on that connection, and a peer of the job is known to be gone: the
    server owes the receiver nothing; the answer awaited is the dead peer's. Or the ring is
    zmq receives alone, one of them a front end's idle loop that owes a reply (its guess at the
    backend it handed the request to, which waits for its next message from it): no deadlock,
    a reply lost (lost_reply says it). Or the ring is zmq receives alone while a process
    waits in a collective its gloo peer has not called (groupgap.py): the collective is the
    hang; receives of idle loops around it are how an idle engine waits."""
    if all(receive_edge(g.edges[i]) for i in ring) and any(
            g.edges[i].how.startswith(OWED_HOW) for i in ring):
        return True
    if all(receive_edge(g.edges[i]) for i in ring) and any(
            e.kind == "collective" and e.how.startswith(MESH_HOW) for e in g.edges):
        return True
    if all(receive_edge(g.edges[i]) for i in ring) and any(_repolls(g, g.edges[i])
                                                           for i in ring):
        return True  # an idle loop's timed poll: it waits for nobody in particular
    for k, i in enumerate(ring):
        edge = g.edges[i]
        nxt = g.edges[ring[(k + 1) % len(ring)]]
        if receive_edge(edge) and waits_for_work(g.snap, nxt) and \
                gone_peer(g, g.procs[edge.pid]) is not None:
            return True
    return False



def _repolls(g: Graph, edge: WaitEdge) -> bool:
    """The receiving thread is in a ``poll`` with a deadline (``poller.poll(1000)`` in an
    engine's idle loop, SGLang-shaped schedulers' ``if not running: poll(1000); continue``):
    it wakes by itself and waits for no one member of a ring."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    pf = kernel.process(edge.pid) if kernel is not None else None
    call = pf.syscall(edge.tid) if pf is not None else None
    table = SYSCALLS.get(kernel.arch) if kernel is not None else None
    if call is None or table is None or len(call.args) < 3:
        return False
    thread = g.threads.get((edge.pid, edge.tid))
    leaf = next((f.name for f in thread.frames if f.native), "") if thread is not None else ""
    # A poll that a ptrace stop (a sampler's) interrupted goes on as restart_syscall, its
    # arguments still in the registers on x86_64: the innermost native frame says it is poll.
    polled = call.nr == _X86_POLL or (call.nr in table["restart"] and leaf in ("poll", "__poll"))
    if kernel.arch == "x86_64" and polled:  # poll(fds, n, timeout ms); -1 never
        return 0 < call.args[2] < 1 << 31
    if call.nr not in table["poll"]:
        return False
    return call.args[2] != 0  # ppoll(fds, n, timespec *): NULL never ends


#: x86_64's poll(2), whose third argument is the timeout in ms (ppoll's is a pointer).
_X86_POLL = 7
