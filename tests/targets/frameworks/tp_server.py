"""A tensor-parallel inference server under torchrun, 2 ranks over gloo: rank 0 serves HTTP
(FastAPI on uvicorn) and hands each request to rank 1 with ``broadcast_object_list``; rank 1
loops waiting for the next one (vLLM's driver/worker loop: vllm-project/vllm#5084, the workers
idle in ``broadcast_tensor_dict`` between requests; blind round 27's 08).

    python -m torch.distributed.run --nproc-per-node 2 tp_server.py READY_FILE PORT

Rank 0 serves one request of its own once the server answers (so an AnyIO worker thread has
run the sync endpoint and waits for the next), then appends ``"<pid> rank0"`` to READY_FILE;
rank 1 appends ``"<pid> rank1"`` when it waits for its second request. Then nobody asks:
idle, not hung.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.request
from datetime import timedelta


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def step(prompt: list[int]) -> list[int]:
    """This rank's half of a tiny model's forward pass."""
    import torch

    return (torch.tensor(prompt, dtype=torch.float32) * 2).long().tolist()


def serve(ready_file: str, port: int) -> None:
    import torch.distributed as dist
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/generate")
    def generate(request: dict) -> dict:  # a sync endpoint: AnyIO's worker thread runs it
        dist.broadcast_object_list([request], src=0)
        return {"ids": step(request["prompt"])}

    def smoke() -> None:
        body = json.dumps({"prompt": [1, 2, 3]}).encode()
        while True:  # until the server answers (the polling interval of a readiness wait)
            try:
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{port}/generate", data=body,
                    headers={"Content-Type": "application/json"}), timeout=30).read()
                break
            except OSError:
                time.sleep(0.1)
        ready(ready_file, "rank0")

    threading.Thread(target=smoke, daemon=True).start()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def work(ready_file: str) -> None:
    import torch.distributed as dist

    served = 0
    while True:
        if served == 1:
            ready(ready_file, "rank1")
        box: list[object] = [None]
        dist.broadcast_object_list(box, src=0)
        step(box[0]["prompt"])  # type: ignore[index]
        served += 1


def main() -> None:
    import torch.distributed as dist

    ready_file, port = sys.argv[1], int(sys.argv[2])
    dist.init_process_group("gloo", timeout=timedelta(days=1))
    if dist.get_rank() == 0:
        serve(ready_file, port)
    else:
        work(ready_file)


if __name__ == "__main__":
    main()
