"""The kernel's per-connection facts of a TCP socket: both ends, the bytes unread in its
receive queue, and how long ago data last left and came (sock_diag's INET_DIAG_INFO, the
``tcp_info`` that ``ss -tni`` prints as lastsnd/lastrcv), read of real sockets here."""

from __future__ import annotations

import os
import socket
import time

from hangscope.collect.procfs import read_tcp_connections


def _inode(sock: socket.socket) -> int:
    return os.fstat(sock.fileno()).st_ino


def test_who_spoke_last_and_what_is_unread_come_from_the_kernel() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            client.sendall(b"x" * 100)  # the request
            deadline = time.monotonic() + 5
            while not accepted.recv(50, socket.MSG_PEEK) and time.monotonic() < deadline:
                pass
            accepted.recv(50)  # half of it read
            time.sleep(0.3)  # the two moments apart by more than a tick
            accepted.sendall(b"y" * 10)  # an answer the client has not read
            time.sleep(0.1)
            conns = {c.inode: c for c in read_tcp_connections(
                frozenset({_inode(client), _inode(accepted)}))}
            mine, theirs = conns[_inode(client)], conns[_inode(accepted)]
    assert mine.local == theirs.remote and mine.remote == theirs.local
    assert (mine.unread, theirs.unread) == (10, 50)
    assert mine.last_sent_ms is not None and mine.last_recv_ms is not None
    assert theirs.last_sent_ms is not None and theirs.last_recv_ms is not None
    # the client spoke first and heard last; the server heard first and spoke last
    assert mine.last_recv_ms < mine.last_sent_ms
    assert theirs.last_sent_ms < theirs.last_recv_ms
    assert mine.last_sent_ms - mine.last_recv_ms >= 200
