"""Find the whole job from any one of its PIDs: ``pstree -p``, ``ps -o pid,ppid,args``.

The only module that walks the process tree with psutil. Roles and rank coordinates come from
process titles, the environment, the launcher's flags and, last, spawn order
(see ``hangscope.analyze.evidence.roles`` for the pure rules).

Why one file: the climb, the walk and the peers beyond the tree share one rule of what is the
job and what is hangscope's own (its process, its shell, its runner, their inherited pipes).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import psutil

from hangscope.collect import procfs
from hangscope.collect.locks import lock_holders_of_waiters
from hangscope.collect.procfs import read_cmdline, read_environ
from hangscope.errors import FIND_PID_HINT, PermissionDenied, ProcessNotFound, UsageError
from hangscope.titles import looks_like_python, looks_like_worker


@dataclass(frozen=True)
class Found:
    """A process of the job as discovery sees it."""

    pid: int
    ppid: int | None
    cmdline: tuple[str, ...]
    exe: str | None
    create_time: float | None
    environ: dict[str, str] | None
    status: str | None
    children: tuple[int, ...] = ()
    exit_codes: dict[int, int] = field(default_factory=dict)
    cpu_ticks: int | None = None  # utime + stime when discovered
    vsize: int | None = None  # bytes of address space: a torch rank's native dump costs more


# psutil's status names for the state letter of /proc/PID/stat.
_STATUS = {"R": psutil.STATUS_RUNNING, "S": psutil.STATUS_SLEEPING,
           "D": psutil.STATUS_DISK_SLEEP, "T": psutil.STATUS_STOPPED,
           "t": psutil.STATUS_TRACING_STOP, "Z": psutil.STATUS_ZOMBIE, "X": psutil.STATUS_DEAD,
           "x": psutil.STATUS_DEAD, "K": "wake-kill", "W": psutil.STATUS_WAKING,
           "I": psutil.STATUS_IDLE, "P": psutil.STATUS_PARKED}


def _exe(pid: int, state: str) -> str | None:
    """``readlink /proc/PID/exe`` as psutil reads it; None where psutil would raise."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe").split("\x00")[0]
    except FileNotFoundError:
        return None if state in ("Z", "X", "x") else ""  # a zombie, or a kernel thread
    except OSError:
        return None
    if exe.endswith(" (deleted)") and not os.path.exists(exe):
        exe = exe[: -len(" (deleted)")]
    return exe


#: (pid, start ticks) -> (exe, environ): neither changes while a process lives once it names
#: its rank (a worker without one may still set its own), so a refresh does not read them again.
Fixed = dict[tuple[int, int], tuple[str | None, dict[str, str] | None]]
#: An environment that names the process's rank: it is fixed from then on.
_RANKED = ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def _info(line: procfs.Stat, children: tuple[int, ...], boot: float,
          fixed: Fixed | None = None) -> Found:
    key = (line.pid, line.start_ticks)
    # A process in state D may hold its memory map's lock: reading its memory could wait.
    live = line.state not in ("D", "Z", "X", "x")
    if fixed is not None and key in fixed and line.state not in ("Z", "X", "x"):
        exe, environ = fixed[key]
        if not environ or not any(k in environ for k in _RANKED):
            environ = read_environ(line.pid, live=live)  # it may have set its rank since
            fixed[key] = (exe, environ)
    else:
        exe, environ = _exe(line.pid, line.state), read_environ(line.pid, live=live)
        if fixed is not None:
            fixed[key] = (exe, environ)
    return Found(
        pid=line.pid,
        ppid=line.ppid,
        cmdline=read_cmdline(line.pid),  # a title can change (setproctitle)
        exe=exe,
        create_time=line.create_time(boot),  # psutil's create_time()
        environ=environ,
        status=_STATUS.get(line.state, line.state),
        children=children,
        cpu_ticks=line.cpu_ticks,
        vsize=line.vsize,
    )


