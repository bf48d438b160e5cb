"""Real Ray actors (``ray.init(num_cpus=2)`` in this driver) run as ``python ray_jobs.py MODE
READY_FILE WORKDIR``.

The driver starts Ray's own processes (GCS, raylet, agents, monitors) as its children, and
each actor runs in a worker titled ``ray::Class.method``. Each actor and the driver append
``"<pid> <tag>"`` to READY_FILE once in their final state. Modes:

- ``cycle``     two actors ``ray.get`` each other's results inside a method: an actor runs one
                method at a time, so neither result is ever computed (ray-project/ray#3307,
                "Hanging code example": a Coordinator and a Server that call each other). The
                driver then waits on the first actor, a victim.
- ``chain_ok``  the healthy twin: in a loop, the driver ``ray.get``s a method of one actor
                that ``ray.get``s a result the other computes for a while and returns
                (progressing, not hung).
- ``collective_extra`` two actors in a ``ray.util.collective`` gloo group all-reduce their
                stats key by key; rank 0 has one key more (a critic's loss) and all-reduces it
                alone, while rank 1's step has returned (OpenRLHF#135; blind round 30's 04):
                rank 0 waits in an all_reduce its peer never calls.
- ``idle``      the other twin: both actors alive and idle, the driver sleeps with
                no work handed out (nothing is stuck, nobody is to blame).
- ``idle_event`` a serve-forever driver: both actors idle, the driver's main thread parked on
                a bare ``threading.Event().wait()`` that no thread will set (the job's work
                is in the actors; idle, nobody to blame).
- ``nested_starved`` two plain tasks that each ``ray.get`` a nested task, every slot of the
                resource both need (``slot``: 2) held by a parent: the nested tasks stay
                pending for ever (ray-project/ray#231, "remote functions calling other remote
                functions and getting the results"; ray#25239 with a placement group).
- ``queue_short`` a producer task puts three shards on a ``ray.util.queue.Queue`` and
                returns; the consumer task takes one more, the end marker the producer never
                puts; the driver waits on the consumer's result (ray-project/ray#19416,
                "Ray sometimes hangs when using Queue").
- ``callback``  a single-threaded actor's method starts two plain tasks and ``ray.get``s their
                results; each task reports back to the actor (``ray.get`` of a method of it),
                which queues behind the method still running: the actor waits for its tasks,
                they wait for it (Ray's "Actor Task Execution Order"; ray-project/ray#2331;
                blind round 20's 03). The driver waits on the method, a victim.
- ``callback_concurrent`` the twin: the same actor with ``max_concurrency=4``: the reports run
                beside the method, which returns; the driver asks again and again
                (progressing).
- ``rate_limited`` an actor calls an outside API at most once a second: each call sleeps
                what is left of that second (one ``time.sleep``, in no loop of its code), and
                the driver gets each result in turn (Ray's "calling ray.get in a loop"
                anti-pattern; blind round 21's 07): slow, progressing.
- ``flag_poll`` the twin that hangs: the actor's method polls a flag nobody sets, a
                ``while`` that sleeps between checks; the driver waits on it.
- ``infeasible`` the driver creates an actor that asks for a GPU (``num_gpus=1``) of a
                CPU-only cluster and waits on its first call: Ray never places it, and only
                its autoscaler says why, in the driver's log (ray-project/ray#45909, "Make
                infeasible tasks error much more obvious"; blind round 22's 03).
- ``placement`` the driver asks for a placement group of two one-CPU bundles on nodes of
                their own (``STRICT_SPREAD``) on this one-node cluster and waits for it to be
                ready: it stays pending for ever while Ray's idle pool waits
                (ray-project/ray#27287; blind round 25's 02).
- ``semaphore`` an async actor used as a semaphore (one permit, ``max_concurrency=1``): the
                driver takes the permit, a second ``acquire`` awaits it and holds the actor's
                only slot, and the driver's ``release`` waits in the actor's queue behind it
                (linagora/openrag#965; blind round 23's 03).
- ``queue_slow`` the twin: the producer task puts one shard, then computes for minutes
                before the next; the consumer waits for it, the driver for both (healthy:
                progressing).
- ``init_waits`` an actor's ``__init__`` waits for its loader thread, which waits for a config
                only the actor's ``configure`` method hands it; the driver calls
                ``configure`` and waits: Ray runs no method of an actor before its
                ``__init__`` returns (ray-project/ray#7379, ray#783; blind round 33's 03).
- ``init_slow`` the twin: the loader computes its table for an hour; the constructor waits
                for work being done (healthy: progressing).
- ``publish_locked`` a threaded actor (``max_concurrency=4``) publishes weights under its lock
                and, still holding it, ``ray.get``s each replica's sync, which pulls its
                shard back from the store: the store's ``get_shard`` waits for the lock on
                another of its threads (verl#7423; blind round 36's 06).
- ``publish_staged`` the twin: the store stages the version under the lock, releases it, then
                waits for the syncs; version after version (progressing).
- ``poll_loop`` a plain actor's ``run`` method is a poll loop (``while True:`` a ``ray.get``
                of the next task from a feed actor, then run it); the driver asks the same
                actor how many it ran: Ray runs a plain actor's calls one at a time, so the
                question waits behind ``run`` for ever (Ray's "Using asyncio to run actor
                methods concurrently"; ray-project/ray#20475; blind round 37's 02).
- ``batch_loop`` the twin: ``run`` is a ``for`` over a batch that ends (a million tasks):
                the question waits for work being done (healthy: progressing).
- ``poll_driver`` healthy: the driver calls a quick method of an actor, waits for its result
                (``ray.get``, no timeout), sleeps 0.2 s, and again: the dump catches it in the
                sleep, the window inside the get now and then (progressing; it read "all
                waiting" where the dump caught the sleep).
- ``generator_held`` a streaming generator task (``num_returns="streaming"``) with
                backpressure (``_generator_backpressure_num_objects=2``) reads shards; the
                driver first waits for it to finish (``ray.get(gen.completed())``) and only
                then would iterate it: the generator pauses once two shards are unconsumed
                and never completes (ray-project/ray#40285; blind round 35's 05).
- ``generator_read`` the twin: the driver reads each shard as it comes, half a second
                apart; the generator waits for room between shards (healthy: progressing).
- ``setup_serial`` the driver sets up a torch.distributed gloo group of two actors one member
                at a time (``for w in workers: ray.get(w.setup.remote(...))``): the first
                actor's ``init_process_group`` waits for the second, whose ``setup`` the loop
                never submits (blind round 39's 05; ray-project/ray#3307).
- ``restart_loop`` an actor (``max_restarts=-1, max_task_retries=-1``) whose ``__init__``
                reads a truncated config, prints why and calls ``sys.exit(1)`` (a CLI
                helper's habit): Ray takes the exit for a crash and restarts the actor for
                ever, retrying its calls each time; the driver waits in ``ray.get`` for
                ever (ray-project/ray PR #31626, ray#6612; blind round 43's 06).
- ``restart_once`` the twin: the same actor finds the config truncated the first time only
                (a previous step still writing it); restarted once, it serves the driver's
                calls in a loop (healthy: progressing).
- ``setup_together`` the twin: both setups submitted, then got together; each actor then
                all-reduces a small tensor every 50 ms (healthy: progressing).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


def ready(path: str, tag: str, pid: int | None = None) -> None:
    with open(path, "a") as f:
        f.write(f"{pid or os.getpid()} {tag}\n")


class Peer:
    """What both actors of a mode can do (two classes, so the verdict's titles tell them
    apart)."""

    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file

    def call_peer(self, peer: object, tag: str) -> str:
        import ray

        ready(self.ready_file, tag)
        # Both actors inside this method before either calls the other: Ray orders no tasks
        # from two callers, so the peer could otherwise run the echo first and both return.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not {"planner", "executor"} <= {
                line.split()[-1] for line in Path(self.ready_file).read_text().splitlines()
                if line.strip()}:
            time.sleep(0.02)
        return ray.get(peer.echo.remote(tag))  # type: ignore[attr-defined]

    def relay(self, worker: object, step: int) -> int:
        import ray

        if step == 3:
            ready(self.ready_file, "planner")
        return ray.get(worker.compute.remote(step))  # type: ignore[attr-defined]

    def compute(self, step: int) -> int:
        # A short computation per call: the caller waits on it, and it always returns.
        end, total = time.monotonic() + 0.05, 0
        while time.monotonic() < end:
            total += step
        return total

    def echo(self, text: str) -> str:
        return text

    def ping(self) -> int:
        return os.getpid()


class Planner(Peer):
    pass


class Executor(Peer):
    pass


class ShardCoordinator:
    """Hands out shards as plain tasks and collects their reports."""

    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file
        self.reports = 0

    def run(self, me: object, shards: int, once: bool) -> int:
        import ray

        task = ray.remote(shard_task)  # type: ignore[call-overload]
        refs = [task.remote(me, shard, self.ready_file, once) for shard in range(shards)]
        if once:
            ready(self.ready_file, "coordinator")
        return sum(ray.get(refs))

    def report(self, shard: int) -> int:
        self.reports += 1
        return shard

    def ping(self) -> int:
        return os.getpid()


class RateLimited:
    """Calls an outside API at most once a second (a client-side rate limit)."""

    def __init__(self) -> None:
        self.last = 0.0
        self.ready = False

    def embed(self, batch: list[int]) -> int:
        wait = 1.0 - (time.monotonic() - self.last)
        if wait > 0:
            time.sleep(wait)
        self.last = time.monotonic()
        return sum(batch)

    def wait_ready(self) -> int:
        while not self.ready:  # nobody sets it: the driver never calls a setter
            time.sleep(0.25)
        return 1

    def ping(self) -> int:
        return os.getpid()


class Gate:
    """A semaphore as an async actor: acquire awaits a permit that release gives back."""

    def __init__(self, ready_file: str) -> None:
        import asyncio

        self.ready_file = ready_file
        self.permits = 1
        self.changed = asyncio.Condition()

    async def acquire(self, who: str) -> int:
        async with self.changed:
            if self.permits == 0:
                ready(self.ready_file, "gate")  # it waits, holding the actor's only slot
            await self.changed.wait_for(lambda: self.permits > 0)
            self.permits -= 1
            return os.getpid()

    async def release(self, who: str) -> None:
        async with self.changed:
            self.permits += 1
            self.changed.notify_all()


class WeightStore:
    """An async actor (it has async methods) with one plain method: Ray runs that ``def`` on
    the actor's event loop too (ray#44454), so its blocking wait holds the loop, and the async
    ``publish`` that would notify it never runs."""

    def __init__(self, ready_file: str) -> None:
        import threading

        self.ready_file = ready_file
        self.version = 0
        self.changed = threading.Condition()

    async def publish(self, version: int) -> None:
        with self.changed:
            self.version = version
            self.changed.notify_all()

    def wait_for_version(self, version: int) -> int:
        with self.changed:
            ready(self.ready_file, "store")
            self.changed.wait_for(lambda: self.version >= version)
            return self.version


class ShardStore:
    """The trainer's weights, in shards the rollout replicas pull (a threaded actor)."""

    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file
        self._lock = threading.Lock()
        self.version, self.shards = 0, {}

    def publish(self, replicas: list, staged: bool) -> int:
        import ray

        with self._lock:  # readers never see a half-published version
            self.version += 1
            self.shards = {i: [self.version] * 64 for i in range(4)}
            if not staged:
                ready(self.ready_file, "store")
                ray.get([r.sync.remote(self.version) for r in replicas])
        if staged:
            ray.get([r.sync.remote(self.version) for r in replicas])
        return self.version

    def get_shard(self, index: int) -> list[int]:
        with self._lock:
            return self.shards[index]


