"""One Python process with several threads, computing on every core, or the same one idle.

    python benchmarks/busy_job.py --mode busy --threads 3 --ready-file PATH
    python benchmarks/busy_job.py --mode idle --threads 3 --ready-file PATH

``busy``: the main thread runs training-like steps (a torch matmul, whose own intra-op
threads compute beside it with the GIL released, and Python between) and ``--threads``
Python threads preprocess text in pure Python (they take turns on the GIL): a process that
computes, as a training step or an engine's forward pass looks to the kernel. ``idle``: the
same threads, every one blocked on an Event that is never set. Either appends
``"<pid> <mode>"`` to the ready file (the demojobs handshake) once every thread is in its
loop or its wait.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

from barrier_job import _mark_ready  # the demojobs handshake, run as a script from here

torch: Any = None  # imported in main(), after the arguments are read


def _tokens(text: str) -> list[str]:
    return [word.lower() for word in text.split() if word]


def _count(words: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    return counts


def _top(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: -item[1])[:10]


def python_work(started: threading.Barrier) -> None:
    """Pure-Python preprocessing (split, count, sort): the thread holds the GIL in turns with
    the others, and its stack goes through several functions, as real work does."""
    started.wait()
    text = " ".join(f"w{i % 97} W{i % 13}" for i in range(200))
    while True:
        words = _tokens(text)
        counts = _count(words)
        _top(counts)


def _forward(weights: Any) -> Any:
    return torch.mm(weights, weights).clamp_(-1.0, 1.0)


def _loss(out: Any) -> float:
    return float(out.abs().mean()) + sum(i * 1e-9 for i in range(500))


def _update(weights: Any, loss: float) -> Any:
    return weights * (1.0 - 1e-6 * loss)


def train_step(weights: Any) -> Any:
    """A training-like step: torch math (its own threads compute) and Python between."""
    out = _forward(weights)
    loss = _loss(out)
    return _update(out, loss)


def idle_wait(started: threading.Barrier, never: threading.Event) -> None:
    started.wait()
    never.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("busy", "idle"), default="busy")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--ready-file", default=os.environ.get("HANGSCOPE_DEMO_READY"))
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    global torch
    import torch

    torch.set_num_threads(max(2, os.cpu_count() or 2))
    never = threading.Event()
    started = threading.Barrier(args.threads + 1)
    for i in range(args.threads):
        target, extra = ((python_work, ()) if args.mode == "busy" else (idle_wait, (never,)))
        threading.Thread(target=target, args=(started, *extra), name=f"worker{i}",
                         daemon=True).start()
    started.wait()
    weights = torch.rand(64, 64)
    train_step(weights)  # torch's thread pool exists in both modes
    _mark_ready(args.ready_file, args.mode)
    if args.mode == "idle":
        never.wait()
        return 0
    while True:
        weights = train_step(weights)


if __name__ == "__main__":
    sys.exit(main())