def check_target(pid: int) -> psutil.Process:
    """Validate the user's PID before anything else.

    Raises:
        UsageError: the PID is not a positive number, or is hangscope itself.
        ProcessNotFound: no such process.
    """
    if pid <= 0:
        raise UsageError(f"{pid} is not a process ID: give the PID of a rank or of the launcher.")
    if pid == os.getpid():
        raise UsageError(f"{pid} is hangscope itself: give the PID of the job to diagnose.")
    try:
        proc = psutil.Process(pid)
        proc.status()
    except psutil.NoSuchProcess as exc:
        raise ProcessNotFound(f"No process with PID {pid} exists.") from exc
    except psutil.AccessDenied as exc:
        raise PermissionDenied(f"Not allowed to inspect PID {pid}.") from exc
    except (OverflowError, ValueError) as exc:
        raise UsageError(f"{pid} is not a valid process ID.") from exc
    if _is_kernel_thread(pid):
        raise UsageError(f"PID {pid} is a kernel thread ({_name(proc)}), not part of a job: "
                         "give the PID of the launcher or of a rank.",
                         help_text=f"{FIND_PID_HINT}.")
    if pid == 1 and not looks_like_python(read_cmdline(1)):
        # The whole machine descends from init: hangscope would trace every Python process
        # on it. A container whose PID 1 is the Python launcher is still accepted.
        raise UsageError(f"PID 1 is the init process ({_name(proc)}), not a job: give the PID "
                         "of the launcher or of a rank.", help_text=f"{FIND_PID_HINT}.")
    return proc


_PF_KTHREAD = 0x00200000  # include/linux/sched.h


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


def _is_kernel_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        return bool(int(fields[6]) & _PF_KTHREAD)
    except (OSError, ValueError, IndexError):
        return False


def find_root(pid: int) -> int:
    """Climb from the given PID to the job's launcher.

    Climb while the current process looks like a worker (a titled rank, a process with RANK
    in its environment, a multiprocessing child, a fork of its parent) and its parent is a
    Python process that is not hangscope itself. Init, tmux, sshd, a login shell and pytest stop
    the climb; another shell stops it too unless it started this rank's siblings (same
    rendezvous or command line): then that shell is the launcher.
    """
    me = os.getpid()
    current = psutil.Process(pid)
    while True:
        try:
            parent = current.parent()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return current.pid
        if parent is None or parent.pid in (0, 1, me):
            return current.pid
        cmd = read_cmdline(current.pid)
        parent_cmd = read_cmdline(parent.pid)
        env = read_environ(current.pid) or {}
        if not looks_like_python(parent_cmd):
            # A shell that started this rank and its siblings (`bash -c 'RANK=0 python r.py &
            # RANK=1 ...'`) is the job's launcher; one that merely started this job is not.
            shell_runs_job = same_job_siblings(current.pid, parent.pid, cmd, env)
            return parent.pid if shell_runs_job and launches_jobs(parent_cmd) else current.pid
        if parent.pid in _my_ancestors():
            return current.pid  # the shell or test runner that started hangscope: no job
        if not looks_like_worker(cmd, env, parent_cmd) and not _belongs_to_parent(
                current.pid, parent.pid, cmd):
            return current.pid
        current = parent


def _my_ancestors(table: dict[int, procfs.Stat] | None = None) -> frozenset[int]:
    """hangscope's own parent chain (the user's shell, a test runner): never part of a job."""
    if table is None:
        table = {}
        pid = os.getpid()
        while pid > 1 and pid not in table and (line := procfs.read_stat(pid)) is not None:
            table[pid] = line
            pid = line.ppid
    out: set[int] = set()
    pid = os.getpid()
    while pid in table and pid not in out and pid > 1:
        out.add(pid)
        pid = table[pid].ppid
    return frozenset(out)


def _belongs_to_parent(pid: int, parent: int, cmd: Sequence[str]) -> bool:
    """A child of a Python process that is part of its job though it is no worker by title or
    environment: a non-Python child wired to it (``sh``, ``cat``, a tool whose output it reads:
    a pipe the parent made, not one the parent inherited), or a child in the parent's own
    process group (one shell job: the shell put both in it). A non-Python child that shares
    no pipe of the parent's own (``sleep`` it started) is a job of its own: its PID is refused
    with the parent's named (discover.check_python_job)."""
    mine, theirs = procfs.read_stat(pid), procfs.read_stat(parent)
    if not looks_like_python(cmd):
        shared = procfs.pipe_and_socket_inodes(pid)[0] & procfs.pipe_and_socket_inodes(parent)[0]
        if shared and theirs is not None and theirs.ppid > 1:
            shared -= procfs.pipe_and_socket_inodes(theirs.ppid)[0]  # the parent's own stdio
        return bool(shared)
    return mine is not None and theirs is not None and mine.pgrp == theirs.pgrp


