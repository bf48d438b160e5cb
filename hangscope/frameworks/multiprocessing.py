"""Python's multiprocessing: spawned children (``multiprocessing.spawn``,
``--multiprocessing-fork``), the forkserver, and the resource tracker every spawn/forkserver
job starts (a helper, never a suspect)."""

from __future__ import annotations

from hangscope.frameworks import Framework
from hangscope.model import Role

#: A child started by spawn or the forkserver, by its command line.
SPAWNED = ("multiprocessing.spawn", "--multiprocessing-fork", "multiprocessing.forkserver")
#: (function, file) of the frame where a spawned or forkserver child runs its parent's main
#: module again, as ``__mp_main__``: the script's top level, unless under a main guard.
RERUNS_MAIN = ("_fixup_main_from_path", "multiprocessing/spawn.py")

FRAMEWORK = Framework(
    name="mp",
    job_words=("multiprocessing",),
    helper_processes=(("resource_tracker", Role.RESOURCE_TRACKER),),
)
