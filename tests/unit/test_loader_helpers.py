"""A DataLoader worker's fd-sharing thread is a helper, not the worker's work.

tests/fixtures/loader/ddp_slow_loader.dump.json is a real dump of a torchrun job (2 gloo ranks,
2 DataLoader workers each, batches slow to fetch). Every worker runs multiprocessing's
``resource_sharer._serve`` thread (torch's file_descriptor sharing strategy), which waits in
``accept()`` for the life of the process; a chain that reached a worker ended at that thread
("waits on another process (IPC) at socket.accept") instead of the worker's own fetch.
"""

from __future__ import annotations

import json

import support

from hangscope.analyze import analyze
from hangscope.analyze.evidence.classify import is_helper
from hangscope.model import Role
from hangscope.model.serialize import from_dict


def test_the_resource_sharer_thread_is_a_helper_and_the_worker_is_its_main_thread() -> None:
    snap = analyze(from_dict(json.loads(
        (support.FIXTURES / "loader" / "ddp_slow_loader.dump.json").read_text())))
    workers = [p for p in snap.processes if p.role is Role.DATA_WORKER]
    assert len(workers) == 4
    for proc in workers:
        sharers = [t for t in proc.threads if any(
            (f.file or "").endswith("multiprocessing/resource_sharer.py") for f in t.frames)]
        assert sharers and all(is_helper(t) for t in sharers)
        assert proc.working_thread is not None and proc.working_thread.tid == proc.pid
    assert "socket.accept" not in snap.verdict.summary
