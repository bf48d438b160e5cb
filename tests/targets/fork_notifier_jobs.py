"""Real jobs that fork after an object started its own thread (a telemetry client's sender).

    python fork_notifier_jobs.py MODE READY_FILE WORKDIR

The ``telemetry-host`` process makes a ``Telemetry`` client, whose ``_drain`` thread sends
queued records and sets an Event once the queue is empty; then it forks two ``exporter``
children with ``os.fork()`` and waits for them (``os.waitpid``). Each child queues records and
calls ``flush()``, which waits on that Event. Each process appends ``"<pid> <tag>"`` to
READY_FILE when it is where it stays. Modes:

- ``stranded``  the children use the client as fork copied it: its queue and Event, but not
                its thread (fork copies only the calling thread): ``flush()`` waits for ever
                (hung; the thread that would set the Event runs in the parent only).
- ``loop``      a ``Fetcher`` that runs its coroutines on an asyncio loop in a thread of
                its own (``asyncio.run_coroutine_threadsafe(...).result()``); forked, each
                child's fetch waits for ever on a Future that only the parent's loop thread
                would complete (datachain#691: a dataset's event loop and DataLoader's fork;
                blind round 22's 05).
- ``restarted`` the client starts its thread again in each child
                with a fresh queue and event (``os.register_at_fork(after_in_child=...)``):
                every flush returns, and the
                children flush once a second (healthy).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class Telemetry:
    def __init__(self) -> None:
        self.sent = 0
        self.start()

    def start(self) -> None:
        """A fresh queue, event and sender (in a child too: the copied queue's waiters are the
        parent's threads, which a put() in the child would try to wake)."""
        self.pending: queue.Queue[str] = queue.Queue()
        self.empty = threading.Event()
        self._spawn()

    def _spawn(self) -> None:
        self.sender = threading.Thread(target=self._drain, name="telemetry-sender", daemon=True)
        self.sender.start()

    def _drain(self) -> None:
        while True:
            self.pending.get()
            self.sent += 1
            if self.pending.empty():
                self.empty.set()

    def record(self, line: str) -> None:
        self.empty.clear()
        self.pending.put(line)

    def flush(self) -> None:
        self.empty.wait()


def parked(thread: threading.Thread) -> None:
    """Until the thread sleeps in the kernel (in its queue's wait, the queue's lock released):
    a fork while it holds that lock would strand the lock, not the thread, in the child."""
    while True:
        with open(f"/proc/self/task/{thread.native_id}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                return
        time.sleep(0.01)


class Fetcher:
    """Fetches through coroutines on its own event loop, run by a thread it starts."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.runner = threading.Thread(target=self.loop.run_forever, name="fetch-loop",
                                       daemon=True)
        self.runner.start()

    async def _get(self, key: int) -> int:
        return key * 2

    def get(self, key: int) -> int:
        import asyncio

        return asyncio.run_coroutine_threadsafe(self._get(key), self.loop).result()


def fetchers(ready_file: str) -> None:
    fetcher = Fetcher()
    fetcher.get(1)  # the loop runs: this process's fetches return
    parked(fetcher.runner)
    kids = []
    for index in range(2):
        pid = os.fork()
        if pid == 0:
            setproctitle.setproctitle(f"fetch-worker[{index}]")
            ready(ready_file, f"child{index}")
            fetcher.get(index)  # the loop was copied, its thread was not
            os._exit(0)
        kids.append(pid)
    ready(ready_file, "parent")
    for pid in kids:
        os.waitpid(pid, 0)


def exporter(client: Telemetry, index: int, ready_file: str, again: bool) -> None:
    setproctitle.setproctitle(f"exporter[{index}]")
    client.record(f"exporter {index} up")
    if again:
        client.flush()
        ready(ready_file, f"child{index}")
        while True:
            client.record("tick")
            client.flush()
            time.sleep(1.0)
    ready(ready_file, f"child{index}")
    client.flush()


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    if mode == "loop":
        setproctitle.setproctitle("fetch-host")
        fetchers(ready_file)
        return
    setproctitle.setproctitle("telemetry-host")
    client = Telemetry()
    client.record("host up")
    client.flush()
    parked(client.sender)
    again = mode == "restarted"
    if again:
        os.register_at_fork(after_in_child=client.start)
    kids = []
    for index in range(2):
        pid = os.fork()
        if pid == 0:
            exporter(client, index, ready_file, again)
            os._exit(0)
        kids.append(pid)
    ready(ready_file, "parent")
    for pid in kids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
