"""Discovery: from any PID of a job to the job, its processes, their roles and rank coordinates.

``hangscope dump PID`` starts here: climb from PID to the launcher, walk its descendants
(collect/tree.py), name each process's role and rank (analyze/evidence/roles.py: titles,
environment,
launcher flags), number unnamed multiprocessing siblings by spawn order, and read the world
size the launcher asked for. It also owns the PID-reuse checks: a PID seen at discovery must
still name the same process (same start time) before anything traces it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import replace

import psutil

from hangscope.analyze.evidence.roles import (
    expected_ranks,
    job_kind,
    launcher_args,
    refine_roles,
    role_and_rank,
)
from hangscope.collect import procfs, tree
from hangscope.errors import FIND_PID_HINT, ProcessNotFound, UsageError
from hangscope.frameworks.torch_distributed import FRAMEWORK as TORCHRUN
from hangscope.model import Job, Process, RankInfo, Role
from hangscope.redact import redact_argv, redact_env
from hangscope.titles import looks_like_python, title_of

#: Two start times closer than this are one process (psutil's create_time() rounding).
SAME_START_S = 0.01


def same_start(pid: int, started: float | None) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``started``."""
    now = procfs.start_time(pid)
    return now is not None and (started is None or abs(now - started) <= SAME_START_S)


def replaced(proc: Process) -> bool:
    """Whether ``proc``'s PID now names another process: its start time is not the one seen."""
    if proc.create_time is None:
        return False
    started = procfs.start_time(proc.pid)  # None: gone or unreadable, reported elsewhere
    return started is not None and abs(started - proc.create_time) > SAME_START_S


def not_sampleable(pid: int, found: procfs.Stat | None) -> tuple[str, str] | None:
    """(kind, reason) for a process py-spy must not touch: stopped, traced, or a zombie.

    ``found``: its ``procfs.read_stat``, read once by the caller."""
    if found is None:
        return None  # py-spy reports what is wrong
    status = found.state  # T stopped, t tracing stop, Z zombie, X dead
    if status == "T":
        return "stopped", (f"stopped (state T: SIGSTOP, Ctrl-Z or a debugger): not sampled, and "
                           f"left stopped; `kill -CONT {pid}` resumes it")
    if status == "t":
        return "stopped", ("held by a debugger or another tracer (state t): not sampled, "
                           "and left as it is")
    if status in ("Z", "X", "x"):
        return "gone", ("a zombie: it has exited and its parent has not reaped it; "
                        "no stacks to sample")
    return None


def is_python(info: tree.Found) -> bool | None:
    """Whether a discovered process runs Python (None: cannot tell, e.g. no privilege)."""
    if looks_like_python(info.cmdline):
        return True
    exe = (info.exe or "").rsplit("/", 1)[-1]
    if exe.startswith("python"):
        return True
    if info.exe is None and not info.cmdline:
        return None
    return False


def assign_spawn_order(procs: list[Process]) -> list[Process]:
    """Number unnamed multiprocessing children of one parent by start time, when 2+ exist;
    and the workers of a torchrun launcher whose environment is unreadable."""
    by_pid = {p.pid: p for p in procs}
    by_parent: dict[int | None, list[Process]] = {}
    for proc in procs:
        if proc.role is Role.OTHER and proc.rank is None and proc.python and (
                "multiprocessing" in (proc.title or "") or _forked_copy(proc, by_pid)
                or _torchrun_worker(proc, by_pid)):
            by_parent.setdefault(proc.ppid, []).append(proc)
    renumbered: dict[int, Process] = {}
    for siblings in by_parent.values():
        if len(siblings) < 2:
            continue
        siblings.sort(key=lambda p: (p.create_time or 0.0, p.pid))
        parent = by_pid.get(siblings[0].ppid) if siblings[0].ppid is not None else None
        one_node = parent is None or _single_node(parent.cmdline)
        for i, proc in enumerate(siblings):
            # torchrun starts local rank 0, 1, ... in order; the global rank is the local one
            # only on one node (on several, the node's rank is the rendezvous's choice).
            rank = (RankInfo(global_rank=i, source="spawn-order") if one_node
                    else RankInfo(local_rank=i, source="spawn-order"))
            renumbered[proc.pid] = replace(proc, role=Role.RANK, rank=rank)
    return [renumbered.get(p.pid, p) for p in procs]


