"""Multi-node benchmarks (issue 14): merge speed at 1,000 nodes, and live fan-out cost.

    python benchmarks/multinode.py merge [--nodes 1000]   # one core, no root needed
    python benchmarks/multinode.py live [--nodes 4 --nproc 4]  # root: a namespace cluster
    python benchmarks/multinode.py simulated [--nodes 10,100,1000]  # the coordinator at scale

``merge``: 1,000 node dumps of 8 ranks each, made from one real 8-rank dump of the hung gloo
job (tests/fixtures/multinode/gloo1x8-node01.json): node i holds global ranks 8i..8i+7 and
its own host name, every rank in all_reduce except the last rank of the last node (the
captured all_gather stack). Times JSON parsing and ``merge`` (analysis included), pinned to
one core. Goal: merge <= 2 s.

``live``: on a namespace cluster of N nodes x P ranks (tests/integration/cluster/), the time
of ``hangscope dump PID`` on node01 alone against ``hangscope dump PID --nodes
node[01-N]`` (every node over ssh, hangscope shipped). Goal: <= 1.5x. All nodes share this
machine's cores here, so the fan-out competes with itself for CPU, which real nodes do not.

``simulated``: the real coordinator (``remote.multinode.dump_everywhere``: fan-out, parse,
merge, verdict) against N simulated nodes, each a ``sh -c 'sleep D; exec cat FILE'`` whose
FILE is that node's real dump (the ``merge`` set, written once to a temporary directory) and
D its sampling time, spread over 1.0-2.5 s (the last node the slowest). Each node count runs
in a fresh process, so its peak RSS is the coordinator's own. Goals at 1,000 nodes: wall
time <= slowest node + 3 s, peak RSS <= 1 GiB, the mismatch verdict naming the last rank.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "multinode" / "gloo1x8-node01.json"
sys.path.insert(0, str(REPO))


def synthetic_nodes(count: int, template: dict) -> list[str]:
    """``count`` node dumps (JSON text) from one real 8-rank dump, renumbered per node."""
    ranks = sorted((p for p in template["processes"] if p["role"] == "rank"),
                   key=lambda p: p["rank"]["global_rank"])
    per_node = len(ranks)
    healthy_threads = ranks[0]["threads"]
    out = []
    for i in range(count):
        node = copy.deepcopy(template)
        host = f"node{i + 1:04d}"
        node["hosts"][0]["name"] = host
        for proc in node["processes"]:
            proc["host"] = host
            rank = proc.get("rank")
            if proc["role"] != "rank" or not rank:
                continue
            local = rank["global_rank"]
            rank["global_rank"] = i * per_node + local
            rank["world_size"] = count * per_node
            odd = i == count - 1 and local == per_node - 1
            if local == per_node - 1 and not odd:
                # The healthy copy of the last local rank: rank 0's all_reduce stack.
                proc["threads"] = copy.deepcopy(healthy_threads)
                proc["working_tid"] = proc["threads"][0]["tid"]
        out.append(json.dumps(node))
    return out


def bench_merge(count: int, repeat: int) -> None:
    from hangscope.analyze.merge import merge
    from hangscope.model.serialize import from_dict

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    texts = synthetic_nodes(count, json.loads(FIXTURE.read_text()))
    # CPU seconds of this process (pinned to one core): the machine may be shared, and a
    # busy neighbour would otherwise count as hangscope's time.
    parse_s, merge_s, merge_wall = [], [], []
    for _ in range(repeat):
        start = time.process_time()
        snaps = [from_dict(json.loads(t)) for t in texts]
        parse_s.append(time.process_time() - start)
        start, wall = time.process_time(), time.perf_counter()
        merged = merge(snaps)
        merge_s.append(time.process_time() - start)
        merge_wall.append(time.perf_counter() - wall)
    ranks = sum(1 for p in merged.processes if p.role == "rank")
    print(f"{count} nodes, {ranks} ranks, {len(merged.processes)} processes, one core, "
          f"CPU seconds (merge wall clock median {statistics.median(merge_wall):.2f} s)")
    print(f"  parse JSON  median {statistics.median(parse_s):.2f} s  (best {min(parse_s):.2f})")
    print(f"  merge       median {statistics.median(merge_s):.2f} s  (best {min(merge_s):.2f})"
          f"  goal <= 2 s: {'met' if statistics.median(merge_s) <= 2 else 'MISSED'}")
    print(f"  verdict: {merged.verdict.summary[:160] if merged.verdict else None}")


def bench_live(nodes: int, nproc: int, repeat: int, extra_args: list[str]) -> None:
    sys.path.insert(0, str(REPO / "tests" / "integration" / "cluster"))
    from cluster import Cluster

    hangscope = str(Path(sys.executable).parent / "hangscope")
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": "/root"}
    with Cluster(nodes, nproc) as c:
        ready = c.wait_ready(timeout=300)
        pid = str(min(int(v["pid"]) for v in ready.values() if v["host"] == "node01"))
        runs: dict[str, list[float]] = {"one node": [], f"{nodes} nodes": []}
        for _ in range(repeat):
            for label, extra in (("one node", []),
                                 (f"{nodes} nodes", ["--nodes", f"node[01-{nodes:02d}]"])):
                start = time.perf_counter()
                result = c.run_on("node01", hangscope, "dump", pid, "--format", "json",
                                  *extra_args, *extra, env=env, timeout=300)
                runs[label].append(time.perf_counter() - start)
                if not result.stdout.startswith("{"):
                    raise SystemExit(f"{label}: exit {result.returncode}: {result.stderr}")
                summary = json.loads(result.stdout)["verdict"]["summary"][:100]
        one, many = (statistics.median(v) for v in runs.values())
        print(f"{nodes} nodes x {nproc} ranks, all on this machine ({os.cpu_count()} cores) "
              f"{' '.join(extra_args)}")
        for label, values in runs.items():
            print(f"  {label:10s} median {statistics.median(values):.2f} s  "
                  f"({', '.join(f'{v:.2f}' for v in values)})")
        verdict = "met" if many / one <= 1.5 else "MISSED"
        print(f"  ratio {many / one:.2f}x  goal <= 1.5x: {verdict}")
        print(f"  last verdict: {summary}")


SLOWEST_S, FASTEST_S = 2.5, 1.0


def write_nodes(count: int, directory: Path) -> None:
    """The ``count`` node dumps as DIR/nodeNNNN.json (in a child process: the coordinator's
    peak RSS must not count the 120 MB of text the simulation is made from)."""
    for i, text in enumerate(synthetic_nodes(count, json.loads(FIXTURE.read_text()))):
        (directory / f"node{i + 1:04d}.json").write_text(text)


def node_delays(count: int) -> dict[str, float]:
    """Sampling time per node: a fixed spread over 1.0-2.5 s, the last node the slowest."""
    import random

    rng = random.Random(count)
    delays = {f"node{i + 1:04d}": round(rng.uniform(FASTEST_S, SLOWEST_S - 0.1), 2)
              for i in range(count)}
    delays[f"node{count:04d}"] = SLOWEST_S
    return delays


def simulated_one(count: int) -> dict:
    """Run the coordinator once against ``count`` simulated nodes; its numbers as a dict."""
    import resource
    import subprocess
    import tempfile

    from benchmarks.simnodes import Simulated
    from hangscope.live.sampler import SampleOptions
    from hangscope.remote import multinode
    from hangscope.remote.find import Spec
    from hangscope.remote.request import NodeRequest, Placement

    merge_s: list[float] = []
    real_merge = multinode.merge

    def timed_merge(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real_merge(*args, **kwargs)
        finally:
            merge_s.append(time.perf_counter() - start)

    multinode.merge = timed_merge  # the fan-out's time apart from the merge's

    with tempfile.TemporaryDirectory(prefix="hangscope-sim.") as tmp:
        subprocess.run([sys.executable, __file__, "write", str(count), tmp], check=True)
        delays = node_delays(count)
        transport = Simulated(directory=tmp, delays=delays)
        request = NodeRequest(Spec("name", "", "^python"), SampleOptions(),
                              Placement(transport, tuple(delays), timeout=60.0))
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start, cpu = time.perf_counter(), time.process_time()
        merged = multinode.dump_everywhere(request, None)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    verdict = merged.verdict
    suspects = sorted((p.host, p.rank.global_rank) for p in merged.processes
                      if verdict and p.rank and verdict.is_suspect(p))
    right = (verdict is not None and str(verdict.kind) == "mismatched_collectives"
             and suspects == [(f"node{count:04d}", count * 8 - 1)])
    return {"nodes": count, "wall": wall, "cpu": cpu, "merge": merge_s[0],
            "slowest": max(delays.values()),
            "rss_mib": rss / 1024, "rss_before_mib": rss_before / 1024,
            "verdict": str(verdict.kind) if verdict else None, "suspects": suspects[:3],
            "right": right, "notes": merged.notes[-1][:120]}


def bench_simulated(counts: list[int]) -> None:
    import subprocess

    print(f"coordinator vs simulated nodes (sleep {FASTEST_S}-{SLOWEST_S} s; cat a real "
          f"8-rank dump), {os.cpu_count()} CPUs")
    print("| nodes | wall | slowest node | added | of it: merge | coordinator CPU | peak RSS "
          "| verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for count in counts:
        out = subprocess.run([sys.executable, __file__, "simulated-one", str(count)],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"{count} nodes: exit {out.returncode}: {out.stderr[-2000:]}")
        r = json.loads(out.stdout.splitlines()[-1])
        added = r["wall"] - r["slowest"]
        ok = "right" if r["right"] else f"WRONG {r['verdict']} {r['suspects']}"
        print(f"| {count:,} | {r['wall']:.2f} s | {r['slowest']:.1f} s | {added:.2f} s "
              f"({'met' if added <= 3 else 'MISSED'}) | {r['merge']:.2f} s | {r['cpu']:.2f} s | "
              f"{r['rss_mib']:.0f} MiB ({'met' if r['rss_mib'] <= 1024 else 'MISSED'}; "
              f"{r['rss_before_mib']:.0f} at start) | {ok} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("merge")
    m.add_argument("--nodes", type=int, default=1000)
    m.add_argument("--repeat", type=int, default=3)
    live = sub.add_parser("live")
    live.add_argument("--nodes", type=int, default=4)
    live.add_argument("--nproc", type=int, default=4)
    live.add_argument("--repeat", type=int, default=3)
    live.add_argument("--no-native", action="store_true", help="pass --no-native to dump")
    sim = sub.add_parser("simulated")
    sim.add_argument("--nodes", default="10,100,1000", help="comma-separated node counts")
    one = sub.add_parser("simulated-one")  # one count, in a fresh process (its own peak RSS)
    one.add_argument("count", type=int)
    write = sub.add_parser("write")  # the simulated nodes' dump files, in a child process
    write.add_argument("count", type=int)
    write.add_argument("directory", type=Path)
    args = parser.parse_args()
    if args.what == "simulated":
        bench_simulated([int(n) for n in args.nodes.split(",")])
    elif args.what == "simulated-one":
        print(json.dumps(simulated_one(args.count)))
    elif args.what == "write":
        write_nodes(args.count, args.directory)
    elif args.what == "merge":
        bench_merge(args.nodes, args.repeat)
    else:
        bench_live(args.nodes, args.nproc, args.repeat, ["--no-native"] if args.no_native else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