class Replica:
    def __init__(self, store: object) -> None:
        self.store = store

    def sync(self, version: int) -> int:
        import ray

        shards = ray.get([self.store.get_shard.remote(i) for i in range(4)])  # type: ignore[attr-defined]
        return sum(len(s) for s in shards)


class FeatureTable:
    """An actor whose constructor starts a loader thread and waits until it has loaded; the
    loader waits for a config only ``configure`` hands it (``init_waits``: Ray runs no method
    before ``__init__`` returns, ray#7379), or builds its table at once and computes for a
    while (``init_slow``: a long constructor, healthy)."""

    def __init__(self, ready_file: str, mode: str) -> None:
        self.config: dict[str, int] = {}
        self.configured, self.loaded = threading.Event(), threading.Event()
        self.table: list[int] = []
        threading.Thread(target=self._load, args=(mode,), name="table-loader",
                         daemon=True).start()
        ready(ready_file, "table")
        self.loaded.wait()  # usable as soon as the handle resolves

    def _load(self, mode: str) -> None:
        if mode == "init_waits":
            self.configured.wait()  # set by configure(), which cannot run yet
        end = time.monotonic() + (3600 if mode == "init_slow" else 0)
        while time.monotonic() < end:  # an index built row by row
            self.table.append(len(self.table) % 97)
            if len(self.table) > 1 << 16:
                self.table.clear()
        self.loaded.set()

    def configure(self, config: dict[str, int]) -> int:
        self.config = config
        self.configured.set()
        return len(self.table)


