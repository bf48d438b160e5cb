"""Run the one-node dump on every node in parallel, each under its own deadline.

What ``pdsh -w node[01-04] hangscope dump --find SPEC --format json`` would do, through a
Transport, collecting per node a Snapshot or the sentence that says why there is none.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hangscope.errors import HangscopeError
from hangscope.model import Snapshot
from hangscope.remote.ship import HELLO_INSTALLED, HELLO_SEND, NO_PYTHON, REMOTE_SCRIPT, bundle
from hangscope.remote.transport import Transport

#: Concurrent transports at most: ssh/srun processes are cheap, but not thousands at once.
MAX_PARALLEL = 64


@dataclass(frozen=True)
class NodeAnswer:
    """What one node sent back: a snapshot, or why not (``error``), and how long it took."""

    node: str
    snapshot: Snapshot | None
    error: str | None
    seconds: float
    shipped: bool = False


def hangscope_error(stderr: str) -> str | None:
    """hangscope's own error sentence from the remote's stderr, with its fix."""
    lines = [ln.removeprefix("hangscope: ") for ln in stderr.splitlines()
             if ln.startswith(("hangscope: error:", "hangscope: fix:"))]
    return " ".join(lines) or None


def _parse(stdout: str) -> Snapshot:
    from hangscope.model.serialize import from_dict

    return from_dict(json.loads(stdout))


@dataclass
class _Exchange:
    rc: int
    stdout: str
    stderr: str
    shipped: bool
    timed_out: bool


def _converse(argv: list[str], timeout: float) -> _Exchange:
    """Run the transport; send the bundle only if the remote's first line asks for it."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    fired = threading.Event()

    def kill() -> None:
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    shipped = False
    try:
        assert proc.stdin is not None and proc.stdout is not None
        first = proc.stdout.readline()
        hello = first.strip()
        if hello == HELLO_SEND.encode():
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(bundle())
                shipped = True
        if hello in (HELLO_SEND.encode(), HELLO_INSTALLED.encode()):
            first = b""  # the handshake line is no part of the dump
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        proc.stdin = None  # communicate() must not flush a closed pipe
        out, err = proc.communicate()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return _Exchange(proc.returncode, (first + out).decode(errors="replace"),
                     err.decode(errors="replace"), shipped, fired.is_set())


def dump_node(transport: Transport, node: str, dump_args: Sequence[str], timeout: float,
              ship: str = "auto", python: str = "python3") -> NodeAnswer:
    """Run ``hangscope dump ARGS --format json`` on ``node``; ship hangscope when it lacks it."""
    start = time.monotonic()
    command = ["sh", "-c", REMOTE_SCRIPT, "hangscope-remote", ship, python, "dump", *dump_args]
    try:
        ex = _converse(transport.argv(node, command), timeout)
    except HangscopeError as exc:  # nothing to ship (no py-spy here)
        return NodeAnswer(node, None, exc.message, round(time.monotonic() - start, 2))
    except OSError as exc:
        return NodeAnswer(node, None, f"could not run {transport.argv(node, [])[0]}: "
                          f"{exc.strerror}", round(time.monotonic() - start, 2))

    def answer(snapshot: Snapshot | None, error: str | None) -> NodeAnswer:
        return NodeAnswer(node, snapshot, error, round(time.monotonic() - start, 2), ex.shipped)

    if ex.timed_out:
        # The transport was killed; ssh's hang-up makes the remote remove its temporary
        # directory (its EXIT trap), and py-spy's ptrace detach resumes the ranks.
        return answer(None, f"{transport.name} timed out after {timeout:g} s")
    if ex.stdout.lstrip().startswith("{"):
        try:
            return answer(_parse(ex.stdout), None)
        except (ValueError, HangscopeError) as exc:
            return answer(None, f"sent an unreadable dump ({exc})")
    if transport.unreachable_rc is not None and ex.rc == transport.unreachable_rc:
        return answer(None, transport.what_failed(ex.rc, ex.stderr))
    if ex.rc == NO_PYTHON:
        return answer(None, hangscope_error(ex.stderr) or "could not unpack hangscope there")
    return answer(None, hangscope_error(ex.stderr) or transport.what_failed(ex.rc, ex.stderr))


def dump_nodes(transport: Transport, nodes: Sequence[str], dump_args: Sequence[str],
               timeout: float, ship: str = "auto", python: str = "python3",
               local: Callable[[], NodeAnswer] | None = None) -> list[NodeAnswer]:
    """Every node at once (``local`` runs in-process for this node); answers in node order."""
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(nodes) + 1)),
                            thread_name_prefix="hangscope-node") as pool:
        local_future = pool.submit(local) if local is not None else None
        futures = [pool.submit(dump_node, transport, n, dump_args, timeout, ship, python)
                   for n in nodes]
        answers = [f.result() for f in futures]
        if local_future is not None:
            answers.insert(0, local_future.result())
    return answers
