"""hangscope's Flight Recorder analysis side by side with PyTorch's own ``fr_trace``.

    .venv/bin/python benchmarks/fr_compare.py            # every case, then the scale run
    .venv/bin/python benchmarks/fr_compare.py --scale    # 32 ranks x 2,000 entries only

Cases: the real gloo jobs of tests/fixtures/fr_gloo, the real NCCL captures of
tests/fixtures/nccl/flight_recorder, and the built cases of tests/fr_builders.py (PyTorch's
builder shape). Each case's pickles are copied to a folder of their own and given to
``python -m torch.distributed.flight_recorder.fr_trace DIR --prefix nccl_trace_rank_
--allow-incomplete-ranks``; gloo dumps carry an unnamed pg_config (key ``''``) that fr_trace
cannot read, so it is also run on a copy whose pg_config names each group and its members
(the ranks that hold it): "fr_trace (fixed config)". Prints one row per case, and the time of
each analyser on the same 32 x 2,000 dumps (hangscope: parse + analysis, in process; fr_trace:
its whole run, less the interpreter's start measured on ``--help``).
"""

from __future__ import annotations

import argparse
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import fr_builders as b  # noqa: E402

from hangscope.analyze.evidence.collectives import analyze  # noqa: E402
from hangscope.collect import flightrec  # noqa: E402
from hangscope.model import nccl as ev  # noqa: E402

GLOO = ROOT / "tests" / "fixtures" / "fr_gloo"
NCCL = ROOT / "tests" / "fixtures" / "nccl" / "flight_recorder"
PREFIX = "nccl_trace_rank_"


def _fixed_config(obj: dict[str, Any], holders: dict[str, list[int]]) -> dict[str, Any]:
    """gloo's dump with a pg_config fr_trace can read: each group named, with its members."""
    obj = dict(obj)
    config = {}
    for e in obj.get("entries", []):
        name, desc = e["process_group"][0], e["process_group"][1]
        config[name] = {"name": name, "desc": desc, "ranks": str(sorted(holders[name]))}
    obj["pg_config"] = config
    return obj


def _write(folder: Path, dumps: dict[int, dict[str, Any]]) -> None:
    folder.mkdir(parents=True)
    for rank, obj in dumps.items():
        (folder / f"{PREFIX}{rank}").write_bytes(pickle.dumps(obj))


def _fr_trace(folder: Path) -> tuple[str, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                           str(folder), "--prefix", PREFIX, "--allow-incomplete-ranks"],
                          capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        last = [line for line in out.splitlines() if line.strip()][-1]
        return f"crash: {last[:70]}", took
    found = []
    for pattern, word in ((r"Collective sequence number: (\d+) has errors", "errors at #{}"),
                          (r"Not all ranks joining collective, sequence number: (\d+)",
                           "not all ranks joined #{}"),
                          (r"Input/output mismatch in the collective sequence number: (\d+)",
                           "a2a numel mismatch at #{}")):
        m = re.search(pattern, out)
        if m:
            found.append(word.format(m.group(1)))
    culprit = re.search(r"Culprit rank (\d+)", out)
    if culprit:
        found.append(f"culprit rank {culprit.group(1)}")
    missing = re.search(r"missing ranks: (\{[^}]*\})", out)
    if missing:
        found.append(f"missing {missing.group(1)}")
    return ("; ".join(found) or "no mismatch"), took


def _hangscope(dumps: dict[int, dict[str, Any]], cpu: bool = False) -> tuple[str, float]:
    """hangscope's conclusions and the time they took (``cpu``: this process's CPU seconds,
    which a machine shared with other work does not inflate; else wall seconds)."""
    clock = time.process_time if cpu else time.monotonic
    start = clock()
    parsed = [flightrec.parse_dump(flightrec.load_bytes(pickle.dumps(obj)), r, f"{PREFIX}{r}")
              for r, obj in dumps.items()]
    evidence = analyze(None, ev.FrReading(ev.READ, "", dumps=tuple(parsed)),
                       {r: 1000 + r for r in dumps})
    took = clock() - start
    words = [f"{c.kind} {','.join(map(str, c.ranks)) or '-'}"
             + (f" #{c.seq}" if c.seq is not None else "") for c in evidence.conclusions]
    return ("; ".join(words) or "no mismatch"), took