class Scorer:
    """Loads its config in ``__init__``; a config it cannot parse ends the process
    (``sys.exit(1)``), which Ray treats as a crash and restarts per ``max_restarts``."""

    def __init__(self, config: str, once: bool) -> None:
        path = Path(config)
        try:
            self.weight = float(json.loads(path.read_text())["weight"])
        except ValueError as exc:
            print(f"[scorer] fatal: cannot load config: {exc!r}", flush=True)
            if once:  # the writer finishes the file; the restarted actor reads it whole
                path.write_text(json.dumps({"model": "scorer-v3", "weight": 0.5}))
            sys.exit(1)

    def score(self, item: int) -> float:
        return item * self.weight


def shard_task(coordinator: object, shard: int, ready_file: str, once: bool) -> int:
    import ray

    if once:
        ready(ready_file, f"shard{shard}")
    return ray.get(coordinator.report.remote(shard))  # type: ignore[attr-defined]


def parent(ready_file: str, leaf: object) -> int:
    """A task that starts a nested task and waits for it: with every slot of the resource
    both need held by such a parent, the nested tasks never get one."""
    import ray

    ready(ready_file, "parent")
    return ray.get(leaf.remote())  # type: ignore[attr-defined]


def one() -> int:
    return 1


#: The shards a streaming generator may have produced and not yet had consumed.
UNCONSUMED_MAX = 2