#: Parents that start unrelated jobs: discovery never climbs to them from a rank.
_SESSION_HOSTS = ("init", "systemd", "tmux", "tmux: server", "screen", "SCREEN", "sshd", "login",
                  "su", "sudo", "containerd-shim", "docker-init", "tini", "dumb-init", "pytest",
                  "srun", "slurmstepd", "sbatch")


def launches_jobs(parent_cmd: tuple[str, ...] | list[str]) -> bool:
    """Whether a non-Python parent may be a job's launcher: not a login shell (argv[0] starts
    with "-"), a terminal multiplexer, sshd, init or a scheduler's step daemon."""
    if not parent_cmd:
        return False
    head = parent_cmd[0]
    if head.startswith("-"):
        return False
    name = head.rsplit("/", 1)[-1].split(":", 1)[0]
    return name not in _SESSION_HOSTS


def job_key(env: dict[str, str]) -> tuple[str, ...] | None:
    """What names one job's rendezvous: MASTER_ADDR:MASTER_PORT, else torchelastic's run id."""
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return ("rdzv", env["MASTER_ADDR"], env["MASTER_PORT"])
    if env.get("TORCHELASTIC_RUN_ID"):
        return ("elastic", env["TORCHELASTIC_RUN_ID"], env.get("WORLD_SIZE", ""))
    return None


def _is_rank_env(env: dict[str, str]) -> bool:
    return "RANK" in env or "LOCAL_RANK" in env


def same_job_siblings(pid: int, parent: int, cmd: tuple[str, ...] | list[str],
                      env: dict[str, str]) -> list[int]:
    """The other children of ``parent`` that are ranks of ``pid``'s job: same rendezvous
    (MASTER_ADDR/MASTER_PORT or TORCHELASTIC_RUN_ID) or the same command line, with a RANK."""
    if not _is_rank_env(env):
        return []
    key = job_key(env)
    try:
        kids = psutil.Process(parent).children()
    except psutil.Error:
        return []
    out = []
    for kid in kids:
        if kid.pid == pid:
            continue
        kid_env = read_environ(kid.pid) or {}
        if not _is_rank_env(kid_env):
            continue
        if (key is not None and job_key(kid_env) == key) or (
                cmd and tuple(read_cmdline(kid.pid)) == tuple(cmd)):
            out.append(kid.pid)
    return out


def same_rendezvous(key: tuple[str, ...], known: set[int]) -> list[int]:
    """``grep -l MASTER_PORT=... /proc/*/environ``: the top processes outside ``known`` that
    carry a RANK and the rendezvous ``key`` (ranks of this job started elsewhere on the host:
    by another shell, setsid, or reparented to init)."""
    table = procfs.scan()
    me = os.getpid()
    hits = set()
    for pid in table:
        if pid in known or pid == me:
            continue
        env = read_environ(pid)
        if env and _is_rank_env(env) and job_key(env) == key:
            hits.add(pid)
    # A rank's own children inherit its environment: keep only the top of each subtree.
    return sorted(pid for pid in hits if table[pid].ppid not in hits)


def walk(root: int, limit: int = 4096, fixed: Fixed | None = None) -> list[Found]:
    """The root and all its descendants, in tree order (parents before children).

    One pass over ``/proc/*/stat`` gives every parent link (psutil's ``children()`` would make
    that pass once per process: 65 passes for a 64-rank job). ``fixed``: a cache the caller
    keeps between walks (see ``Fixed``); entries of processes no longer found are dropped.
    """
    table = procfs.scan()
    if root not in table:
        raise ProcessNotFound(f"No process with PID {root} exists.")
    kids: dict[int, list[int]] = {}
    for line in table.values():
        kids.setdefault(line.ppid, []).append(line.pid)
    boot = procfs.boot_time()
    out: list[Found] = []
    queue = deque([root])
    # hangscope itself and what it runs (py-spy) are never part of a job: a shell that started
    # both the job and hangscope, or `hangscope dump $$`, would otherwise diagnose hangscope.
    # The shells between the root and hangscope (`bash` in a rank's terminal, `timeout`) host
    # hangscope, not the job: walked through, never listed.
    me = os.getpid()
    seen: set[int] = {me} - {root}
    hosts = _hosts_of(me, root, table)
    while queue and len(out) < limit:
        pid = queue.popleft()
        if pid in seen:
            continue
        seen.add(pid)
        line = table[pid]
        # A child older than its parent holds a recycled PID (psutil's children() rule).
        children = tuple(k for k in kids.get(pid, ()) if table[k].start_ticks >= line.start_ticks
                         and k != me)
        queue.extend(children)
        if pid in hosts:
            continue
        out.append(_info(line, tuple(k for k in children if k not in hosts), boot, fixed))
    if fixed is not None:
        alive = {(f.pid, table[f.pid].start_ticks) for f in out}
        for key in [k for k in fixed if k not in alive]:
            del fixed[key]
    return out