def _cases() -> dict[str, dict[int, dict[str, Any]]]:
    cases: dict[str, dict[int, dict[str, Any]]] = {}
    for folder in sorted(p for p in GLOO.iterdir() if p.is_dir()):
        cases[f"gloo/{folder.name}"] = {
            int(p.name[len(PREFIX):]): pickle.loads(p.read_bytes())
            for p in folder.glob(f"{PREFIX}*")}
    for folder in sorted(p for p in NCCL.iterdir() if p.is_dir()):
        cases[f"nccl/{folder.name}"] = {
            int(p.name[len(PREFIX):]): pickle.loads(p.read_bytes())
            for p in folder.glob(f"{PREFIX}*")}
    for name, build in b.CASES.items():
        cases[f"built/{name}"] = build()
    return cases


def compare() -> None:
    rows = [("case", "fr_trace", "fr_trace (fixed config)", "hangscope")]
    with tempfile.TemporaryDirectory(prefix="frcmp-") as tmp:
        for name, dumps in _cases().items():
            folder = Path(tmp) / name.replace("/", "_")
            _write(folder, dumps)
            plain, _ = _fr_trace(folder)
            fixed = "-"
            if any(obj.get("pg_config", {}).keys() == {""} for obj in dumps.values()):
                holders: dict[str, list[int]] = {}
                for r, obj in dumps.items():
                    for g in {e["process_group"][0] for e in obj["entries"]}:
                        holders.setdefault(g, []).append(r)
                _write(folder.with_name(folder.name + "_fixed"),
                       {r: _fixed_config(o, holders) for r, o in dumps.items()})
                fixed, _ = _fr_trace(folder.with_name(folder.name + "_fixed"))
            ours, _ = _hangscope(dumps)
            rows.append((name, plain, fixed, ours))
            print(" | ".join(rows[-1]), flush=True)
    del rows


def _scale_dumps(world: int = 32, entries: int = 2000) -> dict[int, dict[str, Any]]:
    """A job of ``world`` ranks, each with ``entries`` all_reduce/all_gather entries that carry
    a 12-frame stack, the last one a mismatch on rank 7."""
    dumps = b.job(world)
    stack = b.frames(*[("all_reduce", "/opt/venv/lib/python3.12/site-packages/torch/"
                        "distributed/distributed_c10d.py", 3068)]
                     + [(f"layer{i}", "/srv/job/model.py", 100 + i) for i in range(11)])
    for r in range(world):
        for i in range(entries):
            op = "all_gather" if (r == 7 and i == entries - 1) else "all_reduce"
            b.add(dumps, r, op, [[1024]], [[1024 * world]] if op == "all_gather" else None,
                  state="completed" if i < entries - 1 else "scheduled", frames=stack)
    return dumps


def scale() -> None:
    dumps = _scale_dumps()
    ours, took = _hangscope(dumps)
    _, cpu = _hangscope(dumps, cpu=True)
    print(f"hangscope, 32 ranks x 2,000 entries: {took:.2f} s wall, {cpu:.2f} s CPU (load + "
          f"parse + analysis): {ours}")
    with tempfile.TemporaryDirectory(prefix="frscale-") as tmp:
        folder = Path(tmp) / "dumps"
        _write(folder, dumps)
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                        "--help"], capture_output=True, timeout=120)
        startup = time.monotonic() - start
        answer, total = _fr_trace(folder)
        print(f"fr_trace, same dumps: {total - startup:.2f} s (its {total:.2f} s run less "
              f"{startup:.2f} s of interpreter and torch import): {answer}")
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", action="store_true", help="only the 32 x 2,000 run")
    args = parser.parse_args()
    if not args.scale:
        compare()
    scale()


if __name__ == "__main__":
    main()