def read_shards(ready_file: str) -> object:
    """Shard after shard, as a dataset reader streams them; Ray pauses it inside the yield
    that leaves UNCONSUMED_MAX shards unconsumed, until the caller takes one."""
    for shard in range(1 << 30):
        if shard == UNCONSUMED_MAX - 1:
            ready(ready_file, "reader")  # this yield waits for room
        yield [_decode(shard * 100 + record)["id"] for record in range(100)]


def produce(queue: object) -> int:
    for shard in range(3):
        queue.put(shard)  # type: ignore[attr-defined]
    return 3  # (the end marker, None, is never put)


def _decode(record: int) -> dict[str, object]:
    row = {"id": record, "values": [record % 7] * 64}
    return json.loads(json.dumps(row))


def produce_slowly(queue: object) -> int:
    """Each shard takes minutes to decode: the consumer waits for the next while this works."""
    queue.put(0)  # type: ignore[attr-defined]
    end, rows = time.monotonic() + 600, 0
    while time.monotonic() < end:
        shard = [_decode(record) for record in range(2000)]
        rows += len(shard)
    queue.put(None)  # type: ignore[attr-defined]
    return rows


def consume(queue: object, ready_file: str) -> int:
    total = 0
    for _ in range(3):
        total += queue.get()  # type: ignore[attr-defined]
    ready(ready_file, "consumer")
    while (item := queue.get()) is not None:  # type: ignore[attr-defined]
        total += item
    return total


def consume_first(queue: object, ready_file: str) -> int:
    total = queue.get()  # type: ignore[attr-defined]
    ready(ready_file, "consumer")
    while (item := queue.get()) is not None:  # type: ignore[attr-defined]
        total += item
    return total


