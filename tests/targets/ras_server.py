"""A RAS endpoint for tests: NCCL's client protocol replaying real captured answers, or misbehaving.

    python ras_server.py MODE READY_FILE [--port N] [--answers DIR] [--case behind]

Listens on 127.0.0.1 (port N, else any free port), writes the port into READY_FILE when it
listens (the test polls for it), and appends one line per accepted connection to
READY_FILE.conns. Modes:
  json      NCCL >= 2.28: accepts SET FORMAT json, answers the captured CASE.json
  text      NCCL 2.24-2.27: "ERROR: Unknown command" to SET FORMAT, answers CASE.txt
  badjson   accepts json but sends garbage for it; answers CASE.txt to a text request
  stall     accepts, reads, never answers
  noaccept  listens but never accepts (the kernel still completes the handshake)
  garbage   answers an HTTP error page
  huge      answers the protocol, then streams data without end
  slow      answers one byte every 0.2 s
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import time
from pathlib import Path


def _lines(conn: socket.socket):
    buf = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode(errors="replace").strip()


def _serve(conn: socket.socket, mode: str, answers: Path, case: str) -> None:
    if mode == "stall":
        while conn.recv(4096):
            pass
        return
    if mode == "garbage":
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        return
    fmt = "text"
    for line in _lines(conn):
        upper = line.upper()
        if upper.startswith("CLIENT PROTOCOL"):
            conn.sendall(b"SERVER PROTOCOL 2\n")
        elif upper.startswith("TIMEOUT"):
            conn.sendall(b"OK\n")
        elif upper.startswith("SET FORMAT"):
            if mode == "text":
                conn.sendall(f"ERROR: Unknown command {line}\n".encode())
            else:
                fmt = line.split()[-1].lower()
                conn.sendall(b"OK\n")
        elif upper in ("STATUS", "VERBOSE STATUS"):
            if mode == "huge":
                chunk = b"x" * (1 << 16)
                while True:
                    conn.sendall(chunk)
            body = (answers / f"{case}.{'json' if fmt == 'json' else 'txt'}").read_bytes()
            if mode == "badjson" and fmt == "json":
                body = b'{"communicators": [{"hash": oops'
            if mode == "slow":
                for byte in body:
                    conn.sendall(bytes([byte]))
                    time.sleep(0.2)
            conn.sendall(body)
            return
        else:
            conn.sendall(f"ERROR: Unknown command {line}\n".encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("ready")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--answers", default=str(
        Path(__file__).resolve().parent.parent / "fixtures" / "nccl" / "ras"))
    parser.add_argument("--case", default="behind")
    args = parser.parse_args()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.port))
    server.listen(16)
    tmp = args.ready + ".tmp"
    Path(tmp).write_text(str(server.getsockname()[1]))
    os.replace(tmp, args.ready)  # the port appears whole
    if args.mode == "noaccept":
        while True:
            time.sleep(3600)
    while True:
        conn, _ = server.accept()
        with open(args.ready + ".conns", "a") as log:
            log.write("conn\n")
        with conn, contextlib.suppress(OSError):
            _serve(conn, args.mode, Path(args.answers), args.case)


if __name__ == "__main__":
    main()