def _torchrun_worker(proc: Process, by_pid: dict[int, Process]) -> bool:
    """A Python child of torchrun whose environment says nothing of its rank: a process title
    (``setproctitle``) longer than its command line overwrote the memory /proc/PID/environ
    reads, so RANK and LOCAL_RANK are gone, but torchrun starts nothing else as its child."""
    parent = by_pid.get(proc.ppid) if proc.ppid is not None else None
    return (parent is not None and job_kind([parent.cmdline]) == TORCHRUN.name
            and not {"RANK", "LOCAL_RANK"} & set(proc.environ or {}))


def _single_node(cmdline: tuple[str, ...]) -> bool:
    """torchrun's ``--standalone`` or ``--nnodes 1`` (also its default)."""
    args = launcher_args(cmdline)
    nnodes = args.get("--nnodes", "1")
    return "--standalone" in args or nnodes in ("1", "1:1")


def _forked_copy(proc: Process, by_pid: dict[int, Process]) -> bool:
    parent = by_pid.get(proc.ppid) if proc.ppid is not None else None
    return parent is not None and bool(proc.cmdline) and parent.cmdline == proc.cmdline


def _comms(pids: Iterable[int]) -> dict[int, str]:
    """``cat /proc/PID/comm`` of each (the thread-name torch gives its DataLoader workers)."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                out[pid] = f.read().strip()
        except OSError:  # gone since the walk: it keeps its role
            continue
    return out


def _walk_new(roots: Iterable[int], known: set[int]) -> list[tree.Found]:
    """The trees below ``roots`` that discovery has not found yet (``known`` grows)."""
    extra: list[tree.Found] = []
    for pid in roots:
        if pid in known:
            continue
        try:
            extra += [f for f in tree.walk(pid) if f.pid not in known]
        except ProcessNotFound:
            continue  # gone since the scan
        known.update(f.pid for f in extra)
    return extra


class Discovery:
    """The job of one target PID, found again on every call (a live view refreshes it).

    Remembers the launcher (and its start time) between calls, and the exe and environment of
    each process (they do not change while it lives).
    """

    def __init__(self, target: int, redact: bool = True) -> None:
        self.target = target
        self.redact = redact
        self.target_started = procfs.start_time(target)
        self.launcher: int | None = None
        self.launcher_started: float | None = None
        self.found: dict[int, tree.Found] = {}  # the last walk, by PID
        self._fixed: tree.Fixed = {}
        self._elsewhere_roots: list[int] | None = None  # ranks of the rendezvous found outside
        self._peer_roots: list[int] | None = None  # the job's processes outside the tree

    def _root(self) -> int:
        root = self.launcher
        if root is not None and same_start(root, self.launcher_started):
            return root
        if not same_start(self.target, self.target_started):
            reused = procfs.start_time(self.target) is not None
            raise ProcessNotFound(
                f"PID {self.target} has exited" + (" and its PID now belongs to another "
                                                   "process" if reused else "") + ".")
        try:
            root = tree.find_root(self.target)
        except psutil.NoSuchProcess:
            raise ProcessNotFound(f"PID {self.target} has exited.") from None
        self.launcher = root
        self.launcher_started = procfs.start_time(root)
        return root

    def _elsewhere(self, found: list[tree.Found]) -> list[tree.Found]:
        """Ranks of the same rendezvous outside the walked tree, when the tree lacks ranks its
        WORLD_SIZE asks for: a rank that lives elsewhere on this host is not missing."""
        envs = [f.environ for f in found if f.environ and "RANK" in f.environ]
        keys = {k for env in envs if (k := tree.job_key(env)) is not None}
        world = {env.get("LOCAL_WORLD_SIZE") or env.get("WORLD_SIZE") for env in envs}
        ranks = {env["RANK"] for env in envs}
        # A zombie child is a rank that exited (its environment is gone): that rank is missing
        # for a reason, and a fork it left behind with its RANK is no rank to take in.
        exited = sum(1 for f in found if f.status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD))
        if len(keys) != 1 or len(world) != 1 or not (size := next(iter(world)) or "").isdigit() \
                or len(ranks) + exited >= int(size):
            return []
        known = {f.pid for f in found}
        if self._elsewhere_roots is None:  # one scan of the host per target; a refresh walks
            self._elsewhere_roots = tree.same_rendezvous(next(iter(keys)), known)
        return _walk_new(self._elsewhere_roots, known)

    def _peers(self, found: list[tree.Found], root: int) -> list[tree.Found]:
        """The job's processes outside the tree: its group, session, pipe and TCP peers.

        A peer with a RANK of the job's rendezvous is left to ``_elsewhere`` (a fork an exited
        rank left behind keeps its RANK and its group: it is no rank to take in)."""
        known = {f.pid for f in found}
        keys = {k for f in found if f.environ and (k := tree.job_key(f.environ)) is not None}
        if self._peer_roots is None:  # one scan of the host per target; a refresh walks
            roots: dict[int, None] = {}
            for pid in tree.job_peers(sorted(known), root):
                env = procfs.read_environ(pid) or {}
                if ("RANK" in env or "LOCAL_RANK" in env) and tree.job_key(env) in keys:
                    continue
                try:  # a peer's own job climbs to its launcher (a server's parent script)
                    roots[tree.find_root(pid)] = None
                except psutil.Error:
                    continue
            self._peer_roots = list(roots)
        return _walk_new(self._peer_roots, known)

    def discover(self) -> tuple[Job, list[Process]]:
        """Find the job's processes and name their roles and ranks."""
        root = self._root()
        found = tree.walk(root, fixed=self._fixed)
        found += self._elsewhere(found)
        # A job with no Python process (`hangscope dump $$`, `sleep`) is refused as it is
        # (check_python_job): its group, session and pipe peers would make it another job.
        if any(is_python(f) is not False or procfs.maps_libpython(f.pid) is not False
               for f in found):
            found += self._peers(found, root)
        self.found = {info.pid: info for info in found}
        host = socket.gethostname()
        procs = []
        for info in found:
            role, rank = role_and_rank(info.cmdline, info.environ, info.pid == root,
                                       bool(info.children))
            env = info.environ or {}
            cmdline = tuple(redact_argv(list(info.cmdline))) if self.redact else info.cmdline
            procs.append(Process(
                pid=info.pid, ppid=info.ppid, host=host, role=role, rank=rank,
                title=title_of(cmdline), cmdline=cmdline, exe=info.exe,
                create_time=info.create_time, state=None, children=info.children,
                environ=redact_env(env) if self.redact else dict(env),
                python=is_python(info),
            ))
        procs = assign_spawn_order(procs)
        # Data-loader workers (comm pt_data_worker) and a root whose children are all helpers
        # (then it is main, not a launcher). One small read per process but the root.
        procs = refine_roles(procs, _comms(p.pid for p in procs if p.pid != root))
        root_proc = next((p for p in procs if p.pid == root), None)
        args = launcher_args(root_proc.cmdline if root_proc else ())
        kind = job_kind([p.cmdline for p in procs])
        expected, source = expected_ranks(args, [p.environ for p in procs if p.role is Role.RANK],
                                          kind)
        job = Job(launcher=root if root_proc and root_proc.role is Role.LAUNCHER else None,
                  target=self.target, kind=kind, expected_ranks=expected,
                  expected_source=source, args=args)
        return job, procs