class TaskFeed:
    """Hands out the next task after a long poll's wait (a task store)."""

    def __init__(self) -> None:
        self.served = 0

    def count(self) -> int:
        self.served += 1
        return self.served

    def next_task(self) -> int:
        time.sleep(0.2)  # the long poll: the next task shows up
        self.served += 1
        return self.served


class TaskRunner:
    """A plain actor (one call at a time) whose ``run`` fetches and runs tasks in a loop."""

    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file
        self.done = 0

    def run(self, feed: object, endless: bool) -> int:
        import ray

        if endless:
            while True:  # a poll loop written as a method: it never returns
                self._execute(ray.get(feed.next_task.remote()))  # type: ignore[attr-defined]
        for _ in range(1 << 20):  # a batch that ends, after a long while
            self._execute(ray.get(feed.next_task.remote()))  # type: ignore[attr-defined]
        return self.done

    def _execute(self, task: int) -> None:
        self.done += 1
        if self.done == 3:
            ready(self.ready_file, "runner")

    def executed(self) -> int:
        return self.done


class StatsTrainer:
    """One member of a ``ray.util.collective`` gloo group; rank 0 also holds the critic."""

    def __init__(self, rank: int, ready_file: str) -> None:
        self.rank, self.ready_file = rank, ready_file

    def setup(self) -> int:
        import ray.util.collective as col

        col.init_collective_group(2, self.rank, backend="gloo", group_name="stats")
        return os.getpid()

    def train_step(self) -> int:
        import ray.util.collective as col
        import torch

        stats = ["loss", "kl"] + (["critic_loss"] if self.rank == 0 else [])
        for n, _key in enumerate(stats):
            if n == 2:  # the key only rank 0 has: its all_reduce waits for rank 1 for ever
                ready(self.ready_file, f"rank{self.rank}")
            col.allreduce(torch.ones(4), group_name="stats")
        ready(self.ready_file, f"rank{self.rank}")  # rank 1: its step returned
        return self.rank


