"""A server whose own ``select.poll()`` loop waits for clients and for its workers' answers.

    python poll_server_jobs.py MODE READY_FILE WORKDIR

A ``metrics-relay`` process listens on a TCP port and polls, with no timeout, its listening
socket and one socketpair per ``relay-worker`` child; each worker reads its socketpair with
``for line in conn_file:`` and answers every line. No client connects. Each process appends
``"<pid> <tag>"`` to READY_FILE when it is where it stays. Mode ``idle``: nothing else
happens, a healthy idle server (no framework loop on the stack: the program wrote its own).
"""

from __future__ import annotations

import os
import select
import socket
import sys

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def worker(conn: socket.socket, ready_file: str) -> None:
    setproctitle.setproctitle("relay-worker")
    ready(ready_file, "worker")
    for line in conn.makefile("rb"):
        conn.sendall(b"ok " + line)


def main() -> None:
    ready_file = sys.argv[2]
    setproctitle.setproctitle("metrics-relay")
    ends = []
    for _ in range(2):
        mine, theirs = socket.socketpair()
        if os.fork() == 0:
            mine.close()
            worker(theirs, ready_file)
            os._exit(0)
        theirs.close()
        ends.append(mine)
    server = socket.create_server(("127.0.0.1", 0))
    poller = select.poll()
    for sock in (server, *ends):
        poller.register(sock, select.POLLIN)
    by_fd = {s.fileno(): s for s in ends}
    ready(ready_file, "relay")
    while True:
        for fd, _ in poller.poll():
            if fd == server.fileno():
                client, _ = server.accept()
                ends[0].sendall(client.recv(4096) or b"\n")
                client.close()
            else:
                by_fd[fd].recv(4096)


if __name__ == "__main__":
    main()
