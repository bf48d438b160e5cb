"""Real long-poll jobs: a config service and the watchers that wait on it.

    python longpoll_jobs.py MODE READY_FILE WORKDIR

A ``ThreadingHTTPServer`` answers ``GET /config?version=N`` when its config is newer than N;
otherwise the handler thread waits on a ``threading.Condition`` for a publish. 3 watcher
processes ask in a loop. Each process appends ``"<pid> <tag>"`` to READY_FILE when it is where
it stays. Modes (ray#12302, a long-poll config client):

- ``longpoll`` the handler waits at most 25 s, then answers 304 and the watcher asks again:
               nobody publishes, so the job is idle (healthy).
- ``lost``     the handler waits with no timeout for a publish that never comes (the publish
               path was never wired): the watchers wait for ever.
"""

from __future__ import annotations

import http.client
import multiprocessing as mp
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import setproctitle

VERSION = 1


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def serve(mode: str, ready_file: str, port_w: object) -> None:
    setproctitle.setproctitle("config-service")
    changed = threading.Condition()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            known = int(self.path.rpartition("=")[2] or 0)
            with changed:
                if mode == "longpoll":
                    changed.wait_for(lambda: known < VERSION, timeout=25)
                else:
                    while known >= VERSION:
                        changed.wait()
            body = str(VERSION).encode()
            self.send_response(200 if known < VERSION else 304)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_w.send(server.server_address[1])  # type: ignore[attr-defined]
    ready(ready_file, "server")
    server.serve_forever()


def watch(port: int, index: int, ready_file: str) -> None:
    setproctitle.setproctitle(f"config-watcher {index}")
    told = False
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", f"/config?version={VERSION}")
        if not told:
            ready(ready_file, f"watcher{index}")
            told = True
        conn.getresponse().read()
        conn.close()


def main(mode: str, ready_file: str) -> None:
    ctx = mp.get_context("fork")
    port_r, port_w = ctx.Pipe(duplex=False)
    ctx.Process(target=serve, args=(mode, ready_file, port_w)).start()
    port = port_r.recv()
    watchers = [ctx.Process(target=watch, args=(port, i, ready_file)) for i in range(3)]
    for w in watchers:
        w.start()
    ready(ready_file, "launcher")
    for w in watchers:
        w.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
