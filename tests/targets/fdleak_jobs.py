"""A service that leaks a connection per request until it runs out of file descriptors.

    python fdleak_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in. Modes:

- ``leak``  (hung) an asyncio HTTP-ish service (``ulimit -n 64``) opens a new connection to a
            real ``redis-server`` for every request and never closes it; redis closes idle
            clients after 1 s (``timeout 1``), so the leaked sockets sit in CLOSE_WAIT. Once
            the service's fd table is full, its handler's redis connect fails with EMFILE
            ("Too many open files") and retries every second, and asyncio's accept fails
            too; the load driver's request waits for an answer that never comes (the
            redis-py / aiohttp "connection per request" leaks of redis/redis-py#1208-style
            reports, "Too many open files after a few hours").
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis(workdir: str) -> int:
    port = _free_port()
    with open(os.path.join(workdir, "redis.log"), "w") as log:
        subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--timeout", "1",
                          "--dir", workdir], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def service(redis_port: int, port: int, ready_file: str) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    sessions = []  # one redis connection per request, never closed

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        while True:  # retried until redis answers: the request waits meanwhile
            try:
                r_reader, r_writer = await asyncio.open_connection("127.0.0.1", redis_port)
                break
            except OSError as exc:
                print(f"redis connect failed, retrying: {exc}", flush=True)
                await asyncio.sleep(1)
        r_writer.write(b"PING\r\n")
        await r_reader.readline()
        sessions.append((r_reader, r_writer))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        ready(ready_file, "service")
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def driver(port: int, ready_file: str) -> None:
    while True:
        conn = socket.create_connection(("127.0.0.1", port))
        conn.settimeout(3)
        conn.sendall(b"GET /score HTTP/1.1\r\n")
        try:
            if not conn.recv(4096):  # the handler failed (its redis connect: EMFILE)
                break
        except TimeoutError:
            break
        conn.close()
        time.sleep(0.01)
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"GET /score HTTP/1.1\r\n")
    print("request timed out; waiting for the service", flush=True)
    ready(ready_file, "driver")
    conn.recv(4096)


def leak(ready_file: str, workdir: str) -> None:
    redis_port = _redis(workdir)
    port = _free_port()
    if os.fork() == 0:
        service(redis_port, port, ready_file)
        os._exit(0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.05)
    driver(port, ready_file)


if __name__ == "__main__":
    os.makedirs(sys.argv[3], exist_ok=True)
    globals()[sys.argv[1]](sys.argv[2], sys.argv[3])
