"""Run the one-node dump on every node in parallel, each under its own deadline.

What ``pdsh -w node[01-04] hangscope dump --find SPEC --format json`` would do, through a
Transport, collecting per node a Snapshot or the sentence that says why there is none.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hangscope.errors import HangscopeError
from hangscope.model import Snapshot
from hangscope.remote.ship import NEEDS_BUNDLE, NO_PYTHON, REMOTE_SCRIPT, bundle
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


def _hangscope_error(stderr: str) -> str | None:
    """hangscope's own error sentence from the remote's stderr, with its fix."""
    lines = [ln.removeprefix("hangscope: ") for ln in stderr.splitlines()
             if ln.startswith(("hangscope: error:", "hangscope: fix:"))]
    return " ".join(lines) or None


def _parse(stdout: str) -> Snapshot:
    from hangscope.serialize import from_dict

    return from_dict(json.loads(stdout))


def _run_once(transport: Transport, node: str, mode: str, python: str,
              dump_args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    command = ["sh", "-c", REMOTE_SCRIPT, "hangscope-remote", mode, python, *dump_args]
    return subprocess.run(transport.argv(node, command), capture_output=True, timeout=timeout,
                          input=bundle() if mode == "ship" else b"", check=False)


def dump_node(transport: Transport, node: str, dump_args: Sequence[str], timeout: float,
              ship: str = "auto", python: str = "python3") -> NodeAnswer:
    """Run ``hangscope dump ARGS --format json`` on ``node``; ship hangscope when it lacks it."""
    start = time.monotonic()
    shipped = False

    def answer(snapshot: Snapshot | None, error: str | None) -> NodeAnswer:
        return NodeAnswer(node, snapshot, error, round(time.monotonic() - start, 2), shipped)

    mode = "ship" if ship == "always" else "auto"
    try:
        result = _run_once(transport, node, mode, python, dump_args, timeout)
        if result.returncode == NEEDS_BUNDLE and mode == "auto":
            if ship == "never":
                return answer(None, "hangscope is not installed there (and --ship never)")
            shipped = True
            left = max(1.0, timeout - (time.monotonic() - start))
            result = _run_once(transport, node, "ship", python, dump_args, left)
    except subprocess.TimeoutExpired:
        # subprocess.run killed the transport; ssh's hang-up makes the remote remove its
        # temporary directory (its EXIT trap) and py-spy's ptrace detach resumes the ranks.
        return answer(None, f"{transport.name} timed out after {timeout:g} s")
    except HangscopeError as exc:  # nothing to ship (no py-spy here)
        return answer(None, exc.message)
    except OSError as exc:
        return answer(None, f"could not run {transport.argv(node, [])[0]}: {exc.strerror}")
    stdout = result.stdout.decode(errors="replace")
    stderr = result.stderr.decode(errors="replace")
    if stdout.lstrip().startswith("{"):
        try:
            return answer(_parse(stdout), None)
        except (ValueError, HangscopeError) as exc:
            return answer(None, f"sent an unreadable dump ({exc})")
    if transport.unreachable_rc is not None and result.returncode == transport.unreachable_rc:
        return answer(None, transport.what_failed(result.returncode, stderr))
    if result.returncode == NO_PYTHON:
        return answer(None, _hangscope_error(stderr) or "could not unpack hangscope there")
    return answer(None, _hangscope_error(stderr)
                  or transport.what_failed(result.returncode, stderr))


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
