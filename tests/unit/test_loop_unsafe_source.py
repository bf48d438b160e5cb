"""Which plain function hands an asyncio object work without the loop's thread-safe hop, from
its source (collect/source.py ``unsafe_loop_calls`` and ``loop_unsafe``).

GIVEN the real source of tests/targets/loop_wake_jobs.py THEN the reply reader's
``fut.set_result(reply)`` is named at any line of its function, and its coroutines are not.
GIVEN other sources THEN a ``queue.Queue``'s put_nowait, a hop through
``call_soon_threadsafe`` and a coroutine's own put are not loop-unsafe.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from support import TARGETS

from hangscope.collect import source

JOBS = str(TARGETS / "loop_wake_jobs.py")


def _line(text: str) -> int:
    return next(i for i, line in enumerate(Path(JOBS).read_text().splitlines(), 1)
                if text in line)


def test_the_reader_threads_direct_set_result_is_named_at_its_recv_line() -> None:
    at = _line("fut.set_result(reply)  # the bug")
    assert source.loop_unsafe(JOBS, _line("reply = pickle.loads(self.conn.recv")) == (
        f"fut.set_result(reply) (loop_wake_jobs.py:{at})")
    assert source.loop_unsafe(JOBS, _line("return await fut")) is None  # a coroutine


def _calls(text: str) -> list[str]:
    return [call for _, _, call, _ in source.unsafe_loop_calls(ast.parse(textwrap.dedent(text)))]


def test_thread_safe_queues_hops_and_coroutines_are_not_loop_unsafe() -> None:
    assert _calls("""
        import asyncio, queue
        q = queue.Queue()
        def feed(item):
            q.put_nowait(item)
        """) == []
    assert _calls("""
        import asyncio
        q = asyncio.Queue()
        def feed(loop, item):
            loop.call_soon_threadsafe(q.put_nowait, item)
        async def produce(item):
            q.put_nowait(item)
        """) == []
    assert _calls("""
        import asyncio
        class Handler:
            def __init__(self):
                self.queue = asyncio.Queue()
            def on_output(self, item):
                self.queue.put_nowait(item)
        """) == ["self.queue.put_nowait(item)"]
