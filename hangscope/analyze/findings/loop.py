"""An asyncio loop handed work from another thread without its thread-safe hop: the latent
form of analyze/patterns/loopwake.py's lost wake-up, for a loop that something else may still wake
(it
listens, it has a timer), so the job is not proven hung but a request can stay stuck."""

from __future__ import annotations

from hangscope.analyze.graph.stackindex import index_of
from hangscope.analyze.patterns.loopwake import loop_handoffs, makes_loop_unsafe_call
from hangscope.model import Finding, Severity, Snapshot
from hangscope.words import who


def check_loop_unsafe_calls(snap: Snapshot) -> list[Finding]:
    """One warning per process whose loop thread is asleep while another thread's function
    calls a loop-only asyncio method (collect/source.py ``loop_unsafe``)."""
    out = []
    summary = snap.verdict.summary if snap.verdict is not None else ""
    # Only processes with a thread whose stack makes such a call, found once per distinct
    # set of stacks (131,072 ranks have none).
    for proc in index_of(snap.processes).having(makes_loop_unsafe_call):
        _, hands = loop_handoffs(proc)
        if not hands or hands[0][1] in summary:  # the verdict's lost wake-up says it
            continue
        thread, call = hands[0]
        out.append(Finding("loop.unsafe_call", Severity.WARNING, (
            f"Thread {thread.name or thread.tid} of {who(proc)} hands its asyncio loop work "
            f"with {call}, a loop-only call made outside the loop's thread with no "
            "loop.call_soon_threadsafe: it does not wake the loop, so the coroutine waiting "
            "for it runs only when something else wakes the loop (a request stuck until the "
            "next one comes, cpython#97970); call it through loop.call_soon_threadsafe."),
            {"pid": proc.pid, "tid": thread.tid, "call": call}))
    return out
