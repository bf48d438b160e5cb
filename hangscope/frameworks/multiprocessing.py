"""Python's multiprocessing: spawned children (``multiprocessing.spawn``,
``--multiprocessing-fork``), the forkserver, and the resource tracker every spawn/forkserver
job starts (a helper, never a suspect)."""

from __future__ import annotations

from hangscope.frameworks import Framework
from hangscope.model import Role

#: A child started by spawn or the forkserver, by its command line.
SPAWNED = ("multiprocessing.spawn", "--multiprocessing-fork", "multiprocessing.forkserver")

FRAMEWORK = Framework(
    name="mp",
    job_words=("multiprocessing",),
    helper_processes=(("resource_tracker", Role.RESOURCE_TRACKER),),
)
