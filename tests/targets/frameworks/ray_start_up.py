"""A Ray driver that waits on an actor still starting up, run as ``python ray_start_up.py MODE
READY_FILE WORKDIR``.

The actor's class lives in this module, imported by name (the driver puts this directory on
``PYTHONPATH``, which Ray's workers inherit): a worker Ray starts for the actor imports the
module to load the class, before Ray retitles it ``ray::Model``. Until then it is ``python
.../default_worker.py --raylet-name=.../sockets/raylet ...``: a worker in its start-up. A real
actor's start-up imports torch or transformers, tens of seconds on a busy node (ray#13511,
"Actor creation is slow"). Modes:

- ``import_slow``  the module computes a table at import for an hour, line after line (its
                   import does real work); the driver waits for the actor's first answer
                   (healthy: progressing).
- ``site_slow``    the same work in the workers' ``sitecustomize`` (a site-wide start-up hook,
                   as tracers install one), which Python imports before Ray's own: the
                   workers compute before Ray ever retitles them (healthy: progressing).
- ``import_locked`` the driver holds an exclusive ``flock`` on the model cache's lock file
                   while it waits for the actor's first answer; the module's import takes the
                   same lock before it reads the cache (the driver's lock and the worker's
                   start-up wait for each other; hung).

The worker appends ``"<pid> worker"`` to READY_FILE as its import begins, the driver
``"<pid> driver"`` once it has asked the actor (``site_slow``: as it calls ``ray.init``, whose
connect waits for the workers the raylet starts).
"""

from __future__ import annotations

import fcntl
import os
import sys
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _table(rows: int) -> list[int]:
    """A vocabulary's merge table, built row by row (a slow import's real work)."""
    out = []
    for row in range(rows):
        value = row * 2654435761 % 4294967296
        out.append(value ^ (value >> 13))
    return out


def _warm_up() -> None:
    """The module's import in the actor's worker: compute, or wait for the cache's lock."""
    mode, ready_file, workdir = os.environ["START_UP_JOB"].split("|")
    ready(ready_file, "worker")
    if mode == "import_locked":
        with open(os.path.join(workdir, "cache.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # held by the driver, which waits on this actor
        return
    end = time.monotonic() + 3600
    while time.monotonic() < end:
        _table(20000)


if __name__ != "__main__" and "default_worker" in os.path.basename(sys.argv[0]):
    _warm_up()


class Model:
    def ping(self) -> int:
        return os.getpid()


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH")) if p)
    os.environ["START_UP_JOB"] = f"{mode}|{ready_file}|{workdir}"
    if mode == "site_slow":
        site = os.path.join(workdir, "site")
        os.makedirs(site, exist_ok=True)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write("import ray_start_up  # computes in Ray's workers only\n")
        os.environ["PYTHONPATH"] += os.pathsep + site
        ready(ready_file, "driver")  # ray.init's connect waits for the workers Ray starts
    sys.path.insert(0, here)
    import ray
    import ray_start_up  # by name: Ray's worker imports this module to load the class

    ray.init(num_cpus=2, include_dashboard=False)
    model = ray.remote(ray_start_up.Model).remote()
    with open(os.path.join(workdir, "cache.lock"), "w") as lock:
        if mode == "import_locked":
            fcntl.flock(lock, fcntl.LOCK_EX)  # the cache is "being filled" by the driver
        ref = model.ping.remote()
        if mode != "site_slow":
            ready(ready_file, "driver")
        print("actor", ray.get(ref), flush=True)  # never returns in either mode
        time.sleep(3600)


if __name__ == "__main__":
    main()
