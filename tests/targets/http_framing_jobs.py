"""A client of a legacy HTTP/1.1 registry (``http.server``, keep-alive) asks it for a model's
metadata with ``http.client``:

    python http_framing_jobs.py MODE READY_FILE WORKDIR

- ``no_length``: the handler answers HTTP/1.1 with no Content-Length and no chunked encoding:
  such a body ends only when the connection closes, so the client reads it until EOF, while the
  server keeps the connection open and its handler thread waits for the next request on it
  (cpython#75259; blind round 37's 06). The handler takes 50 ms to answer: the server sends
  last, in a later clock tick than the request.
- ``with_length``: the twin: the handler sends a Content-Length; the client asks again every
  0.3 s (progressing).

READY_FILE gets ``"<pid> <tag>"`` from each process once it is in its final state.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hang_shapes import free_port, ready  # the same launcher's handshake, one home


def serve(mode: str, port: int, ready_file: str) -> None:
    class Registry(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # persistent connections

        def do_GET(self) -> None:
            time.sleep(0.05)  # the lookup
            body = json.dumps({"model": "tinylm", "layers": 4}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if mode == "with_length":
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Registry)
    ready(ready_file, "server")
    server.serve_forever()


def client(mode: str, port: int, ready_file: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    said = False
    while True:
        conn.request("GET", "/models/tinylm")
        response = conn.getresponse()
        if mode == "no_length":  # inside the read of the body a moment later
            threading.Timer(0.5, ready, (ready_file, "client")).start()
        response.read()  # no_length: until the connection closes, which it never does
        if not said:  # with_length: the first answer read
            said = True
            ready(ready_file, "client")
        time.sleep(0.3)


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "serve", mode, str(port), ready_file])
    while not os.path.exists(ready_file) or "server" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)  # the server's ready line (the test's start deadline bounds it)
    try:
        client(mode, port, ready_file)
    finally:
        server.kill()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
