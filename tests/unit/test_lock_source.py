"""Which lock a frame's line takes and which it holds, from its source (collect/source.py).

GIVEN the real source of tests/targets/lock_jobs.py and of the standard library's logging,
WHEN a frame's line is looked up, THEN the lock its statement takes and the locks held there
(with-blocks, ``acquire()`` then ``try/finally: release()``) are named by their source text.
"""

from __future__ import annotations

import ast
import logging
import textwrap
import threading
import time
from pathlib import Path

from support import TARGETS

from hangscope.collect import source

JOBS = str(TARGETS / "lock_jobs.py")


def _line(text: str, path: str = JOBS, after: int = 0) -> int:
    lines = Path(path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if i > after and text in line)


def test_the_inner_with_of_nested_locks_takes_one_and_holds_the_other() -> None:
    write = _line("def write(self")
    inner = _line("with self.journal_lock:", after=write)
    assert source.lock_scope(JOBS, inner) == ("self.journal_lock", ("self.index_lock",), True)
    outer = _line("with self.index_lock:", after=write)
    assert source.lock_scope(JOBS, outer) == ("self.index_lock", (), True)
    wait = _line("self.compactor_in.wait()", after=write)
    assert source.lock_scope(JOBS, wait) == (None, ("self.index_lock",), False)


def test_a_module_lock_held_around_a_blocking_call_and_a_call_that_is_not_a_lock() -> None:
    blocked = _line("select.select([fd], [], [])")
    assert source.lock_scope(JOBS, blocked) == (None, ("_BUFFER_LOCK",), False)
    # ``with open(...)`` builds a fresh context manager: no lock.
    assert source.lock_scope(JOBS, _line('f.write(f"{os.getpid()} {tag}\\n")')) == (
        None, (), False)


def test_acquire_then_try_finally_release_holds_the_try_body() -> None:
    """Python 3.11's logging.Handler.handle: ``self.acquire()``, then ``try: self.emit(record)
    finally: self.release()``."""
    path = logging.__file__
    emit = _line("self.emit(record)", path, after=_line("def handle(self, record)", path))
    assert source.lock_scope(path, emit)[1][-1:] in (("self",), ("self.lock",))


def test_acquire_then_a_later_release_of_the_same_block_holds_what_lies_between(
        tmp_path: Path) -> None:
    """A permit taken and given back on the success path only (apache/pulsar#13812's leak):
    held between the two calls; a bare ``acquire()`` with no release in its block holds
    nothing and gives nothing back (a signal another thread's release() sends)."""
    path = tmp_path / "slots.py"
    path.write_text(textwrap.dedent("""\
        def call(slots, conn):
            slots.acquire()
            reply = conn.ask()
            if reply is None:
                raise IOError("no reply")
            slots.release()
            return reply

        def wait_ready(signal):
            signal.acquire()
            return 1
        """))
    assert source.lock_scope(str(path), 2) == ("slots", (), True)
    assert source.lock_scope(str(path), 3) == (None, ("slots",), False)
    assert source.lock_scope(str(path), 5) == (None, ("slots",), False)
    assert source.lock_scope(str(path), 6) == (None, (), False)
    assert source.lock_scope(str(path), 10) == ("signal", (), False)


def test_a_line_calls_the_functions_it_names() -> None:
    code = textwrap.dedent("""\
        def f(self):
            x = self.reader.read(4)
            g(x)
        """)
    calls = source.call_names(ast.parse(code))
    assert calls[2] == frozenset({"read"}) and calls[3] == frozenset({"g"})
    assert source.calls_at(JOBS, _line("select.select([fd], [], [])")) == ("select",)


def test_a_line_inside_a_with_over_a_call_is_within_that_call() -> None:
    """A pool's lease handed to ``with pool.lease():`` is held in its body
    (tests/targets/checkout_jobs.py); the with line itself is not inside it."""
    jobs = str(TARGETS / "checkout_jobs.py")
    refresh = _line("def refresh(key", jobs)
    outer = _line("with pool.lease():", jobs, after=refresh)
    assert source.within(jobs, outer) == ()
    assert source.within(jobs, _line("enrich(key)", jobs, after=refresh)) == ("pool.lease()",)
    write = _line("f.write(", jobs)
    assert source.within(jobs, write) == ("open(ready_file, 'a')",)  # as ast.unparse writes it


def test_a_file_asked_for_by_many_threads_at_once_is_built_once(tmp_path: Path) -> None:
    """The sampler's threads read the ranks of a job together and ask for the same files at
    once: one build per version, the others wait for it and share it."""
    from concurrent.futures import ThreadPoolExecutor

    from hangscope.collect.source import _per_version

    path = tmp_path / "train.py"
    path.write_text("import threading\nlock = threading.Lock()\n")
    builds: list[bytes] = []
    started = threading.Event()

    def build(source: bytes) -> int:
        builds.append(source)
        started.set()
        time.sleep(0.2)  # long enough that every other thread asks while this one builds
        return len(source)

    cache: dict[tuple[str, int, int], int] = {}
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(_per_version, str(path), cache, build, -1)
        assert started.wait(10)
        rest = [pool.submit(_per_version, str(path), cache, build, -1) for _ in range(7)]
        found = [first.result(), *(f.result() for f in rest)]
    assert found == [len(path.read_bytes())] * 8
    assert len(builds) == 1
    path.write_text("changed = True\n")  # a new version is built again
    assert _per_version(str(path), cache, build, -1) == len(b"changed = True\n")
    assert len(builds) == 2
