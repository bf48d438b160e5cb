"""A client of a vLLM server, outside the job: ``python vllm_client.py PORT MODE [READY]``.

``loop``: asks for 48-token completions one after another until killed (a load generator);
``cue``: one request whose ``vllm_xargs`` make the test's logits processor wait for its cue
(tests/targets/frameworks/vllm_user_code.py), then waits for the answer; ``call_back``: one
request whose processor asks this same server from inside the step. With READY, writes
``<pid> client`` there once its first request is sent (a loop: once its first answer came).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def ask(port: int, model: str, extra: dict[str, object] | None = None,
        max_tokens: int = 48) -> bytes:
    body: dict[str, object] = {"model": model, "prompt": "the engine waits for",
                               "max_tokens": max_tokens, "temperature": 0.0,
                               "ignore_eos": True}
    if extra:
        body["vllm_xargs"] = extra
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as resp:
        return resp.read()


def model_name(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as resp:
        return str(json.loads(resp.read())["data"][0]["id"])


def ready(path: str | None, tag: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {tag}\n")


def main(port: int, mode: str, ready_file: str | None = None) -> None:
    model = model_name(port)
    if mode == "loop":
        ask(port, model)
        ready(ready_file, "client")
        while True:
            ask(port, model)
    elif mode == "held":
        # One request to a paused server: it is on its way before the line is written, and
        # held until the server is resumed.
        import threading

        threading.Timer(1.0, ready, (ready_file, "client")).start()
        ask(port, model, max_tokens=4)
    elif mode == "cue":
        # The request is on its way before the line is written; the answer never comes
        # until the test writes the cue.
        import threading

        threading.Timer(1.0, ready, (ready_file, "client")).start()
        ask(port, model, {"wait_for_cue": 1}, max_tokens=4)
    elif mode == "call_back":
        # Its logits processor calls this same server from inside the step
        import threading

        threading.Timer(1.0, ready, (ready_file, "client")).start()
        ask(port, model, {"call_back": port}, max_tokens=4)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
