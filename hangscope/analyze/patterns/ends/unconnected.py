"""A call connected to no server: a client waits inside a gRPC call, or a zmq receive or send,
while its process holds no connected socket at all.

A gRPC channel connects to its target in the background and a call waits for that: with
``wait_for_ready=True`` (or before the channel's first connection) it is queued, not failed,
while the target refuses or does not answer, and gRPC retries the connection with a backoff
for ever (grpc#19973, grpc#26320). The kernel's socket table says it: no TCP connection of the
client's process is established and no Unix socket of it has a peer, so the call it waits in
went to no server, whichever servers the job runs (a stale address read from a discovery file,
a port the new server is not on: mill#4018). The waiter is the suspect: what it dials.

zmq the same: its I/O threads connect and reconnect in the background and a receive or send
never fails, so a process blocked in one with no connection at all waits for ever: its bound
``ipc://`` path taken over by another process's bind, a wrong endpoint, a dropped connection.
Where nothing in the job listens at all, its I/O thread says what it does: woken within zmq's
reconnect interval while every thread of its process has slept for seconds, it retries a
connect nobody accepts (two sides that both ``connect()``: vllm PR #33120).
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.facts import blocked
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.graph.grpcedges import in_grpc_call
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.graph.zmqedges import (
    in_zmq_receive,
    in_zmq_send_blocked,
    io_thread,
    zmq_wait_stack,
)
from hangscope.analyze.patterns.calm.calm_chain import (
    connected_inodes,
    straight_line,
    unconnected_listeners,
)
from hangscope.frameworks.grpc import CHANNEL_FILE
from hangscope.model import Process, Thread
from hangscope.model.waits import KernelWaits, WaitPattern
from hangscope.words import who, who_list

#: How a process with no connection is said, after its name.
_NONE = "holds no established TCP connection and no connected Unix socket"
#: zmq retries a connect its peer refuses every ``reconnect_ivl`` (100 ms by default): an I/O
#: thread off CPU for less than this, in a process whose threads all slept for ``_ASLEEP_S``
#: or more, is retrying one (an I/O thread with no connection has nothing else to wake for).
_RETRY_S = 0.5
_ASLEEP_S = 2.0


def _in_call(thread: Thread) -> bool:
    """Blocked inside a gRPC client call, waiting for its response."""
    return blocked(thread) and thread.state == "S" and in_grpc_call(thread.frames)


def unconnected_call(g: Graph) -> WaitPattern | None:
    """Processes blocked in a gRPC call whose every socket is unconnected (module doc)."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    if kernel is None or not g.has_file(CHANNEL_FILE):
        return None
    connected = connected_inodes(kernel)
    callers: list[tuple[Process, Thread]] = []
    for proc in g.snap.processes:
        read = kernel.process(proc.pid)
        if proc.is_exited or proc.role in HELPER_ROLES or read is None:
            continue  # (its fds unread: nothing said of its connections)
        thread = next((t for t in proc.threads if _in_call(t)), None)
        if thread is not None and not any(r.inode in connected for r in read.fds):
            callers.append((proc, thread))
    if not callers:
        return None
    proc, thread = callers[0]
    calling = {c.pid for c, _ in callers}
    servers = [p for p in g.snap.processes if not p.is_exited and p.listening
               and p.pid not in calling]
    ports = sorted({s.port for p in servers for s in p.listening if s.port})
    others = f" (and {who_list([c for c, _ in callers[1:]])} the same)" if callers[1:] else ""
    listening = (f"; the job's servers listen on port{'s' if len(ports) > 1 else ''} "
                 f"{', '.join(map(str, ports))} ({who_list(servers)}), and it is connected to "
                 "none of them" if ports else "; nothing in the job listens")
    chain = (f"{thread_words(proc, thread)} waits in a gRPC call{site_words(thread)}{others} "
             f"with no connection to any server: {who(proc)} {_NONE}{listening}. Its channel's "
             "target does not answer, and gRPC retries the connection for ever while the call "
             "waits for it "
             "(wait_for_ready=True, or a channel not yet connected, with no deadline): check "
             "the address it dials (a stale address or port file, the server's old port), and "
             "give the call a timeout")
    members = (proc.pid, *(c.pid for c, _ in callers[1:]), *(p.pid for p in servers))
    return WaitPattern("unconnected_call", members, chain, (), proc.pid, thread.tid,
                       also=tuple(c.pid for c, _ in callers[1:]))


