"""``hangscope watch`` beside a real vLLM server: no capture while it idles and serves, one
capture once it hangs (issue 34).

    python benchmarks/vllm_watch_soak.py [--minutes 10] [--after 20] [--json FILE]

Run with the vLLM environment's Python (``pip install -e '.[vllm]'``, docs/real-engines.md).
Builds the tiny model (tests/targets/frameworks/vllm_model.py), starts the OpenAI server (TP 1)
in its own session and ``hangscope watch API_PID --after A`` beside it, then for ``--minutes``
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
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
TARGETS = REPO / "tests" / "targets" / "frameworks"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
       "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _kill_tree(pid: int) -> None:
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.resume()
                p.kill()


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


def _clients(port: int, count: int, work: Path, tag: str) -> list[subprocess.Popen[bytes]]:
    ready = work / f"clients-{tag}"
    procs = [subprocess.Popen([sys.executable, str(TARGETS / "vllm_client.py"), str(port),
                               "loop", str(ready)], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(count)]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        lines = ready.read_text().splitlines() if ready.exists() else []
        if len(lines) >= count:
            break
        time.sleep(0.2)
    return procs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--after", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hs-soak-"))
    model = Path(os.environ.get("HS_SOAK_MODEL", "/tmp/tinyllama"))
    subprocess.run([sys.executable, str(TARGETS / "vllm_model.py"), str(model)], check=True,
                   timeout=600)
    port = _free_port()
    env = dict(os.environ, **ENV)
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "4",
         "--enforce-eager", "--host", "127.0.0.1", "--port", str(port)],
        env=env, start_new_session=True, stdout=open(work / "server.log", "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT)
    out = work / "captures"
    watch = None
    events: list[tuple[float, str]] = []
    result: dict[str, object] = {}
    start = time.monotonic()

    def note(what: str) -> None:
        events.append((round(time.monotonic() - start, 1), what))
        print(f"[{events[-1][0]:7.1f} s] {what}", flush=True)

    try:
        deadline = time.monotonic() + 600
        while not _healthy(port):
            if server.poll() is not None or time.monotonic() > deadline:
                print((work / "server.log").read_text()[-3000:], file=sys.stderr)
                return 1
            time.sleep(1)
        note("server healthy")
        watch = subprocess.Popen(
            [sys.executable, "-m", "hangscope", "watch", str(server.pid), "--after",
             str(args.after), "--out", str(out), "--max-captures", "5"],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
            stdout=open(work / "watch.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        healthy_until = time.monotonic() + args.minutes * 60
        spell = 0
        while time.monotonic() < healthy_until:
            idle = min(args.after * 3, max(0.0, healthy_until - time.monotonic()))
            note(f"idle for {idle:.0f} s")
            time.sleep(idle)  # an idle spell is what this measures: a wait, not a hope
            if time.monotonic() >= healthy_until:
                break
            spell += 1
            procs = _clients(port, 3, work, f"load{spell}")
            note("3 clients streaming")
            time.sleep(min(args.after * 2, max(0.0, healthy_until - time.monotonic())))
            for p in procs:
                p.kill()
                p.wait()
            note("clients stopped")
        healthy = _captures(out)
        note(f"healthy part over: {len(healthy)} capture(s)")
        engine = next(p for p in psutil.Process(server.pid).children(recursive=True)
                      if "EngineCore" in " ".join(p.cmdline()) or "EngineCore" in p.name())
        waiting = _clients(port, 1, work, "hung")
        engine.suspend()
        note(f"EngineCore PID {engine.pid} stopped, a client waiting")
        hang_deadline = time.monotonic() + args.after * 3 + 60
        while time.monotonic() < hang_deadline and len(_captures(out)) == len(healthy):
            time.sleep(1)
        engine.resume()
        for p in waiting:
            p.kill()
            p.wait()
        after = _captures(out)[len(healthy):]
        note(f"hang part over: {len(after)} capture(s)")
        result = {"minutes": args.minutes, "after_s": args.after, "events": events,
                  "healthy_captures": healthy, "hang_captures": after,
                  "engine_core": engine.pid,
                  "ok": not healthy and len(after) == 1
                  and engine.pid in (after[0].get("suspects") or [])}
        print(json.dumps(result, indent=1))
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=1))
        return 0 if result["ok"] else 3
    finally:
        if watch is not None:
            watch.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                watch.wait(timeout=30)
            if watch.poll() is None:
                watch.kill()
        _kill_tree(server.pid)
        print(f"logs and captures: {work}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