# -- the job beyond the tree: its process group, its session, its pipe and socket peers ------
#: Processes of this user looked at for pipe and socket peers at most (the scan stays cheap).
PEER_SCAN_LIMIT = 2048


def _leader_is_job(leader: int, table: dict[int, procfs.Stat], mine: frozenset[int],
                   job: set[int]) -> bool:
    """A group or session leader that is the job's: a process of the job (``job``), never
    hangscope's own shell or test runner, a login shell, tmux, sshd, init or a scheduler
    daemon. A leader outside the job (the terminal's shell, a runner that started this job
    and others) leads unrelated jobs too: its members are no peers."""
    if leader <= 1 or leader in mine or leader not in table or leader not in job:
        return False
    return launches_jobs(read_cmdline(leader)) or looks_like_python(read_cmdline(leader))


def job_peers(known: Sequence[int], root: int = 0) -> list[int]:
    """Processes of the job outside the tree walked (``known``), tops of their subtrees:

    - its process group and session, when their leader is the job's (a shell script that
      started a server and its client: ``bash run.sh`` leads both);
    - processes of the same user holding the other end of one of its pipes (the same pipe
      inode), or the other end of one of its TCP connections on this host (the local and
      remote ports swapped in ``/proc/net/tcp``);
    - the holder of a file lock (flock, POSIX) one of its processes is blocked on
      (``/proc/locks``): a detached daemon the job started, in a session of its own.

    Never hangscope's own ancestors (the user's shell, a test runner that holds a pipe to it).
    ``root``: the root of the tree walked (its parent may lead the job's process group).
    """
    table = procfs.scan()
    mine = _my_ancestors(table)
    known_set = set(known)
    stats = [table[p] for p in known if p in table]
    # The group's leader may be the root's parent, a script that started the job and a peer of
    # it in one shell job (``bash run.sh``); a session's leader must be of the job itself.
    parents = known_set | ({table[root].ppid} if root in table else set())
    groups = {s.pgrp for s in stats if _leader_is_job(s.pgrp, table, mine, parents)}
    sessions = {s.session for s in stats if _leader_is_job(s.session, table, mine, known_set)}
    hits = {pid for pid, s in table.items()
            if pid not in known_set and (s.pgrp in groups or s.session in sessions)}
    hits |= _pipe_and_tcp_peers(known_set, table, mine)
    hits |= {pid for pid in lock_holders_of_waiters(known_set) if pid in table
             and (os.getuid() == 0 or procfs.owner_uid(pid) == os.getuid())}
    hits -= mine | known_set
    hits -= _shell_pipeline(hits, known_set, root, table)
    return sorted(pid for pid in hits if table[pid].ppid not in hits)


def _shell_pipeline(hits: set[int], known: set[int], root: int,
                    table: dict[int, procfs.Stat]) -> set[int]:
    """The rest of the shell pipeline that started the job (``python train.py | tee log``,
    ``| cut -c1-80``): filters the root's non-Python parent started beside it, joined to the
    job only by a pipe on their stdin or stdout, and that shell itself when it started nothing
    else. They carry its output; they are no part of the job (their reads are no waits of it)."""
    shell = table[root].ppid if root in table else 0
    if shell <= 1 or shell not in table or looks_like_python(read_cmdline(shell)):
        return set()
    job_pipes: set[int] = set()
    for pid in known:
        job_pipes |= procfs.pipe_and_socket_inodes(pid)[0]
    # What the shell holds itself, every child of it inherited (its own stdout): no link.
    job_pipes -= procfs.pipe_and_socket_inodes(shell)[0]
    filters = set()
    for pid in hits:
        if table[pid].ppid != shell or looks_like_python(read_cmdline(pid)):
            continue
        shared = procfs.pipe_and_socket_inodes(pid)[0] & job_pipes
        if shared and shared <= procfs.stdio_pipes(pid):
            filters.add(pid)
    if not filters:
        return set()
    others = {pid for pid, s in table.items() if s.ppid == shell} - filters - known
    below = {pid for pid in hits if _descends(pid, filters, table)}
    return filters | below | ({shell} if shell in hits and not others else set())


