"""What each end of a connected Unix socket sent that the other has not read (sock_diag's
UNIX_DIAG_RQLEN wqueue: collect/procfs.py ``read_unix_peers``): a zmq send blocked at its
high-water mark waits on the connections holding such bytes (analyze/graph/zmqedges.py)."""

from __future__ import annotations

import os
import socket

from hangscope.collect.procfs import read_unix_peers


def test_the_end_that_wrote_holds_what_its_peer_has_not_read() -> None:
    writer, reader = socket.socketpair()
    with writer, reader:
        writer.sendall(b"x" * 1000)
        inodes = {os.fstat(s.fileno()).st_ino: s for s in (writer, reader)}
        peers = {u.inode: u for u in read_unix_peers(frozenset(inodes))}
        by_end = {inodes[i]: u for i, u in peers.items()}
        assert by_end[writer].unsent is not None and by_end[writer].unsent > 0, by_end
        assert by_end[reader].unsent == 0, by_end
        reader.recv(1000)
        after = {u.inode: u for u in read_unix_peers(frozenset(inodes))}
        assert after[os.fstat(writer.fileno()).st_ino].unsent == 0, after
