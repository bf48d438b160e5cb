"""A root that works is no launcher; a job outside torch.distributed has no collectives.

Pure rules over sampled (classified) processes, run by ``analyze()`` after classification:
roles.py names roles from titles and the environment before anything is sampled; these need
the stacks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.evidence.roles import in_distributed
from hangscope.model import Process, Role

# -- a root that works is no launcher ------------------------------------------------------
#: Frames of a process that waits on its children: that is what launching is (torchrun's
#: agent loop, mp.spawn's join, Popen.wait, Process.join, waitpid).
_CHILD_WAIT = re.compile(
    r"\((?:[^)]*/)?(?:subprocess\.py|multiprocessing/(?:process|popen_\w+)\.py|"
    r"torch/multiprocessing/spawn\.py|torch/distributed/(?:elastic/|run\.py|launch\.py))\)|"
    r"^(?:\S+\.)?(?:waitpid|wait4|waitid|__wait4|os_waitpid(?:_impl)?)\b")


def waits_on_children(proc: Process) -> bool:
    """Its working thread (main, for a launcher) waits for a child or runs a launcher's loop."""
    thread = next((t for t in proc.threads if t.tid == proc.pid), None) or proc.working_thread
    if thread is None:
        return False
    return any(_CHILD_WAIT.search(f"{f.name} ({f.file})" if f.file else f.name)
               for f in thread.frames)


def working_roots(procs: Sequence[Process]) -> tuple[Process, ...]:
    """A Python root called launcher only because it has children, in a job without ranks,
    whose main thread does not wait on them (it serves, polls a socket, waits for results,
    computes) is part of the work: judged like its children (role other: the subjects are then
    every Python process of the job, model.subjects_of), and a possible suspect."""
    if any(p.role is Role.RANK for p in procs):
        return tuple(procs)
    changed = {p.key: replace(p, role=Role.OTHER) for p in procs
               if p.role is Role.LAUNCHER and p.python and p.threads
               and any(t.frames for t in p.threads) and not waits_on_children(p)}
    if not changed:
        return tuple(procs)
    return tuple(changed.get(p.key, p) for p in procs)


#: Environment a torch.distributed launcher gives its ranks.
_DISTRIBUTED_ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")


def job_in_distributed(procs: Sequence[Process]) -> bool:
    """Some process of the job takes part in torch.distributed (its stacks or threads), or was
    started as a rank of it (its environment): else a report has no collectives to speak of."""
    return any(in_distributed(p) or any(k in p.environ for k in _DISTRIBUTED_ENV)
               for p in procs)
