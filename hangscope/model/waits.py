"""Wait evidence: who holds which file lock, and whom each point-to-point rank waits for.

Pure, frozen data written by the sampler (collect/locks.py reads ``/proc/locks``; py-spy
``--locals`` gives a polling waiter's lock file and a p2p rank's peer) and read by the verdict
rules (analyze/evidence/locks.py, analyze/evidence/p2p.py). Like model/nccl.py, no ``from
__future__ import
annotations``: field types are real objects, so model/serialize.py's generic reader resolves them.
Definitions in dependency order.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class FileLockRecord:
    """One line of /proc/locks: a lock held, or (``blocked``) a process waiting for it."""

    index: int  # the lock's number; a waiter's "->" line carries the number of its lock
    kind: str  # FLOCK | POSIX | OFDLCK | LEASE
    mandatory: bool
    access: str  # READ | WRITE
    pid: int | None  # None for OFD locks, which belong to an open file, not a process
    device: tuple[int, int]  # (major, minor), as os.major/os.minor of st_dev
    inode: int
    blocked: bool = False
    path: str | None = None  # from a process's fd links; None when nobody of the job has it open

    @property
    def file_key(self) -> tuple[int, int, int]:
        return (*self.device, self.inode)


@dataclass(frozen=True)
class P2PCall:
    """One rank's pending point-to-point op and its peer, as the c10d frame's locals give it."""

    op: str  # send | recv
    peer: int | None  # the peer's global rank (``src``/``dst``), None when not given
    group_peer: int | None = None  # the peer's rank in ``group`` (``group_src``/``group_dst``)
    tag: int | None = None
    group: str | None = None  # the group's repr; None is the default (world) group


@dataclass(frozen=True)
class ThreadObjects:
    """The objects another thread of a process waits for in a framework's get, while its
    working thread waits on a hand-off from that process (Ray Data's iterator: the trainer's
    loop waits on a queue its prefetch thread fills from ``ray.get``)."""

    tid: int
    objects: tuple[str, ...] = ()


@dataclass(frozen=True)
class LocalsRead:
    """What ``py-spy dump --locals`` said of one process's working thread (asked only of
    ranks polling a ``filelock``, blocked in send/recv or in a c10d store get/wait)."""

    pid: int
    lock_file: str | None = None  # the file a polling filelock waiter wants
    p2p: P2PCall | None = None  # its pending send/recv and the peer
    # The keys its store get/wait waits for (its calling line and locals:
    # analyze/evidence/store_key.py)
    store_keys: tuple[str, ...] = ()
    error: str | None = None  # why nothing was read (py-spy failed or timed out)
    # The hex ids of the objects its blocking get waits for (a framework's ObjectWait: the
    # frame's locals name each object's address, the waiter's memory its id)
    objects: tuple[str, ...] = ()
    # The rank and world size its ``init_process_group`` call was given (its arguments): the
    # world an ``mp.spawn`` job asked for, which no environment variable says
    init_rank: int | None = None
    init_world: int | None = None
    # "host:port" of the TCPStore its rendezvous creates or connects to (its arguments)
    init_store: str | None = None
    # the root its rooted collective names (a broadcast's src, a gather's dst)
    root: int | None = None
    # The objects its other threads' gets wait for (its working thread waits on a hand-off)
    thread_objects: tuple[ThreadObjects, ...] = ()


@dataclass(frozen=True)
class Hosted:
    """The producers (a framework's actors) a process hosts, as its own log file says."""

    pid: int
    ids: tuple[str, ...]  # hex ids
    source: str  # the log file that says so


# -- the raw facts of the wait-for graph (collect/procfs.py reads them; analyze/graph/waitgraph.py
#    joins them) -------------------------------------------------------------------------


@dataclass(frozen=True)
class FdRecord:
    """One open fd of a process: ``ls -l /proc/PID/fd`` and ``cat /proc/PID/fdinfo/N``."""

    fd: int
    target: str  # the link: "pipe:[123]", "socket:[456]", "/path/file", "/dev/pts/3"
    access: str | None = None  # "r" | "w" | "rw": the O_ACCMODE bits of fdinfo's flags
    inode: int | None = None  # pipe/socket inode, or a file's st_ino
    device: tuple[int, int] | None = None  # a file's (major, minor): the key of its locks
    # The locks this open file holds, fdinfo's "lock:" lines (OFD locks show pid -1 in
    # /proc/locks: this line is the only place that says whose they are).
    locks: tuple[FileLockRecord, ...] = ()
    # /dev/ptmx (a pty's master end): the index N of its slave /dev/pts/N (fdinfo tty-index)
    tty_index: int | None = None
    # an eventfd's counter (fdinfo eventfd-count): signals written and not yet read (a zmq
    # socket's mailbox holding a command nobody has taken: a message arrived, unread)
    count: int | None = None


# Syscall numbers by machine: (reads, writes, waits for a child, flock, fcntl, poll, open;
# ``poll_ms``: the poll whose third argument is its timeout in ms, not a pointer as ppoll's;
# ``restart``: restart_syscall, as a wait a ptrace stop interrupted goes on; ``futex``;
# ``clock_nanosleep``: Python's ``time.sleep``; ``epoll_ms``: epoll_wait/epoll_pwait, whose
# fourth argument is its timeout in ms, negative for none: an asyncio loop's next timer).
_X86 = {"read": {0, 17, 19, 45, 47, 299}, "write": {1, 18, 20, 44, 46, 307},
        "wait": {61, 247}, "flock": {73}, "fcntl": {72}, "poll": {7, 271}, "open": {2, 257},
        "poll_ms": {7}, "restart": {219}, "futex": {202}, "clock_nanosleep": {230},
        "epoll_ms": {232, 281}}
_ARM = {"read": {63, 65, 67, 207, 212, 243}, "write": {64, 66, 68, 206, 211, 269},
        "wait": {260, 95}, "flock": {32}, "fcntl": {25}, "poll": {73}, "open": {56},
        "poll_ms": set(), "restart": {128}, "futex": {98}, "clock_nanosleep": {115},
        "epoll_ms": {22}}
SYSCALLS = {"x86_64": _X86, "aarch64": _ARM}


@dataclass(frozen=True)
class TaskSyscall:
    """What a blocked thread is inside: ``cat /proc/PID/task/TID/syscall`` (number, 6 args)."""

    tid: int
    nr: int  # the syscall number of this machine's ABI (``arch``)
    args: tuple[int, ...] = ()
    # poll/ppoll: the (fd, events) it polls, read from its pollfd array (/proc/PID/mem)
    polled: tuple[tuple[int, int], ...] = ()
    # open/openat blocked opening a FIFO (wchan wait_for_partner): the path it opens, made
    # absolute (its cwd or dirfd), read from its memory; its flags are in ``args``
    path: str | None = None
    # epoll_wait/epoll_pwait: the (fd, events) its epoll instance watches, the ``tfd:`` lines
    # of the epoll fd's fdinfo (an asyncio loop: its self-pipe, its sockets)
    watched: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ProcessFds:
    """One process's fds and its blocked threads' syscalls (the job's processes only)."""

    pid: int
    fds: tuple[FdRecord, ...] = ()
    syscalls: tuple[TaskSyscall, ...] = ()
    error: str | None = None  # why nothing was read (gone, not ours)

    def syscall(self, tid: int) -> TaskSyscall | None:
        """The syscall thread ``tid`` is blocked in (None: running, or not read)."""
        return next((c for c in self.syscalls if c.tid == tid), None)


@dataclass(frozen=True)
class UnixPeer:
    """A connected Unix socket and its peer's inode (sock_diag, UDIAG_SHOW_PEER)."""

    inode: int
    peer: int
    # the path this end is bound to (UNIX_DIAG_NAME): a server's accepted connection carries
    # its listener's path, a client's end none (None: unread, or unbound)
    name: str | None = None
    # A client end not accepted yet (UNIX_DIAG_ICONS of a listener): the listening socket's
    # inode whose accept queue holds it (peer is then 0, name the listener's path).
    listener: int | None = None
    # bytes this end sent that its peer has not read yet (UNIX_DIAG_RQLEN's wqueue): a
    # writer whose peer stopped reading; None: unread
    unsent: int | None = None


def port_of(address: str) -> int | None:
    """The port of an ``addr:port`` end as the TCP tables write it (None: no number)."""
    tail = address.rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


@dataclass(frozen=True)
class TcpConnection:
    """A TCP socket of the job that is not listening: its inode and both ends."""

    inode: int
    local: str  # "addr:port"
    remote: str
    state: int = 1  # the kernel's TCP state number (1: established)
    unread: int | None = None  # bytes in its receive queue that nobody has read yet
    # ms since data last left through it, and since data last came (tcp_info): which end spoke
    # last; None where the kernel did not say
    last_sent_ms: int | None = None
    last_recv_ms: int | None = None
    # bytes written to it and not yet acknowledged by its peer (sock_diag's wqueue): a writer
    # whose peer's window closed; None: unread
    unsent: int | None = None


@dataclass(frozen=True)
class KernelWaits:
    """The job's kernel wait facts for the wait-for graph (procfs ``read_kernel_waits``)."""

    arch: str  # platform.machine(): which syscall numbers ``TaskSyscall.nr`` uses
    processes: tuple[ProcessFds, ...] = ()
    unix_peers: tuple[UnixPeer, ...] = ()
    tcp: tuple[TcpConnection, ...] = ()
    seconds: float | None = None  # what reading them cost

    def process(self, pid: int) -> ProcessFds | None:
        """The fds and syscalls read of ``pid`` (None: not one of the job's, or not read)."""
        return next((pf for pf in self.processes if pf.pid == pid), None)

    def tcp_pairs(self) -> list[tuple[int, int, TcpConnection]]:
        """(holder PID, PID holding the other end, the connection) of each TCP connection
        both of whose ends processes of the job hold: their TCP ends match, swapped."""
        holder = {rec.inode: pf.pid for pf in self.processes for rec in pf.fds
                  if rec.inode is not None and rec.target.startswith("socket:")}
        ends = {(c.local, c.remote): c.inode for c in self.tcp}
        out = []
        for conn in self.tcp:
            pid, other = holder.get(conn.inode), holder.get(ends.get((conn.remote, conn.local)))
            if pid is not None and other is not None and pid != other:
                out.append((pid, other, conn))
        return out


@dataclass(frozen=True)
class OutsideProcess:
    """A process outside the job that one of its waits leads to: the holder of a file lock a
    process of the job waits for, or the owner of the other end of a TCP connection on this
    host that a blocked thread of the job waits on (collect/outside.py). Read from /proc and,
    when it runs Python, one ``py-spy dump --nonblocking`` (it is never paused)."""

    pid: int
    cmdline: tuple[str, ...] = ()
    state: str | None = None  # its main thread's state letter (R, S, D)
    wchan: str | None = None  # where its main thread sleeps in the kernel
    site: str | None = None  # its main thread's innermost Python frame, "main (sync.py:32)"
    # the job's TCP socket inodes whose other end it holds (an accepted connection)
    sockets: tuple[int, ...] = ()
    # the job's TCP socket inodes waiting in the accept queue of a socket it listens on
    pending: tuple[int, ...] = ()


@dataclass(frozen=True)
class WaitEvidence:
    """The job's file locks (/proc/locks, whole chains) and the locals read of its waiters."""

    file_locks: tuple[FileLockRecord, ...] = ()
    locals: tuple[LocalsRead, ...] = ()
    kernel: KernelWaits | None = None  # fds, syscalls, socket peers (None: not read)
    # Which process hosts which producer (read only when a waiter's objects were read)
    hosted: tuple[Hosted, ...] = ()
    # Processes outside the job that a wait leads to (a lock's holder, a local TCP peer)
    outside: tuple[OutsideProcess, ...] = ()

    def lock_files(self) -> dict[int, str]:
        """PID -> the file a polling waiter wants."""
        return {r.pid: r.lock_file for r in self.locals if r.lock_file}


# -- the wait-for graph (analyze/graph/waitgraph.py derives it; JSON carries it) ------------------


#: fd links of the kernel's file-watch instances: a read on one waits for the file system.
FILE_WATCHES = ("anon_inode:inotify", "anon_inode:[fanotify]")
#: The end of a TCP edge's object when the socket is its own peer (a self-connect).
SELF_CONNECTED = "(connected to itself)"
#: The end of a terminal edge's object when its output is stopped (flow control, ^S).
OUTPUT_STOPPED = "(its output stopped)"


@dataclass(frozen=True)
class WaitEdge:
    """A -> B: thread ``tid`` of ``pid`` cannot move until ``to_pid`` (thread ``to_tid``)
    acts; ``to_pid`` None: something outside the job (``outside`` says what)."""

    pid: int
    tid: int
    # pipe | unix | tcp | file_lock | child | gil | py_lock | store | terminal | fifo_open |
    # collective (a rank in one waits for a rank of its group in none) | queue (a full
    # multiprocessing.Queue's put waits for its readers) | object (a framework's get waits for
    # the process hosting the object's producer: a Ray actor) | queue_lock (a queue's feeder
    # waits for the write lock another process's feeder holds inside its write) | rpc (a torch
    # RPC's caller waits for a worker whose RPC thread runs a request: probable)
    kind: str
    object: str  # what it waits on: "pipe 123 (write end)", "lock file /x/.lock", "child 3840"
    how: str  # how it was known: "read(fd 5) in the kernel, fdinfo flags", "owns_gil"
    to_pid: int | None = None
    to_tid: int | None = None
    outside: str | None = None  # remote host, terminal, disk... where to_pid is None
    probable: bool = False  # inferred (a Python lock's holder): the sentence says "probable"
    fd: int | None = None  # the waiter's fd, where a syscall named it


@dataclass(frozen=True)
class WaitPattern:
    """A shape found in the graph: a cycle, a sink, a blocked event loop, a lost result..."""

    # own_end | cycle | lock_ring | gil_hold | self_lock | self_wait | barrier_short |
    # leaked_permits |
    # orphan_wait | full_queue |
    # fork_lock | event_loop | lost_wakeup | lost_result | pool_saturated | pool_starved |
    # pending_tasks | unserved_call | uncalled | queued_call |
    # prompt | fifo_open | crash_loop | dead_thread | dead_process | dead_holder | dead_peer |
    # nested_checkout | signal_blocked | signal_ignored | self_connect | self_call | pool_cycle |
    # rpc_pools | tty_stopped | forked_context | overbooked_pool |
    # shared_connection | behind_sibling | sink
    kind: str
    members: tuple[int, ...]  # PIDs, the suspect first where there is one
    chain: str  # the one sentence that states it
    edges: tuple[int, ...] = ()  # indexes into WaitGraph.edges
    suspect: int | None = None  # PID
    suspect_tid: int | None = None
    also: tuple[int, ...] = ()  # PIDs suspect as much as ``suspect`` (forked siblings)


@dataclass(frozen=True)
class WaitGraph:
    """Every wait-for edge of the job and the patterns named from them."""

    edges: tuple[WaitEdge, ...] = ()
    patterns: tuple[WaitPattern, ...] = ()