def unconnected_zmq(g: Graph) -> WaitPattern | None:
    """Processes blocked in a zmq receive or send whose process holds no connection at all (no
    established TCP connection, no connected Unix socket), while another process of the job
    listens: a message can neither reach nor leave them. zmq connects and reconnects in the
    background and never fails the call, so the wait has no end: the endpoint they bound was
    taken over (a second ``bind`` of an ``ipc://`` path succeeds silently and the name points to
    the new socket: every peer connects there, libzmq#2059), or the endpoint they dial is
    wrong, or the peer dropped the connection (a REQ drops it on a reply without the empty
    delimiter frame). A socket with no peer is also a server waiting for its first client: the
    waiter must be blocked in its call and listen on no endpoint the job's peers use."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    if kernel is None:
        return None
    connected = connected_inodes(kernel)
    used = {u.name for u in kernel.unix_peers if u.name and u.peer}  # paths with a connection
    stuck: list[tuple[Process, str]] = []
    for proc in g.having(zmq_wait_stack):
        thread = proc.working_thread
        read = kernel.process(proc.pid)
        if proc.is_exited or proc.role in HELPER_ROLES or thread is None or read is None \
                or thread.state != "S" or not (in_zmq_receive(thread)
                                               or in_zmq_send_blocked(thread)) \
                or any(r.inode in connected for r in read.fds):
            continue
        taken = [s.address for s in proc.listening if s.kind == "unix" and s.address in used]
        if proc.listening and not taken and not straight_line(thread):
            continue  # a server waiting for its first client (not one awaiting its reply)
        stuck.append((proc, taken[0] if taken else ""))
    if not stuck:
        return _dialing(g, kernel, connected)
    proc, path = stuck[0]
    thread = proc.working_thread
    verb = "receive" if in_zmq_receive(thread) else "send"  # type: ignore[arg-type]
    mine = {s.pid for s, _ in stuck}
    peers = [p for p in g.snap.processes if not p.is_exited and p.listening and p.pid not in mine]
    owner = next((p for p in peers if any(s.address == path for s in p.listening)), None)
    alone = [(p, socks) for p in peers if (socks := unconnected_listeners(kernel, p))]
    if owner is None and not alone:
        # no endpoint of the job left for it: a peer that died (unpeered_receive), or one it
        # dials that nobody accepts
        return _dialing(g, kernel, connected)
    chain = (f"{thread_words(proc, thread)} waits in a zmq {verb}{site_words(thread)} with no "
             f"connection at all: {who(proc)} {_NONE}, so no message can reach or leave it")
    if len(stuck) > 1:
        chain += f" ({who_list([p for p, _ in stuck[1:]])} the same)"
    if owner is not None:
        chain += (f"; it bound ipc://{path}, and so did {who(owner)}, whose socket holds that "
                  "path's connections: a second bind of an ipc:// path succeeds silently and "
                  "takes the name over, so every peer connects to the other (libzmq#2059): "
                  "give each process endpoints of its own (a unique path per replica)")
    else:
        where = "; ".join(
            f"{who(p)} listens on {', '.join(str(s.port or s.address) for s in socks)} with "
            "nobody connected" for p, socks in alone[:3])
        own = unconnected_listeners(kernel, proc)
        if own and len(alone) == len(peers) and not connected & {
                r.inode for p in peers if (read := kernel.process(p.pid)) for r in read.fds}:
            # every endpoint of the job bound, none dialled: the names differ per process
            chain += (f"; {where}; {who(proc)} listens on "
                      f"{', '.join(str(s.port or s.address) for s in own)} with nobody "
                      "connected itself: no two processes of the job are connected, each "
                      "bound endpoints its peers do not dial, and zmq connects in the "
                      "background and never fails the call (names made in each process, as "
                      "a random path made at import is made again in each spawned child): "
                      "make the names once and pass them to the children, and give the "
                      "sockets a timeout (zmq.RCVTIMEO, zmq.SNDTIMEO)")
        else:
            chain += (f"; {where}: zmq connects in the background and never fails the call, "
                      "so its endpoint is wrong, or the peer dropped the connection (a REQ "
                      "drops it on a reply without the empty delimiter frame: a ROUTER must "
                      "answer [identity, b'', body]); give the socket a timeout "
                      "(zmq.RCVTIMEO, zmq.SNDTIMEO) and check the endpoints")
    members = tuple(p.pid for p, _ in stuck) + ((owner.pid,) if owner is not None else ())
    return WaitPattern("unconnected_zmq", members, chain, (), proc.pid,
                       thread.tid if thread is not None else None,
                       also=tuple(p.pid for p, _ in stuck[1:]))


def _io_retrying(proc: Process) -> Thread | None:
    """A zmq I/O thread of ``proc`` that ran within zmq's reconnect interval."""
    return next((t for t in proc.threads if io_thread(t) and t.off_cpu_s is not None
                 and t.off_cpu_s < _RETRY_S), None)


def _retrying(proc: Process) -> tuple[Thread, Thread] | None:
    """(its thread in a zmq receive, its zmq I/O thread retrying a connect): every Python
    thread of ``proc`` asleep for seconds, one in a zmq receive, while an I/O thread ran
    within zmq's reconnect interval."""
    io = _io_retrying(proc)
    python = [t for t in proc.threads if t.python and t.frames]
    if io is None or not python or any(
            t.state != "S" or t.off_cpu_s is None or t.off_cpu_s < _ASLEEP_S for t in python):
        return None
    receiver = next((t for t in python if in_zmq_receive(t)), None)
    return (receiver, io) if receiver is not None else None


