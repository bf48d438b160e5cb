"""A server whose reader thread dispatches requests to worker threads that deadlock.

    python dispatch_jobs.py MODE READY_FILE WORKDIR

A ``session-store`` process reads requests from a client's socketpair in a ``reader``
thread (``for line in conn_file:``) and hands each to a ``queue.Queue``; two ``apply-N``
worker threads take them. A ``session-client`` child sends two requests and waits for the
reply. Each process appends ``"<pid> <tag>"`` to READY_FILE when it is where it stays. Mode
``abba``: one worker takes the index lock then the journal lock, the other the journal lock
then the index lock (a Barrier between makes it certain): the workers deadlock, the reader
waits at the head of its loop for the next request, the client for its reply. The cause is
the lock-order inversion, not the two ends of the socket both reading.
"""

from __future__ import annotations

import os
import queue
import socket
import sys
import threading

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def client(conn: socket.socket, ready_file: str) -> None:
    setproctitle.setproctitle("session-client")
    conn.sendall(b"put a\nput b\n")
    ready(ready_file, "client")
    conn.recv(64)


class Store:
    def __init__(self, conn: socket.socket, ready_file: str) -> None:
        self.conn, self.ready_file = conn, ready_file
        self.index_lock, self.journal_lock = threading.Lock(), threading.Lock()
        self.both_hold = threading.Barrier(2)
        self.requests: queue.Queue[bytes] = queue.Queue()

    def reader(self) -> None:
        for line in self.conn.makefile("rb"):
            self.requests.put(line)

    def apply(self, first: threading.Lock, second: threading.Lock) -> None:
        request = self.requests.get()
        with first:
            self.both_hold.wait()
            ready(self.ready_file, "store")
            with second:
                self.conn.sendall(b"ok " + request)


def main() -> None:
    ready_file = sys.argv[2]
    mine, theirs = socket.socketpair()
    if os.fork() == 0:
        mine.close()
        client(theirs, ready_file)
        os._exit(0)
    theirs.close()
    setproctitle.setproctitle("session-store")
    store = Store(mine, ready_file)
    workers = [threading.Thread(target=store.apply, args=(store.index_lock, store.journal_lock),
                                name="apply-0"),
               threading.Thread(target=store.apply, args=(store.journal_lock, store.index_lock),
                                name="apply-1")]
    for worker in workers:
        worker.start()
    threading.Thread(target=store.reader, name="reader", daemon=True).start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main()
