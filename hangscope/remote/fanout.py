"""Run the one-node dump on every node in parallel, each under its own deadline.

What ``pdsh -w node[01-04] hangscope dump --find SPEC --format json`` would do, through a
Transport, collecting per node a Snapshot or the sentence that says why there is none.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hangscope.errors import HangscopeError
from hangscope.model import Snapshot
from hangscope.remote.exchange import Conversations, Exchange
from hangscope.remote.ship import NO_PYTHON, REMOTE_SCRIPT, bundle
from hangscope.remote.transport import Transport

#: File descriptors the fan-out leaves to the rest of the process (the local sampler's
#: py-spy pipes and /proc reads, the terminal, log files).
FD_RESERVE = 64
#: Descriptors one node holds while it answers: the parent's ends of its stdin, stdout
#: and stderr pipes, and one more while Popen spawns it.
FD_PER_NODE = 4


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
    """The node's dump; ``scrub`` (half the parse time at 1,000 nodes) only where its text
    may hold a control character."""
    from hangscope.model.serialize import loads_snapshot

    return loads_snapshot(stdout)


def _answer(transport: Transport, node: str, ex: Exchange | OSError,
            timeout: float) -> NodeAnswer:
    """The node's answer from its transport's exchange: the parsed dump, or why not."""
    if isinstance(ex, OSError):
        return NodeAnswer(node, None, f"could not run {transport.argv(node, [])[0]}: "
                          f"{ex.strerror}", 0.0)

    def answer(snapshot: Snapshot | None, error: str | None) -> NodeAnswer:
        return NodeAnswer(node, snapshot, error, round(ex.seconds, 2), ex.shipped)

    if ex.error is not None:
        return answer(None, ex.error)
    if ex.timed_out:
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


def fanout_width(transport: Transport, nodes: int, asked: int | None = None) -> int:
    """How many nodes to ask at once: ``asked`` (``--fanout``) or the transport's bound, and
    what the open-file limit holds (raised to its hard limit when that is needed; the soft
    default is often 1,024, which 1,000 nodes' pipes would run out of mid-dump, EMFILE)."""
    want = max(1, min(asked or transport.parallel, nodes))
    need = FD_RESERVE + FD_PER_NODE * want
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    if soft == resource.RLIM_INFINITY:
        return want
    return max(1, min(want, (soft - FD_RESERVE) // FD_PER_NODE))


def dump_nodes(transport: Transport, nodes: Sequence[str], dump_args: Sequence[str],
               timeout: float, ship: str = "auto", python: str = "python3",
               local: Callable[[], NodeAnswer] | None = None,
               fanout: int | None = None) -> list[NodeAnswer]:
    """Every node at once (``local`` runs in-process for this node, in a thread of its own);
    answers in node order. Each answer is parsed as it arrives, while slower nodes sample."""
    command = ["sh", "-c", REMOTE_SCRIPT, "hangscope-remote", ship, python, "dump", *dump_args]
    got: dict[str, NodeAnswer] = {}

    def done(node: str, ex: Exchange | OSError) -> None:
        got[node] = _answer(transport, node, ex, timeout)

    talks = Conversations(fanout_width(transport, len(nodes), fanout), timeout, bundle, done)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hangscope-local") as pool:
        local_future = pool.submit(local) if local is not None else None
        talks.run((n, transport.argv(n, command)) for n in dict.fromkeys(nodes))
        answers = [got[n] for n in nodes]
        if local_future is not None:
            answers.insert(0, local_future.result())
    return answers
