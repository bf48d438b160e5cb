"""A real model server that loads its weights on a worker thread while a launcher polls it.

    python loading_jobs.py MODE READY_FILE WORKDIR

Mode ``quantize`` (vime#90's slow start-up): the server's main thread serves ``/health`` (503
while loading) from an HTTP server; its ``weight-quantizer`` thread computes layer after layer
in Python. The launcher polls ``/health`` every second. Healthy: slow, progressing.

Mode ``spin``: the same server's ``weight-loader`` thread spin-waits for a download thread to
hand it the weights (``while not STATE["weights"]: pass``), and that thread died at start: one
line on a core for ever, the launcher polling. Hung (not progressing).

Each process appends ``"<pid> <tag>"`` to READY_FILE when it is where it stays.
"""

from __future__ import annotations

import hashlib
import http.client
import multiprocessing as mp
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import setproctitle

STATE: dict[str, object] = {"layers": 0, "weights": None}


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def quantize_layer(layer: int) -> bytes:
    digest = bytes(32)
    for step in range(400_000):
        digest = hashlib.sha256(digest + bytes([layer % 256, step % 256])).digest()
    return digest


def quantizer() -> None:
    for layer in range(10_000):
        quantize_layer(layer)
        STATE["layers"] = layer + 1


def await_weights() -> None:
    while not STATE["weights"]:  # handed over by a downloader thread that died before it did
        pass


def serve(port_w: object, ready_file: str, mode: str) -> None:
    setproctitle.setproctitle("model_server")

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Health)
    if mode == "quantize":
        threading.Thread(target=quantizer, name="weight-quantizer", daemon=True).start()
    else:
        threading.Thread(target=await_weights, name="weight-loader", daemon=True).start()
    port_w.send(server.server_address[1])  # type: ignore[attr-defined]
    ready(ready_file, "server")
    server.serve_forever()


def main(mode: str, ready_file: str) -> None:
    setproctitle.setproctitle("serve_launcher")
    ctx = mp.get_context("fork")
    port_r, port_w = ctx.Pipe(duplex=False)
    ctx.Process(target=serve, args=(port_w, ready_file, mode), daemon=True).start()
    port = port_r.recv()
    ready(ready_file, "launcher")
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        if conn.getresponse().status == 200:
            break
        conn.close()
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
