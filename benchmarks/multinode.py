"""Multi-node benchmarks (issue 14): merge speed at 1,000 nodes, and live fan-out cost.

    python benchmarks/multinode.py merge [--nodes 1000]   # one core, no root needed
    python benchmarks/multinode.py live [--nodes 4 --nproc 4]  # root: a namespace cluster

``merge``: 1,000 node dumps of 8 ranks each, made from one real 8-rank dump of the hung gloo
job (tests/fixtures/multinode/gloo1x8-node01.json): node i holds global ranks 8i..8i+7 and
its own host name, every rank in all_reduce except the last rank of the last node (the
captured all_gather stack). Times JSON parsing and ``merge`` (analysis included), pinned to
one core. Goal: merge <= 2 s.

``live``: on a namespace cluster of N nodes x P ranks (tests/integration/cluster/), the time
of ``hangscope dump PID`` on node01 alone against ``hangscope dump PID --nodes
node[01-N]`` (every node over ssh, hangscope shipped). Goal: <= 1.5x. All nodes share this
machine's cores here, so the fan-out competes with itself for CPU, which real nodes do not.
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
    args = parser.parse_args()
    if args.what == "merge":
        bench_merge(args.nodes, args.repeat)
    else:
        bench_live(args.nodes, args.nproc, args.repeat, ["--no-native"] if args.no_native else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
