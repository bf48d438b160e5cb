"""Two processes load one torch C++ extension (torch.utils.cpp_extension.load_inline) into one
build directory, as ranks of a job do with DeepSpeed's ops or a custom kernel.

    python build_lock.py MODE READY BUILD_DIR

torch guards the build with a FileBaton: the first process creates BUILD_DIR/lock (O_EXCL),
builds, and removes the file; every other one polls, sleeping 0.1 s, until the file is gone.

- ``stale``: a build killed halfway (an OOM kill, a cancelled job) left BUILD_DIR/lock behind
  (pytorch#189245): both processes poll for it forever, and nothing builds.
- ``building``: no lock is left; the first process builds for real (ninja, c++), the other
  waits for it: a compile in progress, not a hang.

Each process appends ``"<pid> loader<N>"`` to READY before it loads.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

SOURCE = "int answer() { return 42; }"


def load(index: int, ready: str, build: str) -> None:
    from torch.utils import cpp_extension

    if index == 1:  # the second comes once the first holds the baton (or finds it taken)
        while not os.path.exists(os.path.join(build, "lock")):
            time.sleep(0.05)
    with open(ready, "a") as f:
        f.write(f"{os.getpid()} loader{index}\n")
    cpp_extension.load_inline(name="hangscope_answer", cpp_sources=SOURCE,
                              functions=["answer"], build_directory=build)
    time.sleep(3600)  # built and loaded: the test kills the job first


def main() -> None:
    mode, ready, build = sys.argv[1:4]
    os.makedirs(build, exist_ok=True)
    if mode == "stale":
        open(os.path.join(build, "lock"), "w").close()  # what the killed build left
    ctx = mp.get_context("spawn")
    loaders = [ctx.Process(target=load, args=(i, ready, build), name=f"loader{i}")
               for i in range(2)]
    for loader in loaders:
        loader.start()
    for loader in loaders:
        loader.join()


if __name__ == "__main__":
    main()
