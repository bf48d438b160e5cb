"""Where a rank called collectives during the progress window (``py-spy record`` raw stacks).

The dense samples of a rank that keeps running show every collective it passes through, not
only the one it sits in when the three stack samples are taken. That is the normal path of its
replica: a tie between two stuck ranks of another replica is broken by it (analyze/rules/).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from hangscope.analyze.evidence.classify import classify_thread
from hangscope.analyze.evidence.progress_hints import Line
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.frameworks import any_worker_wait
from hangscope.model import Category, Frame, Thread
from hangscope.model.progress import ThreadProgress

#: ``func (file:line)``, py-spy's collapsed frame.
_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")

#: Distinct stacks classified per thread at most: a busy rank has tens, not thousands.
_MAX_STACKS = 200
#: Samples outside a get needed to say the thread left it (one stray sample is noise: a
#: ``--nonblocking`` read can tear across a frame change; progress.py's MIN_MOVED_SAMPLES).
MIN_OUTSIDE = 2


def parse_frame(text: str) -> Frame:
    """py-spy's collapsed ``func (file:line)`` as a Frame (the name alone when it is not)."""
    match = _FRAME.match(text)
    if match is None:
        return Frame(name=text)
    return Frame(name=match["name"], file=match["file"], line=int(match["line"]))


def signature(op: str, site: str | None) -> str:
    """``all_reduce at tp_sync (train.py:16)``: one collective call, as groups name it."""
    return f"{op} at {site}" if site else op


def collective_sites(thread: ThreadProgress | None) -> tuple[str, ...]:
    """The collectives (op and call site) this thread was sampled in, most sampled first."""
    if thread is None:
        return ()
    out: dict[str, None] = {}
    for stack in thread.stacks[:_MAX_STACKS]:
        frames = tuple(parse_frame(f) for f in reversed(stack.frames))  # innermost first
        seen = classify_thread(Thread(tid=thread.tid, frames=frames))
        if seen.category is Category.COLLECTIVE and seen.op and not is_p2p(seen.op):
            out[signature(seen.op, seen.site)] = None
    return tuple(out)


def _get_samples(thread: ThreadProgress,
                 untimed: Collection[Line]
                 ) -> tuple[dict[str, int], int]:
    """(samples inside a framework's object get entered from one of the ``untimed`` lines, by
    ``get (called from line)``; samples on Python lines outside every such get)."""
    inside: dict[str, int] = {}
    outside = 0
    for stack in thread.stacks[:_MAX_STACKS]:
        frames = [parse_frame(text) for text in stack.frames]
        waits = next((i for i, f in enumerate(frames) if any_worker_wait(f.name, f.file)),
                     None)
        if waits is None:
            outside += stack.count if frames else 0  # (an empty sample: between frames)
            continue
        for f in reversed(frames[:waits]):  # the nearest of the program's lines above it
            if (f.name, f.file, f.line) in untimed:
                site = f"{frames[waits].name} (called from {f.name} ({f.file}:{f.line}))"
                inside[site] = inside.get(site, 0) + stack.count
                break
    return inside, outside


def returned_gets(thread: ThreadProgress | None,
                  untimed: Collection[Line]) -> tuple[str, ...]:
    """The program's own lines (``untimed``: they call a framework's object get with no
    timeout) from which this thread was sampled inside that get, where it was also sampled
    outside every such get, on Python lines (at least :data:`MIN_OUTSIDE` times): its get
    returned, which it does only once its objects came, and the line went on (a driver
    submitting the next round and getting its result). Empty where it never left the get."""
    if thread is None or not untimed:
        return ()
    inside, outside = _get_samples(thread, untimed)
    return tuple(sorted(inside, key=lambda s: -inside[s])) if outside >= MIN_OUTSIDE else ()


def held_in_get(thread: ThreadProgress | None,
                untimed: Collection[Line]) -> str | None:
    """The get with no timeout (``get (called from line)``) this thread was sampled in all
    window, but for stray samples: it waits for objects, and its wake-ups there are the
    framework's own re-checks inside the get (Ray's core worker wakes every few ms), not a
    timer of the program's. None where it was anywhere else."""
    if thread is None or not untimed or not thread.samples:
        return None
    inside, outside = _get_samples(thread, untimed)
    held = sum(inside.values())
    if not inside or outside >= MIN_OUTSIDE or held < thread.samples - MIN_OUTSIDE:
        return None
    return max(inside, key=lambda s: inside[s])


#: asyncio's stream transports hand a connection's bytes to the protocol here (a read that
#: returned data), send what waited for room, or send a protocol's bytes at once (``write``
#: with nothing buffered calls ``send``; a server answering a request): a thread sampled
#: inside moved socket data then.
_TRANSPORT_IO = frozenset({"_read_ready__data_received", "_read_ready__get_buffer",
                           "_write_ready", "write", "writelines"})
_TRANSPORT_FILE = "asyncio/selector_events.py"


def transport_io(thread: ThreadProgress | None) -> str | None:
    """Where the window sampled ``thread``'s event loop moving a connection's bytes (asyncio's
    transport callbacks; ``recv``/``send``, which /proc/PID/io does not count), or None. One
    sample proves it: the callback runs only once the kernel said the socket had data or room."""
    for stack in thread.stacks if thread is not None else ():
        for text in stack.frames:
            if text.endswith(")") and _TRANSPORT_FILE in text:
                frame = parse_frame(text)
                if frame.name.rsplit(".", 1)[-1] in _TRANSPORT_IO:
                    return f"{frame.name} ({frame.file}:{frame.line})"
    return None
