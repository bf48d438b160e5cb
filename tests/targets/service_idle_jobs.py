"""Serving and queue-worker jobs that are idle, not hung, and their hung twins.

    python service_idle_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before it enters the call it stays
in. Modes:

- ``broker_poll``  (healthy) a queue worker's main process asks a real ``redis-server`` for
                   its next task with ``BRPOP queue 1`` in a loop (redis holds each request
                   for its 1 s timeout and answers nil), while its two forked pool children
                   wait for tasks on their pipes: a Celery/RQ worker with an empty queue
                   (celery/celery#7276-style "is my worker hung?" reports).
- ``broker_lost``  (hung) the same worker, but its main process waits in ``recv`` for the
                   reply to a ``GET`` it never sent in full (a half-written command): redis
                   waits for the rest, the worker for the reply.
- ``engine_sleep`` (healthy) a serving engine put to sleep: the API server (an asyncio HTTP
                   server, idle in its loop) spawned an engine process whose input thread
                   waits in ``zmq`` ``recv_multipart`` for the next request on a DEALER socket
                   connected to the server's ROUTER, and whose main thread waits on its input
                   queue; the engine logged that it fell asleep (vLLM's sleep mode,
                   vllm-project/vllm#11743-style "engine looks hung after /sleep").
- ``engine_lost``  (hung) the same pair, but the engine's input thread asks the API server for
                   its config over the same zmq connection and waits for the reply, which
                   the server (idle in its loop) dropped: a lost reply, not sleep.
"""

from __future__ import annotations

import asyncio
import os
import queue
import socket
import subprocess
import sys
import threading
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis(workdir: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    with open(os.path.join(workdir, "redis.log"), "w") as log:
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir, "--daemonize", "no"],
            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def _command(*words: str) -> bytes:
    parts = [f"*{len(words)}\r\n".encode()]
    for w in words:
        parts.append(f"${len(w)}\r\n{w}\r\n".encode())
    return b"".join(parts)


def _pool_children(ready_file: str, n: int = 2) -> list[int]:
    """Forked pool children, each waiting for a task on its own pipe from the parent."""
    pids = []
    for i in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            ready(ready_file, f"worker{i + 1}")
            while True:
                if not os.read(r, 4096):
                    os._exit(0)
        os.close(r)
        pids.append(pid)
    return pids


def broker_poll(ready_file: str, workdir: str) -> None:
    server, port = _redis(workdir)
    ready_pid = server.pid
    with open(ready_file, "a") as f:
        f.write(f"{ready_pid} broker\n")
    _pool_children(ready_file)
    conn = socket.create_connection(("127.0.0.1", port))
    print("worker ready: consuming from queue 'tasks'", flush=True)
    ready(ready_file, "consumer")
    while True:
        conn.sendall(_command("BRPOP", "tasks", "1"))
        reply = conn.recv(65536)  # "*-1": no task within the timeout; ask again
        if not reply.startswith(b"*-1"):
            print("got task", reply[:40], flush=True)


def broker_lost(ready_file: str, workdir: str) -> None:
    server, port = _redis(workdir)
    with open(ready_file, "a") as f:
        f.write(f"{server.pid} broker\n")
    _pool_children(ready_file)
    conn = socket.create_connection(("127.0.0.1", port))
    ready(ready_file, "consumer")
    conn.sendall(_command("GET", "config")[:-4])  # the command's tail never sent
    conn.recv(65536)


def engine_sleep(ready_file: str, workdir: str, engine_mode: str = "_engine") -> None:
    import zmq

    port = _free_port()
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(f"tcp://127.0.0.1:{port}")
    engine = subprocess.Popen([sys.executable, __file__, engine_mode, ready_file, workdir,
                               str(port)])
    # The engine says hello once; the API server then serves HTTP and sends nothing: /sleep
    # was called, and no request came since.
    router.recv_multipart()

    async def health(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def serve() -> None:
        http = await asyncio.start_server(health, "127.0.0.1", _free_port())
        print("INFO: API server ready; POST /sleep?level=1 -> 200", flush=True)
        ready(ready_file, "api")
        async with http:
            await http.serve_forever()

    try:
        asyncio.run(serve())
    finally:
        engine.kill()


def engine_lost(ready_file: str, workdir: str) -> None:
    engine_sleep(ready_file, workdir, "_engine_asks")


def _engine(ready_file: str, workdir: str, port: str, asks: bool = False) -> None:
    import zmq

    inputs: queue.Queue = queue.Queue()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(f"tcp://127.0.0.1:{port}")
    sock.send(b"READY")

    def input_thread() -> None:
        if asks:  # a request whose reply never comes: the server read it and dropped it
            sock.send(b"GET_CONFIG")
            ready(ready_file, "engine-input")
            config = sock.recv_multipart()
            print("config", config, flush=True)
        ready(ready_file, "engine-input")
        while True:
            inputs.put(sock.recv_multipart())

    threading.Thread(target=input_thread, name="input_socket", daemon=True).start()
    print("INFO engine: sleep requested (level 1): offloading weights, fall asleep", flush=True)
    ready(ready_file, "engine")
    while True:
        request = inputs.get()
        print("INFO engine: request", request, flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode in ("_engine", "_engine_asks"):
        _engine(*sys.argv[2:5], asks=mode == "_engine_asks")
    else:
        os.makedirs(sys.argv[3], exist_ok=True)
        globals()[mode](sys.argv[2], sys.argv[3])
