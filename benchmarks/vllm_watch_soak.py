"""``hangscope watch`` beside a real vLLM server: no capture while it idles and serves, one
capture once it hangs (issue 34).

    python benchmarks/vllm_watch_soak.py [--minutes 10] [--after 20] [--json FILE]

Run with the vLLM environment's Python (``pip install -e '.[vllm,test]'``, docs/real-engines.md).
Starts the vllm tier's server (tests/frameworks/vllm_support.py: the tiny model built here, TP
1, its whole tree killed after) and ``hangscope watch API_PID --after A`` beside it, then for
``--minutes``
alternates idle spells (longer than ``--after``: each one a stall watch must judge) and load
(three clients streaming completions, tests/targets/frameworks/vllm_client.py ``loop``). Then it
stops the EngineCore (SIGSTOP) with one client waiting and gives watch 3 x ``--after`` to
capture it; the EngineCore is resumed and everything killed at the end, whatever happened.
Prints, and writes with ``--json``: the schedule, each capture's time and verdict, and whether
the healthy part captured nothing and the hang was captured once with the EngineCore suspect.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "frameworks")]
from targets.hang_shapes import free_port  # noqa: E402
from vllm_support import clients, vllm_server  # noqa: E402


def _captures(out: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted(out.glob("*.json")):
        with contextlib.suppress(ValueError, OSError):
            data = json.loads(path.read_text())
            verdict = data.get("verdict") or {}
            found.append({"file": path.name, "mtime": path.stat().st_mtime,
                          "kind": verdict.get("kind"), "suspects": verdict.get("suspects"),
                          "summary": (verdict.get("summary") or "")[:300]})
    return found


def _fresh(path: Path) -> Path:
    """A directory of its own for one set of clients (their ready file counts its lines)."""
    path.mkdir()
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--after", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hs-soak-"))
    out = work / "captures"
    events: list[tuple[float, str]] = []
    start = time.monotonic()

    def note(what: str) -> None:
        events.append((round(time.monotonic() - start, 1), what))
        print(f"[{events[-1][0]:7.1f} s] {what}", flush=True)

    with vllm_server(work, free_port()) as srv:
        note("server healthy")
        watch = subprocess.Popen(
            [sys.executable, "-m", "hangscope", "watch", str(srv.api), "--after",
             str(args.after), "--out", str(out), "--max-captures", "5"],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
            stdout=open(work / "watch.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        try:
            healthy_until = time.monotonic() + args.minutes * 60
            spell = 0
            while time.monotonic() < healthy_until:
                idle = min(args.after * 3, max(0.0, healthy_until - time.monotonic()))
                note(f"idle for {idle:.0f} s")
                time.sleep(idle)  # an idle spell is what this measures: a wait, not a hope
                if time.monotonic() >= healthy_until:
                    break
                spell += 1
                with clients(srv, "loop", 3, _fresh(work / f"load{spell}")):
                    note("3 clients streaming")
                    time.sleep(min(args.after * 2,
                                   max(0.0, healthy_until - time.monotonic())))
                note("clients stopped")
            healthy = _captures(out)
            note(f"healthy part over: {len(healthy)} capture(s)")
            engine = psutil.Process(srv.one("VLLM::EngineCore"))
            with clients(srv, "loop", 1, _fresh(work / "hung")):
                engine.suspend()
                note(f"EngineCore PID {engine.pid} stopped, a client waiting")
                try:
                    deadline = time.monotonic() + args.after * 3 + 60
                    while time.monotonic() < deadline and len(_captures(out)) == len(healthy):
                        time.sleep(1)
                finally:
                    engine.resume()
            after = _captures(out)[len(healthy):]
            note(f"hang part over: {len(after)} capture(s)")
        finally:
            watch.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                watch.wait(timeout=30)
            if watch.poll() is None:
                watch.kill()
            print(f"logs and captures: {work}", flush=True)
    result = {"minutes": args.minutes, "after_s": args.after, "events": events,
              "healthy_captures": healthy, "hang_captures": after, "engine_core": engine.pid,
              "ok": not healthy and len(after) == 1
              and engine.pid in (after[0].get("suspects") or [])}
    print(json.dumps(result, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if result["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
