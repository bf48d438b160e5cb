"""One call per snapshot for the collective evidence: NCCL RAS and the Flight Recorder, in parallel.

``ncclras -v -f json`` and ``echo 1 > $TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe`` at once,
each bounded by its own deadline, so a snapshot waits for the slower of the two, never the sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

from hangscope.collect import flightrec, procfs, ras
from hangscope.model import Process, Socket
from hangscope.model import nccl as ev


def collect(processes: Sequence[Process], host_ports: Iterable[int] = (),
            job_start: float | None = None, trigger_fr: bool = True,
            ras_deadline_s: float = ras.DEADLINE_S,
            fr_deadline_s: float = flightrec.DEADLINE_S) -> tuple[ev.RasReading, ev.FrReading]:
    """(RAS reading, Flight Recorder reading) for the job; ``trigger_fr`` writes dump files for
    the job where its ranks have a debug-info pipe (off: only dumps already on disk are read)."""
    ports = tuple(host_ports)
    with ThreadPoolExecutor(2, thread_name_prefix="hangscope-collectives") as pool:
        ras_job = pool.submit(ras.read, processes, ports, ras_deadline_s)
        fr_job = pool.submit(flightrec.read, processes, job_start, trigger_fr, fr_deadline_s)
        return _or_note(ras_job, "NCCL RAS"), _or_note(fr_job, "Flight Recorder")


def _or_note(job: Future, what: str) -> Any:
    """The reading; a bug in a collector becomes a note, not a traceback in the report."""
    try:
        return job.result()
    except Exception as exc:  # the rest of the snapshot must still come out
        note = (f"{what}: not read (internal error {type(exc).__name__}: {exc}; please report "
                "it).")
        if what == "NCCL RAS":
            return ev.RasReading(ev.GARBAGE, note)
        return ev.FrReading(ev.REFUSED_FILE, note)


def start(processes: Sequence[Process], infos: Mapping[int, procfs.ProcInfo],
          listening: dict[int, Socket], job_start: float | None,
          trigger_fr: bool) -> Future[tuple[ev.RasReading, ev.FrReading]]:
    """:func:`collect` on a thread of its own, from what the sampler's first round read (each
    process's state and listening sockets), so that it runs while the later rounds sample."""
    seen = []
    for proc in processes:
        info = infos.get(proc.pid)
        if info is None:
            seen.append(proc)
            continue
        socks = tuple(listening[i] for i in sorted(info.socket_inodes) if i in listening)
        seen.append(replace(proc, state=info.state if info.exists else "gone", listening=socks))
    pool = ThreadPoolExecutor(1, thread_name_prefix="hangscope-collectives-start")
    job = pool.submit(collect, seen, {s.port for s in listening.values() if s.port},
                      job_start, trigger_fr)
    pool.shutdown(wait=False)  # the thread ends with the job; the sampler waits on the future
    return job


#: The most a snapshot waits for :func:`start`'s answer: both deadlines run in parallel; the
#: margin covers reading the files that arrived. Past it, a note (a collector bug, not a wait).
WAIT_S = max(ras.DEADLINE_S, flightrec.DEADLINE_S) + 2.0


def finish(job: Future[tuple[ev.RasReading, ev.FrReading]],
           wait_s: float = WAIT_S) -> tuple[ev.RasReading, ev.FrReading]:
    """The readings :func:`start` began; never waits past ``wait_s``, never raises."""
    try:
        return job.result(timeout=wait_s)
    except FutureTimeout:
        note = (f"not read: the collector did not finish within {wait_s:.1f} s (a bug: please "
                "report it); the rest of the snapshot is complete.")
        return (ev.RasReading(ev.TIMEOUT, f"NCCL RAS: {note}"),
                ev.FrReading(ev.TIMEOUT, f"Flight Recorder: {note}"))