def _dialing(g: Graph, kernel: KernelWaits, connected: set[int]) -> WaitPattern | None:
    """A process that holds no connection, one of its threads in a zmq receive, its I/O
    thread retrying a connect (``_retrying``): the endpoint it dials has no listener, and the
    receive waits for ever. Others of the job whose I/O threads retry as well dial too. Not
    where a process of the job died of an error: the endpoint it dials most likely died with
    it (zmqends.unpeered_receive tells that)."""
    if any(d.exit_code not in (None, 0) for d in g.exited):
        return None
    for proc in g.snap.processes:
        found = None if proc.is_exited or proc.role in HELPER_ROLES or not \
            _unconnected_retrying(proc, kernel, connected) else _retrying(proc)
        if found is None:
            continue
        thread, io = found
        asleep = min(t.off_cpu_s or 0.0 for t in proc.threads if t.python and t.frames)
        working = proc.working_thread
        also = (f" (its thread {working.name or working.tid} waits{site_words(working)})"
                if working is not None and working is not thread else "")
        serves = (f" (it listens on {', '.join(str(s.port or s.address) for s in proc.listening)}"
                  ", with nobody connected)" if proc.listening else " and listens on nothing")
        chain = (f"{thread_words(proc, thread)} waits in a zmq receive{site_words(thread)}"
                 f"{also} with no connection at all: {who(proc)} {_NONE}{serves}, while its "
                 f"zmq I/O thread {io.name} ran {io.off_cpu_s:.2f} s ago, its Python threads "
                 f"asleep for {asleep:.1f} s or more: zmq retries a connect that nobody accepts "
                 "(every reconnect_ivl, 100 ms by default), silently, and the receive waits "
                 "for ever")
        dialers = [p for p in g.snap.processes if p is not proc and not p.is_exited
                   and _unconnected_retrying(p, kernel, connected)]
        if dialers:
            one = len(dialers) == 1
            chain += (f". {who_list(dialers)} {'holds' if one else 'hold'} no connection "
                      f"either, {'its' if one else 'their'} zmq I/O "
                      f"thread{'' if one else 's'} waking as often: "
                      f"{'it retries' if one else 'they retry'} a connect too: both dial, and "
                      "neither binds (a PUB/SUB or PUSH/PULL pair needs one bound end): bind "
                      "the endpoint on one side (a wildcard tcp://*:PORT where the library binds "
                      "only that), and give the socket a timeout (zmq.RCVTIMEO)")
        elif unheard := _unheard(g, proc):
            chain += (f". Its command line or output names {', '.join(unheard[:2])}, and "
                      f"nothing on this host listens on port{'s' if len(unheard) > 1 else ''} "
                      f"{', '.join(e.rsplit(':', 1)[1] for e in unheard[:2])}: the peer it dials "
                      "there is down, or dials too (two sides that both connect() meet "
                      "nowhere: a PUB/SUB or PUSH/PULL pair needs one bound end); bind one "
                      "side, or start the peer, and give the socket a timeout (zmq.RCVTIMEO, "
                      "or a Poller with a timeout)")
        else:
            chain += (". The endpoint it dials has no listener: the peer is down, at another "
                      "address, or dials too (two sides that both connect() meet nowhere: a "
                      "PUB/SUB or PUSH/PULL pair needs one bound end); check the endpoint, bind "
                      "one side, and give the socket a timeout (zmq.RCVTIMEO, or a Poller with "
                      "a timeout)")
        return WaitPattern("unconnected_zmq", (proc.pid, *(p.pid for p in dialers)), chain, (),
                           proc.pid, thread.tid)
    return None


def _unconnected_retrying(proc: Process, kernel: KernelWaits, connected: set[int]) -> bool:
    """No socket of ``proc`` is connected and a zmq I/O thread of it ran just now."""
    read = kernel.process(proc.pid)
    return read is not None and not any(f.inode in connected for f in read.fds) \
        and _io_retrying(proc) is not None


#: A zmq TCP endpoint on this host, as a program's arguments or output name it.
_LOCAL_ENDPOINT = re.compile(r"\btcp://(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):"
                             r"(?P<port>\d{1,5})\b")


def _unheard(g: Graph, proc: Process) -> list[str]:
    """The local TCP endpoints ``proc``'s command line or output names on which nothing on
    its host listens (``Host.listening_ports``, every port any process listens on), in the
    order named; none where the host's listeners were not read."""
    host = g.snap.host_of(proc)
    if host is None or not host.listening_ports:
        return []
    heard = set(host.listening_ports)
    found: dict[str, None] = {}
    for text in (*proc.cmdline, *proc.log_tail):
        for m in _LOCAL_ENDPOINT.finditer(text):
            if int(m.group("port")) not in heard:
                found[m.group(0)] = None
    return list(found)