class GroupMember:
    """One rank of a torch.distributed gloo group that the driver wires up."""

    def __init__(self, rank: int, ready_file: str) -> None:
        self.rank, self.ready_file = rank, ready_file
        ready(ready_file, f"rank{rank}")

    def setup(self, port: int) -> int:
        from datetime import timedelta

        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=self.rank,
                                world_size=2, timeout=timedelta(hours=1))
        return self.rank

    def train(self) -> None:
        import torch
        import torch.distributed as dist

        for step in range(1 << 62):
            dist.all_reduce(torch.ones(4))
            if step == 20:
                ready(self.ready_file, f"step{self.rank}")
            time.sleep(0.05)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    mode, ready_file, _workdir = sys.argv[1:4]
    import ray

    # The autoscaler's words reach the driver's log only with the workers' logs.
    ray.init(num_cpus=2, resources={"slot": 2}, include_dashboard=False,
             log_to_driver=mode in ("infeasible", "restart_loop", "restart_once"))
    if mode == "infeasible":
        trainer = ray.remote(num_gpus=1)(Planner).remote(ready_file)  # type: ignore[attr-defined]
        ref = trainer.ping.remote()
        ready(ready_file, "driver")
        ray.get(ref)  # never returns: no node has a GPU
        return
    if mode in ("restart_loop", "restart_once"):
        config = Path(_workdir) / "scorer.json"
        config.write_text('{"model": "scorer-v3", "weight": 0.')  # truncated
        scorer = ray.remote(max_restarts=-1, max_task_retries=-1)(Scorer).remote(  # type: ignore[call-overload]
            str(config), mode == "restart_once")
        if mode == "restart_loop":
            refs = [scorer.score.remote(i) for i in range(8)]
            ready(ready_file, "driver")
            ray.get(refs)  # never returns: the actor dies in __init__ at every restart
            return
        ray.get(scorer.score.remote(0))  # the restarted actor serves
        ready(ready_file, "driver")
        while True:  # one call after another, each answered at once
            ray.get([scorer.score.remote(i) for i in range(4)])
    if mode == "placement":
        from ray.util.placement_group import placement_group

        group = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
        ready(ready_file, "driver")
        ray.get(group.ready())  # never returns: one node cannot hold both bundles
        return
    if mode == "nested_starved":
        # Ray gives a blocked ray.get's CPU back (ray#1273), not a custom resource's slot (nor
        # a placement group's bundle, ray#25239): two parents hold both slots, their leaves
        # stay pending for ever.
        slot = {"num_cpus": 0, "resources": {"slot": 1}}
        leaf = ray.remote(**slot)(one)  # type: ignore[call-overload]
        parents = [ray.remote(**slot)(parent).remote(ready_file, leaf)  # type: ignore[call-overload]
                   for _ in range(2)]
        ready(ready_file, "driver")
        ray.get(parents)
        return
    if mode == "queue_short":
        from ray.util.queue import Queue

        queue = Queue()
        ray.get(ray.remote(produce).remote(queue))  # type: ignore[call-overload]
        consumer = ray.remote(consume).remote(queue, ready_file)  # type: ignore[call-overload]
        ready(ready_file, "driver")
        ray.get(consumer)
        return
    if mode == "queue_slow":
        from ray.util.queue import Queue

        queue = Queue()
        producer = ray.remote(produce_slowly).remote(queue)  # type: ignore[call-overload]
        consumer = ray.remote(consume_first).remote(queue, ready_file)  # type: ignore[call-overload]
        ready(ready_file, "driver")
        ray.get([consumer, producer])
        return
    if mode == "semaphore":
        gate = ray.remote(max_concurrency=1)(Gate).remote(ready_file)  # type: ignore[call-overload]
        ray.get(gate.acquire.remote("driver"))  # the only permit
        gate.acquire.remote("worker")  # awaits the permit: the slot is now taken
        marks = Path(ready_file)
        while not marks.exists() or not any(line.endswith(" gate")
                                            for line in marks.read_text().splitlines()):
            time.sleep(0.05)  # the actor's own ready line (the test's start deadline bounds it)
        ready(ready_file, "driver")
        ray.get(gate.release.remote("driver"))  # queued behind the waiting acquire
        return
    if mode in ("setup_serial", "setup_together"):
        members = [ray.remote(GroupMember).remote(rank, ready_file)  # type: ignore[attr-defined]
                   for rank in range(2)]
        port = _free_port()
        if mode == "setup_serial":
            ready(ready_file, "driver")
            for member in members:  # one member at a time: the first waits for the second
                ray.get(member.setup.remote(port))
        ray.get([m.setup.remote(port) for m in members])
        ready(ready_file, "driver")
        ray.get([m.train.remote() for m in members])
        return
    if mode == "collective_extra":
        trainers = [ray.remote(StatsTrainer).remote(rank, ready_file)  # type: ignore[attr-defined]
                    for rank in range(2)]
        ray.get([t.setup.remote() for t in trainers])
        steps = [t.train_step.remote() for t in trainers]
        ready(ready_file, "driver")
        ray.get(steps)  # never returns: rank 0's step waits in its all_reduce
        return
    if mode == "sync_wait":
        store = ray.remote(WeightStore).remote(ready_file)  # type: ignore[attr-defined]
        waiting = store.wait_for_version.remote(1)
        marks = Path(ready_file)
        while not marks.exists() or not any(line.endswith(" store")
                                            for line in marks.read_text().splitlines()):
            time.sleep(0.05)  # the actor's own ready line (the test's start deadline bounds it)
        store.publish.remote(1)  # queued behind the wait on the loop it would need
        ready(ready_file, "driver")
        ray.get(waiting)
        return
    if mode in ("init_waits", "init_slow"):
        table = ray.remote(FeatureTable).remote(ready_file, mode)  # type: ignore[attr-defined]
        ready(ready_file, "driver")
        ray.get(table.configure.remote({"rows": 1000}))  # init_waits: never; slow: in an hour
        return
    if mode in ("publish_locked", "publish_staged"):
        store = ray.remote(max_concurrency=4)(ShardStore).remote(ready_file)  # type: ignore[call-overload]
        replicas = [ray.remote(num_cpus=0)(Replica).remote(store)  # type: ignore[call-overload]
                    for _ in range(2)]
        staged = mode == "publish_staged"
        ray.get(store.publish.remote(replicas, True))  # the first version, staged
        ready(ready_file, "driver")
        while True:  # publish_locked: the second never returns
            ray.get(store.publish.remote(replicas, staged))
    if mode in ("generator_held", "generator_read"):
        reader = ray.remote(num_returns="streaming",  # type: ignore[call-overload]
                            _generator_backpressure_num_objects=UNCONSUMED_MAX)(read_shards)
        shards = reader.remote(ready_file)
        if mode == "generator_held":
            ready(ready_file, "driver")
            ray.get(shards.completed())  # "make sure the reader finished cleanly" first
            return
        for count, ref in enumerate(shards):
            ray.get(ref)
            if count == UNCONSUMED_MAX:
                ready(ready_file, "driver")
            time.sleep(0.5)  # each shard's rows handed on, as a trainer's step takes them
        return
    if mode == "poll_driver":
        feed = ray.remote(TaskFeed).remote()  # type: ignore[attr-defined]
        ready(ready_file, "driver")
        while True:  # a task a call, each waited for, then a pause before the next
            ray.get(feed.count.remote())
            time.sleep(0.2)
    if mode in ("poll_loop", "batch_loop"):
        feed = ray.remote(TaskFeed).remote()  # type: ignore[attr-defined]
        runner = ray.remote(TaskRunner).remote(ready_file)  # type: ignore[attr-defined]
        runner.run.remote(feed, mode == "poll_loop")
        marks = Path(ready_file)
        while not marks.exists() or not any(line.endswith(" runner")
                                            for line in marks.read_text().splitlines()):
            time.sleep(0.05)  # the runner's own ready line (the test's start deadline bounds it)
        ready(ready_file, "driver")
        ray.get(runner.executed.remote())  # queued behind run: never / once the batch ends
        return
    if mode in ("rate_limited", "flag_poll"):
        limited = ray.remote(RateLimited).remote()  # type: ignore[attr-defined]
        ready(ready_file, "actor", ray.get(limited.ping.remote()))
        if mode == "flag_poll":
            ref = limited.wait_ready.remote()
            ready(ready_file, "driver")
            ray.get(ref)
            return
        ray.get(limited.embed.remote([1, 2]))
        ready(ready_file, "driver")
        while True:  # one batch a second, each result waited for
            ray.get(limited.embed.remote([1, 2]))
    if mode in ("callback", "callback_concurrent"):
        concurrency = 4 if mode == "callback_concurrent" else 1
        coordinator = ray.remote(max_concurrency=concurrency)(ShardCoordinator).remote(
            ready_file)
        if mode == "callback":
            ready(ready_file, "driver")
            ray.get(coordinator.run.remote(coordinator, 2, True))
            return
        ready(ready_file, "coordinator", ray.get(coordinator.ping.remote()))
        ray.get(coordinator.run.remote(coordinator, 2, False))
        ready(ready_file, "driver")
        while True:  # round after round, each one answered
            ray.get(coordinator.run.remote(coordinator, 2, False))
    planner = ray.remote(Planner).remote(ready_file)
    executor = ray.remote(Executor).remote(ready_file)
    if mode == "cycle":
        planner.call_peer.remote(executor, "planner")
        executor.call_peer.remote(planner, "executor")
        ready(ready_file, "driver")
        ray.get(planner.echo.remote("from the driver"))
    elif mode == "chain_ok":
        ready(ready_file, "executor", ray.get(executor.ping.remote()))
        ready(ready_file, "driver")
        for step in range(1, 1 << 30):  # each step: the driver -> the planner -> the executor
            ray.get(planner.relay.remote(executor, step))
    elif mode == "idle":
        for tag, actor in (("planner", planner), ("executor", executor)):
            ready(ready_file, tag, ray.get(actor.ping.remote()))
        ready(ready_file, "driver")
        while True:  # a driver with nothing to hand out, as a service's parks between calls
            time.sleep(3600)
    elif mode == "idle_event":
        for tag, actor in (("planner", planner), ("executor", executor)):
            ready(ready_file, tag, ray.get(actor.ping.remote()))
        ready(ready_file, "driver")
        threading.Event().wait()  # serve forever: nothing will set it, by design
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
