"""Demo: a lock-order deadlock between two threads of one process.

Thread "loader" runs ``load_shard``: takes ``index_lock``, then ``cache_lock``.
Thread "writer" runs ``flush_cache``: takes ``cache_lock``, then ``index_lock``.
A ``threading.Barrier`` after the first acquire makes sure each thread holds
its first lock before either asks for its second, so the deadlock is certain,
not a race. The main thread then blocks forever in ``Thread.join``.

No torch, no subprocesses: py-spy shows both threads idle on the second
``with ...lock:`` line and the main thread in ``join``.

Run it::

    python -m hangscope.demo.deadlock [--ready-file PATH]
    python demo/deadlock.py

With ``--ready-file`` (or ``$HANGSCOPE_DEMO_READY``) each thread appends
``"<pid> <thread> acquire <lock> holding <lock>"`` after the barrier, right
before its second (blocking) acquire.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

if __package__:
    from . import _common
else:  # run as ``python demo/deadlock.py``: demo/ is sys.path[0]
    import _common  # type: ignore[no-redef]

#: Guards the shard index; the loader takes it first.
index_lock = threading.Lock()
#: Guards the in-memory cache; the writer takes it first.
cache_lock = threading.Lock()
#: Both threads hold their first lock before either asks for the second.
both_hold_first_lock = threading.Barrier(2)

shard_index: dict[str, int] = {}
cache: dict[str, bytes] = {}


def load_shard(name: str) -> None:
    """Register a shard in the index, then cache it: index_lock -> cache_lock."""
    with index_lock:
        shard_index[name] = len(shard_index)
        both_hold_first_lock.wait()
        _common.mark_ready("loader acquire cache_lock holding index_lock")
        with cache_lock:  # DEADLOCK: "writer" holds cache_lock, wants index_lock
            cache[name] = name.encode()


def flush_cache() -> None:
    """Write the cache out, then drop flushed index entries: cache_lock -> index_lock."""
    with cache_lock:
        flushed = list(cache)
        both_hold_first_lock.wait()
        _common.mark_ready("writer acquire index_lock holding cache_lock")
        with index_lock:  # DEADLOCK: "loader" holds index_lock, wants cache_lock
            for name in flushed:
                shard_index.pop(name, None)


def loader_main() -> None:
    _common.set_thread_name("loader")
    load_shard("shard-00042")


def writer_main() -> None:
    _common.set_thread_name("writer")
    flush_cache()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hangscope.demo.deadlock",
        description="one process, two threads in a lock-order deadlock",
    )
    _common.add_ready_argument(parser)
    args = parser.parse_args(argv)
    _common.export_ready_file(args.ready_file)
    # Daemon threads so that Ctrl-C (KeyboardInterrupt in join) ends the
    # program; non-daemon ones would make interpreter shutdown wait forever.
    threads = [
        threading.Thread(target=loader_main, name="loader", daemon=True),
        threading.Thread(target=writer_main, name="writer", daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()  # HANG: neither thread ever finishes
    return 0


if __name__ == "__main__":
    _common.run_main(main)
