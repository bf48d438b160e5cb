"""Rules key on library frames, not on user function names (issue 11, item 7).

GIVEN a real process whose threads wait (threading.Event) inside the user's own functions
named item, tolist, cpu and capture_graph WHEN hangscope dumps it THEN none is a CUDA sync and
none is "inside CUDA graph capture": each waits on a lock, as its library frames say.
"""

from __future__ import annotations

import json
from pathlib import Path

from support import dump_json, verdict_job

NAMES = ["item", "tolist", "cpu", "capture_graph"]


def test_given_user_functions_named_like_torch_syncs_then_not_a_sync(tmp_path: Path) -> None:
    with verdict_job("user_names", tmp_path, NAMES) as job:
        data = json.loads(dump_json(job.launcher))
    (proc,) = data["processes"]
    threads = {t["name"]: t for t in proc["threads"]}
    for name in NAMES:
        thread = threads[name]
        assert thread["category"] == "lock", thread
        assert thread["context"] is None, thread
        assert thread["site"].startswith(f"user_names.<locals>.{name} (verdict_jobs.py:")