def check_python_job(target: int, procs: list[Process]) -> None:
    """Refuse, up front, a job in which no process runs Python: ``hangscope dump $$`` from a
    shell (hangscope and its py-spy runs are never part of a job, so nothing is left), or the
    PID of ``sleep``. An interpreter embedded in another program still counts (libpython).

    Raises:
        UsageError: no process of the job runs Python.
    """
    if any(p.python is not False or procfs.maps_libpython(p.pid) is not False for p in procs):
        return
    stat = procfs.read_stat(target)
    name = f"PID {target} ({stat.comm})" if stat is not None else f"PID {target}"
    fix = f"Give the PID of the job's launcher or of one of its ranks: {FIND_PID_HINT}."
    if target in procfs.ancestors(os.getpid()):
        raise UsageError(f"{name} is the shell hangscope runs in: leaving out hangscope itself "
                         "and the py-spy it runs, no Python process is left to diagnose.",
                         help_text=fix)
    parent = stat.ppid if stat is not None else None
    if parent and (looks_like_python(procfs.read_cmdline(parent))
                   or procfs.maps_libpython(parent)):
        fix = (f"Its parent, PID {parent}, runs Python: `hangscope dump {parent}` diagnoses "
               f"that job. Else: {fix[0].lower()}{fix[1:]}")
    raise UsageError(f"{name} is not a Python process, and no process of its job (it and its "
                     "children) runs Python: hangscope reads Python stacks.", help_text=fix)
