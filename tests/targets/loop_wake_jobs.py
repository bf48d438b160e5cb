"""Real asyncio jobs whose reply-reader thread completes the loop's futures itself.

    python loop_wake_jobs.py MODE READY_FILE

A ``rollout-client`` process runs an asyncio loop; its coroutine sends a request to a
``policy-server`` child over a socketpair and awaits a future the loop made
(``loop.create_future()``). A ``reply-reader`` thread reads the replies with a blocking
``recv`` and completes the future. Each process appends ``"<pid> <tag>"`` to READY_FILE when
it is where it stays. Modes (cpython#97970: an asyncio object completed from another thread
never wakes a loop asleep without a timer):

- ``lost``   the reader calls ``fut.set_result(reply)`` directly: the future is done, its
             callback is scheduled with the loop's non-thread-safe ``call_soon``, and the
             loop, asleep in ``epoll_wait`` on nothing but its self-pipe, never runs it. The
             server waits until the client's loop is asleep before it replies, so the lost
             wake-up is certain, not a race.
- ``serve``  the same latent bug in a client that also serves: its loop listens on a TCP port
             for requests nobody sends, so it is idle (healthy), not hung.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import sys
import threading
import time
from pathlib import Path

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _loop_asleep(pid: int) -> bool:
    """The client's main thread (its loop) sleeps in epoll_wait."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip() in ("ep_poll", "do_epoll_wait")
    except OSError:
        return False


def policy_server(conn: socket.socket, client: int, ready_file: str) -> None:
    setproctitle.setproctitle("policy-server")
    while True:
        request = conn.recv(65536)
        if not request:
            return
        deadline = time.monotonic() + 30
        while not _loop_asleep(client) and time.monotonic() < deadline:
            time.sleep(0.01)
        conn.sendall(pickle.dumps({"actions": [1, 2, 3], "for": pickle.loads(request)}))
        ready(ready_file, "server")


class PolicyClient:
    def __init__(self, conn: socket.socket, ready_file: str) -> None:
        self.conn = conn
        self.ready_file = ready_file
        self.loop = asyncio.get_running_loop()
        self.pending: dict[int, asyncio.Future] = {}
        threading.Thread(target=self.read_replies, name="reply-reader", daemon=True).start()

    def read_replies(self) -> None:
        while True:
            reply = pickle.loads(self.conn.recv(65536))
            fut = self.pending.pop(reply["for"])
            fut.set_result(reply)  # the bug: from this thread, not call_soon_threadsafe
            ready(self.ready_file, "reader")

    async def act(self, step: int) -> dict:
        fut = self.loop.create_future()
        self.pending[step] = fut
        self.conn.sendall(pickle.dumps(step))
        return await fut


async def rollout(mode: str, conn: socket.socket, ready_file: str) -> None:
    client = PolicyClient(conn, ready_file)
    if mode == "serve":
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        ready(ready_file, "client")
        async with server:
            await server.serve_forever()
    ready(ready_file, "client")
    for step in range(10):
        await client.act(step)


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    mine, theirs = socket.socketpair()
    client = os.getpid()
    if os.fork() == 0:
        mine.close()
        policy_server(theirs, client, ready_file)
        os._exit(0)
    theirs.close()
    setproctitle.setproctitle("rollout-client")
    asyncio.run(rollout(mode, mine, ready_file))


if __name__ == "__main__":
    main()
