"""A ProcessPoolExecutor done-callback that waits on another future of the same executor.

    python callback_jobs.py MODE READY_FILE WORKDIR

A ``render-farm`` process submits frames to a ``ProcessPoolExecutor`` of two workers; the
done-callback of each frame submits its thumbnail to the same executor and waits for it
(``.result()``). Done-callbacks run on the executor's management thread, the one thread that
moves results from the workers into their futures. Each process appends ``"<pid> <tag>"`` to
READY_FILE when it is where it stays. Mode ``blocked``: the thumbnail is computed but never
delivered; the main thread waits for every frame (fedlearner#249).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import sys
import time

import setproctitle

READY = sys.argv[2] if len(sys.argv) > 2 else ""


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def render(frame: int, go: str) -> int:
    while not os.path.exists(go):  # every callback is registered first: none runs on main
        time.sleep(0.01)
    return frame * 2


def thumbnail(pixels: int) -> int:
    return pixels // 4


class Farm:
    def __init__(self) -> None:
        self.pool = cf.ProcessPoolExecutor(2, mp_context=mp.get_context("fork"))

    def on_frame(self, done: cf.Future) -> None:
        ready("farm")
        self.pool.submit(thumbnail, done.result()).result()  # the bug: waits on its own pool


def main() -> None:
    setproctitle.setproctitle("render-farm")
    farm = Farm()
    go = os.path.join(sys.argv[3], "go")
    frames = [farm.pool.submit(render, n, go) for n in range(4)]
    for frame in frames:
        frame.add_done_callback(farm.on_frame)
    open(go, "w").close()
    cf.wait(frames)


if __name__ == "__main__":
    main()