def _descends(pid: int, tops: set[int], table: dict[int, procfs.Stat]) -> bool:
    """``pid`` is below one of ``tops`` (a filter's own children)."""
    seen = 0
    while pid > 1 and pid in table and seen < 4096:
        pid = table[pid].ppid
        if pid in tops:
            return True
        seen += 1
    return False


def _pipe_and_tcp_peers(known: set[int], table: dict[int, procfs.Stat],
                        mine: frozenset[int]) -> set[int]:
    uid = os.getuid()
    holders: dict[int, int] = {}
    job_socks: set[int] = set()
    for pid in known:
        pipes, socks = procfs.pipe_and_socket_inodes(pid)
        for inode in pipes:
            holders[inode] = holders.get(inode, 0) + 1
        job_socks |= socks
    # A pipe two processes of the job hold already joins them; one that a single process
    # holds has its other end elsewhere (or nowhere): only those are looked for. A pipe an
    # ancestor of the job (or hangscope, its shell, its runner) holds too was inherited: the
    # stdout a terminal, a runner or a log collector gave every job it started, no link.
    job_pipes = {inode for inode, count in holders.items() if count == 1}
    for pid in _outside_ancestors(known, table) | mine:
        if job_pipes:
            job_pipes -= procfs.pipe_and_socket_inodes(pid)[0]
    # The end of each such pipe the job holds: a process outside it that holds the same end is
    # no peer (two jobs that inherited one terminal's stdin pipe both read; neither writes).
    ends: dict[int, str] = {}
    for pid in known:
        if job_pipes:
            ends.update(procfs.pipe_ends(pid, job_pipes))
    tcp = procfs.tcp_connections() if job_socks else {}
    # The far end of each of the job's TCP connections: (remote, local) as the peer sees it.
    far = {(remote, local) for inode, (local, remote) in tcp.items() if inode in job_socks}
    far_inodes = {inode for inode, pair in tcp.items() if pair in far}
    if not job_pipes and not far_inodes:
        return set()
    out: set[int] = set()
    scanned = 0
    for pid in table:
        if pid in known or pid in mine or pid <= 1:
            continue
        if uid != 0 and procfs.owner_uid(pid) != uid:
            continue
        scanned += 1
        if scanned > PEER_SCAN_LIMIT:
            break
        pipes, socks = procfs.pipe_and_socket_inodes(pid)
        if socks & far_inodes or (pipes & job_pipes and _other_end(pid, pipes & job_pipes, ends)):
            out.add(pid)
    return out


def _other_end(pid: int, shared: set[int], ends: dict[int, str]) -> bool:
    """``pid`` and the job hold both ends of one of the ``shared`` pipes between them."""
    theirs = procfs.pipe_ends(pid, shared)
    return any(set(theirs.get(inode, "rw") + ends.get(inode, "rw")) >= {"r", "w"}
               for inode in shared)


def _outside_ancestors(known: set[int], table: dict[int, procfs.Stat]) -> set[int]:
    """The ancestors of the job's processes that are not of the job (init left out)."""
    out: set[int] = set()
    for pid in known:
        parent = table[pid].ppid if pid in table else 0
        while parent > 1 and parent in table and parent not in known and parent not in out:
            out.add(parent)
            parent = table[parent].ppid
    return out


def _hosts_of(me: int, root: int, table: dict[int, procfs.Stat]) -> set[int]:
    """hangscope's non-Python ancestors strictly below ``root``, when ``root`` is one of its
    ancestors (hangscope runs inside the job's tree): empty otherwise."""
    chain: list[int] = []
    pid = table[me].ppid if me in table else 0
    while pid in table and pid != root and len(chain) < 4096:
        chain.append(pid)
        pid = table[pid].ppid
    if pid != root:
        return set()
    return {p for p in chain if not looks_like_python(read_cmdline(p))}
