"""Find a job's process on this node from a spec: what ``hangscope dump --find SPEC`` runs.

Like ``pgrep -f REGEX`` / ``grep -z KEY=VALUE /proc/*/environ``: the remote side of a
multi-node dump knows the job by something every node shares (torchrun's rendezvous id, the
Slurm job id, the master port, a process title), never by a PID, which differs per node.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hangscope.collect import procfs
from hangscope.errors import ProcessNotFound, UsageError

#: Environment keys that name one job on every node, most specific first.
JOB_KEYS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "MASTER_PORT")
#: Environment keys that name the job's nodes (a rank's view of its allocation).
NODELIST_KEYS = ("SLURM_JOB_NODELIST", "SLURM_NODELIST")


@dataclass(frozen=True)
class Spec:
    """``env:KEY=VALUE`` or ``name:REGEX``."""

    kind: str  # env | name
    key: str
    value: str

    def __str__(self) -> str:
        return f"env:{self.key}={self.value}" if self.kind == "env" else f"name:{self.value}"


def parse_spec(text: str) -> Spec:
    """``env:TORCHELASTIC_RUN_ID=abc``, ``KEY=VALUE`` (env implied) or ``name:REGEX``.

    Raises:
        UsageError: neither form, or a regex that does not compile.
    """
    kind, sep, rest = text.partition(":")
    if sep and kind == "name":
        try:
            re.compile(rest)
        except re.error as exc:
            raise UsageError(f"--find {text!r}: not a regular expression ({exc}).") from None
        return Spec("name", "", rest)
    body = rest if sep and kind == "env" else text
    key, eq, value = body.partition("=")
    if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise UsageError(f"--find {text!r}: write env:KEY=VALUE (e.g. "
                         "env:TORCHELASTIC_RUN_ID=myjob) or name:REGEX (e.g. name:sglang::).")
    return Spec("env", key, value)


def _environ_has(pid: int, key: str, value: str) -> bool:
    env = procfs.read_environ(pid, (key,))
    return bool(env) and env.get(key) == value


def _is_hangscope(pid: int) -> bool:
    """A hangscope of its own (a watch started before the job, a node's watcher, a dump):
    it carries the job's SLURM_JOB_ID too, and would be found first by its lower PID."""
    argv = procfs.read_cmdline(pid) or ()
    head = [os.path.basename(a) for a in argv[:3]]
    return ("hangscope" in head or "hangscope.pyz" in head
            or list(argv[1:3]) == ["-m", "hangscope"])


def find_pids(spec: Spec) -> list[int]:
    """Every process of this node (this PID namespace) that matches, lowest PID first;
    never hangscope's own."""
    me = os.getpid()
    pattern = re.compile(spec.value) if spec.kind == "name" else None
    found = []
    for pid in procfs.pids():
        if pid in (me, os.getppid()) or _is_hangscope(pid):
            continue
        if pattern is not None:
            if pattern.search(" ".join(procfs.read_cmdline(pid))):
                found.append(pid)
        elif _environ_has(pid, spec.key, spec.value):
            found.append(pid)
    return sorted(found)


def _is_python(pid: int) -> bool:
    """A Python interpreter, not the shell or srun step around the job that shares its env."""
    exe = os.path.basename(procfs.read_exe(pid) or "")
    argv0 = os.path.basename((procfs.read_cmdline(pid) or ("",))[0])
    return exe.startswith("python") or argv0.startswith("python")


def find_job_pid(spec: Spec) -> int:
    """One process of the job on this node, a Python one first (discovery climbs from it to
    the launcher).

    Raises:
        ProcessNotFound: nothing on this node matches the spec.
    """
    pids = sorted(find_pids(spec), key=lambda p: (not _is_python(p), p))
    if not pids:
        raise ProcessNotFound(f"No process on this node matches --find {spec}.",
                              "Check the spec against `tr '\\0' '\\n' < /proc/PID/environ` of "
                              "a rank, or give name:REGEX matching its command line.")
    return pids[0]


def find_python_pid(spec: Spec) -> int | None:
    """The job's first Python process on this node, or None while it has none (a watcher
    started before the job: a batch script's shell already carries SLURM_JOB_ID)."""
    return next((p for p in find_pids(spec) if _is_python(p)), None)


def _family(pid: int) -> list[int]:
    """The PID, its children, then theirs: where a rank's environment is (launchers lack it)."""
    out, todo = [], [pid]
    while todo and len(out) < 256:
        current = todo.pop(0)
        out.append(current)
        todo.extend(procfs.read_children(current))
    return out


def spec_for(pid: int) -> Spec | None:
    """The spec that finds the job of local ``pid`` on the other nodes, if its env names one."""
    envs = [procfs.read_environ(p, JOB_KEYS) or {} for p in _family(pid)]
    for key in JOB_KEYS:
        for env in envs:
            if env.get(key):
                return Spec("env", key, env[key])
    return None


def nodes_from_environment(pid: int) -> tuple[str | None, str]:
    """The job's node set as its ranks see it, and where it came from ("" when unknown).

    SLURM_JOB_NODELIST names every node; torchrun's rendezvous endpoint names only the host of
    the rendezvous (MASTER_ADDR), which says that the job spans nodes but not which.
    """
    for p in _family(pid):
        env = procfs.read_environ(p, NODELIST_KEYS) or {}
        for key in NODELIST_KEYS:
            if env.get(key):
                return env[key], f"{key} of PID {p}"
    return None, ""
