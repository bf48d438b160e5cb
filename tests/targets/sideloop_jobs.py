"""A gateway whose main event loop blocks on a coroutine it sent to a side loop.

    python sideloop_jobs.py MODE READY_FILE WORKDIR

A ``gateway`` process runs its main asyncio loop and an ``auth-loop`` thread running a second
loop. A startup coroutine on the main loop asks the side loop for a token with
``run_coroutine_threadsafe(...).result()`` (a synchronous wait inside a coroutine); the side
loop's coroutine waits for the config the main loop publishes after startup, through
``call_soon_threadsafe``. Each process appends ``"<pid> <tag>"`` to READY_FILE when it is
where it stays. Mode ``blocked``: the main loop waits for the side loop, which waits for the
main loop (griptape-nodes-style cross-loop dispatch): hung.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class Gateway:
    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file
        self.side = asyncio.new_event_loop()
        self.config_ready: asyncio.Event | None = None
        started = threading.Event()

        def run_side() -> None:
            asyncio.set_event_loop(self.side)
            self.config_ready = asyncio.Event()
            self.side.call_soon(started.set)
            self.side.run_forever()

        threading.Thread(target=run_side, name="auth-loop", daemon=True).start()
        started.wait()

    async def fetch_token(self) -> str:
        assert self.config_ready is not None
        await self.config_ready.wait()  # published by the main loop after startup
        return "token"

    async def startup(self) -> None:
        future = asyncio.run_coroutine_threadsafe(self.fetch_token(), self.side)
        ready(self.ready_file, "gateway")
        future.result()  # the main loop blocks here: the publish below never runs
        assert self.config_ready is not None
        self.side.call_soon_threadsafe(self.config_ready.set)


def main() -> None:
    setproctitle.setproctitle("gateway")
    asyncio.run(Gateway(sys.argv[2]).startup())


if __name__ == "__main__":
    main()
