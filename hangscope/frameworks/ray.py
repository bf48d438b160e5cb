"""Ray: ``ray.init()`` starts its own system processes (the GCS server, the raylet, the
dashboard and runtime-env agents, the log monitor) beside the driver; actors and tasks run in
workers titled ``ray::Actor.method`` (``ray::IDLE`` between tasks). Its system processes are
helpers: they serve the job and are never suspects.

``ray.get`` blocks in ``Worker.get_objects`` on ``ObjectRef`` objects. An ObjectID is the
24-byte TaskID of the task that returns it plus a 4-byte index, and an actor task's TaskID is 8
bytes of its own followed by the 16-byte ActorID (src/ray/common/id.h, Ray 2.60); a plain
task's TaskID carries the nil ActorID (12 bytes of 0xff, then the job's 4). Each actor's worker
logs ``Creating actor actor_id=HEX`` in its core-worker log (``python-core-worker-WID_PID.log``,
which it holds open), so the object a thread waits for names the process that owes it: two
actors that ``ray.get`` each other's results inside a method (ray#3307) wait in a cycle.

Ray Train runs a training function in each of its ``ray::RayTrainWorker`` actors, with
torch.distributed set up between them; its ``report`` is a collective of those workers."""

from __future__ import annotations

import re

from hangscope.frameworks import Framework, ObjectWait, StallWarning
from hangscope.model import Role

#: ``ray::Trainer.train``: the actor (and method) a worker runs.
TITLE = re.compile(r"^ray::(?P<actor>[A-Za-z_][\w]*)(?:\.(?P<method>[A-Za-z_]\w*))?")
#: Worker titles that run no actor.
NO_ACTOR = ("IDLE", "core_worker")

#: A plain task's ActorID: 12 bytes of 0xff, then its job's id (id.h ``ActorID::NilFromJob``).
_NIL_ACTOR_UNIQUE = b"\xff" * 12


def actor_of_object(object_id: bytes) -> str | None:
    """The hex ActorID of the actor whose task returns the 28-byte ObjectID ``object_id``;
    None for a plain task's result, or bytes that are no ObjectID."""
    if len(object_id) != 28:
        return None
    actor = object_id[8:24]  # TaskID = 8 unique bytes + ActorID (12 unique bytes + JobID)
    if actor[:12] == _NIL_ACTOR_UNIQUE or not any(actor[:12]):
        return None  # a plain task (or zeroed memory: the object was not an ObjectRef)
    return actor.hex()


OBJECT_WAIT = ObjectWait(
    frame=("get_objects", "ray/_private/worker.py"),
    names=("object_refs", "object_ref"),
    ref=re.compile(r"<ray\.ObjectRef at 0x(?P<addr>[0-9a-f]+)>"),
    # ``cdef class ObjectRef(BaseID)``: PyObject_HEAD (16 bytes), Cython's vtable pointer (8),
    # then ``CObjectID data``: its cached hash (8), then the 28 id bytes (id.h packs to 1 byte).
    id_offset=32,
    id_size=28,
    producer_of=actor_of_object,
    host_log=re.compile(r"/python-core-worker-[0-9a-f]+_(?P<pid>\d+)\.log$"),
    host_line=re.compile(rb"Creating actor actor_id=(?P<id>[0-9a-f]{32})"),
    # ``Worker.main_loop`` runs the worker's task loop (``run_task_loop``): a Python frame
    # innermost there is an actor between tasks.
    idle_frame=("main_loop", "ray/_private/worker.py"),
    # A threaded actor's calls run on its pool's threads, each inside the executor that
    # FunctionActorManager wraps every method in.
    method_frame=("actor_method_executor", "ray/_private/function_manager.py"),
    producer_word="actor",
    waits=(("get_objects", "ray/_private/worker.py"), ("wait", "ray/_private/worker.py")),
    # ``ray.get(refs, *, timeout=None)``, ``ray.wait(refs, *, ..., timeout=None)``
    calls=("get", "wait"),
    # An async actor (any ``async def`` method) runs its methods as coroutines on its own
    # loops, one thread per concurrency group (_raylet.so names them); its title names the
    # method in flight (``ray::_QueueActor.get``).
    loop_threads=("AsyncIO Thread: ",),
    method=re.compile(r"^ray::(?P<actor>[A-Za-z_]\w*)\.(?P<method>[A-Za-z_]\w*)"),
    # ray#19416, ray#6612: a producer task that raised keeps its exception in its ObjectRef,
    # logged nowhere while nothing ray.get()s it.
    uncalled=("the task or actor that should make it has gone or never started: a task that "
              "failed keeps its exception in its ObjectRef until something ray.get()s it. "
              "ray.get the producers' refs (or ray.wait on them with the consumer's), and give "
              "the wait a timeout"),
    self_call=("or the method made that call itself, through its own actor's handle "
               "(ray.get_runtime_context().current_actor): the call waits in the actor's "
               "queue behind the method, which holds the actor's only slot "
               "(max_concurrency=1); call the method directly (await self.method(...)), or "
               "raise max_concurrency"),
    submit="remote",
    # linagora/openrag#965: an async actor used as a semaphore, its acquire awaiting a
    # condition that only its release sets, with the concurrency slots all held by acquires.
    queued=("an actor runs max_concurrency calls at once (an async actor: per concurrency "
            "group), so a method that awaits a later call to the same actor holds the slot "
            "that call needs, and the later call waits in the actor's queue for ever: give "
            "the actor more concurrency (max_concurrency=...) or put the waiting method and "
            "the one that ends its wait in different concurrency groups (concurrency_groups)"),
    # Ray's "Using asyncio to run actor methods concurrently" (ray#20475): a plain actor runs
    # its calls one at a time, in order, so a method that loops (a long poll) holds them all.
    looping=("a plain actor runs its method calls one at a time, in the order they came, so a "
             "method that loops (a poll loop written as a method) holds every later call in "
             "the actor's queue until it returns, whatever the loop does. Run the loop on a "
             "thread of its own inside the actor, or make the actor threaded "
             "(max_concurrency=2 or more) or async (async def methods) so that the other "
             "calls run beside it; or make the loop return"),
    # ray#7379, ray#783: an actor's methods are queued until its creation task (__init__)
    # has returned; a constructor that waits for one of its own methods waits for ever.
    constructor="__init__",
    constructing=("Ray runs none of an actor's methods until its __init__ has returned: "
                  "every call to it waits in its queue until then, so a constructor that "
                  "waits for what a method of the same actor does (sets an Event, hands it a "
                  "config) waits for ever. Pass what it needs to the constructor, or wait for "
                  "it in a method (an async actor can await it there), not in __init__"),
    # ray#5790, ray#1920, ray#25239: a task blocked in ray.get gives back its CPU only.
    nested=("a task blocked in ray.get gives back its CPU, not its GPUs, custom resources or "
            "placement group bundle, so tasks it submitted that need what it holds wait for "
            "ever (`ray status` lists the pending demand). Ask for those resources in the "
            "tasks that use them only (num_gpus=0 for one that coordinates), or return the "
            "ObjectRefs instead of ray.get inside the task"),
    # A task runs in CoreWorker::ExecuteTask under the task loop; a streaming generator's
    # Python frame is suspended between its yields, so only the native frames say it runs.
    running_native=("CoreWorker::ExecuteTask",),
    # ray#40285: a streaming generator with backpressure (_generator_backpressure_num_objects)
    # pauses inside its yield until the caller consumes one of the objects it yielded.
    paused_native="TaskGeneratorBackpressureWaiter::WaitUntilObjectConsumed",
    # ray#62040, ray#42008: Ray Data's streaming_split coordinator starts each epoch only once
    # every split's consumer has called start_epoch (SplitCoordinator._barrier polls for them).
    call_barrier=("_barrier",
                  "ray/data/_internal/iterator/stream_split_iterator.py"),
    call_barrier_words=(
        "Ray Data's streaming_split coordinator starts an epoch only once every split's "
        "consumer asks for it, so a consumer that stops reading its split (an early stop or a "
        "break decided on one rank only, an exception caught around its loop) or reads fewer "
        "epochs than the others holds every other consumer at the next epoch for ever. Make "
        "the stop decision together (every consumer reads the same number of epochs: "
        "broadcast the decision, or let the driver decide), or give each consumer a split "
        "of its own dataset"),
    title_class=re.compile(r"^ray::(?P<actor>[A-Za-z_]\w*)"),
    paused=("a streaming generator task with backpressure (_generator_backpressure_num_objects) "
            "pauses inside its yield until its caller consumes what it yielded, so a caller "
            "that waits for it to finish first (ray.get(gen.completed())) or for an object it "
            "has not yet yielded, without iterating it, waits for ever. Iterate the generator "
            "as it yields (for ref in gen: ray.get(ref)), then check completed(); or drop the "
            "backpressure limit"),
    # ray#2541, ray#15594: actors (num_cpus=1 by default when they ask for none at creation
    # and for scheduling) hold what they asked for as long as they live.
    pending=("Ray starts a task only once the resources it asks for are free (num_cpus=1 by "
             "default), and each actor holds its own for as long as it lives: actors that "
             "hold every CPU of the cluster leave the tasks pending for ever (`ray status` "
             "lists the pending demand). Give the actors fewer CPUs (num_cpus=0 for one that "
             "mostly waits), start the cluster with more, or run the tasks before creating the "
             "actors"),
    # ray#27287, ray#47792: a placement group whose strategy the cluster cannot meet
    # (STRICT_SPREAD's bundles on as many nodes) stays pending while the pool idles.
    unheld_title="ray::IDLE",
    unheld=("no actor holds what they ask for either (the workers here are Ray's idle pool, "
            "ray::IDLE): what the wait needs cannot be placed as asked: a placement group "
            "whose strategy the cluster cannot meet (STRICT_SPREAD puts each bundle on a node "
            "of its own, STRICT_PACK every bundle on one node), or tasks asking for a "
            "resource or label no node has. `ray status` lists the pending demand and "
            "`ray.util.placement_group_table()` the pending groups; ask for what the cluster "
            "has, and wait with a timeout (pg.wait(timeout_seconds), ray.get(..., timeout=))"),
    # ray#45909, ray#18835: a task or actor that asks for what no node has (num_gpus=1 on a
    # CPU-only cluster) is never placed; the autoscaler's monitor says so in the driver's log.
    infeasible=re.compile(r"No available node types can fulfill resource request "
                          r"(?P<ask>\{[^}]*\})"),
    infeasible_words=("what they ask for, no node of this cluster has: Ray's autoscaler "
                      "logged \"No available node types can fulfill resource request {ask}\". "
                      "A task or actor that asks for more than any node has is infeasible and "
                      "waits for ever: ask for what the nodes have (num_gpus=0 on CPU-only "
                      "nodes) or add nodes that have it"),
)

#: Ray Data's ``streaming_split``: its coordinator actor starts each epoch only once every
#: split's consumer asked for it (``SplitCoordinator._barrier``), and warns after 30 s.
SPLIT_STALL = StallWarning(
    re.compile(r"StreamSplitDataIterator\(epoch=-?\d+, split=(?P<split>\d+)\) blocked waiting "
               r"on other clients"),
    "ray/data/iterator.py",  # (DataIterator: the consumer's side; the coordinator has none)
    "Ray Data's streaming_split coordinator starts an epoch only once every split's consumer "
    "reads, and split {split} waits for the others (Ray's own warning): the splits are not "
    "read at the same time (a loop that reads them one after another, or a consumer that never "
    "started). Hand each split to its own consumer (a Ray Train worker, an actor or a task) "
    "and read them all at once")

#: Ray Data drops a failed task's block where ``max_errored_blocks`` allows and says so; where
#: the task was an actor's and the actor died, a fixed-size actor pool still counts its slot
#: and hands out nothing more (ray#62746): the pipeline waits for ever.
ERRORED_BLOCKS = StallWarning(
    re.compile(r"An exception was raised from a task of operator \"(?P<op>[^\"]+)\"\. Ignoring "
               r"this exception with remaining max_errored_blocks="),
    "ray/data/_internal/execution/",  # (the driver's wait for the pipeline's output)
    "Ray Data ignored a failed task of {op} (max_errored_blocks) and its pipeline has handed "
    "out no work since: where that task's actor died (ActorDiedError in the log: the actor's "
    "own code exited or crashed), the operator's fixed-size actor pool keeps the dead actor's "
    "slot and starts no other (ray#62746). Find why the actor exited (its output is in the "
    "driver's log), and let a failure fail the job (max_errored_blocks=0) or give the pool "
    "room to start another actor (ActorPoolStrategy(min_size=..., max_size=...))")

#: ray PR #31626, ray#6612: an actor whose process dies before it serves (an exit in
#: ``__init__`` is a crash to Ray, not an error it hands the caller) is restarted per
#: ``max_restarts`` and its calls retried per ``max_task_retries``; at -1 both go on for ever,
#: the caller's ``ray.get`` with them. The raylet's words reach the driver's log
#: (``TaskManager``'s "There are N retries remaining"), and the actor's own output, prefixed
#: ``(Actor pid=N)``, says why it died.
ACTOR_RESTARTS = StallWarning(
    re.compile(r"Task (?P<actor>[A-Za-z_]\w*)\.(?P<method>[A-Za-z_]\w*) failed\. There are "
               r"infinite retries remaining, so the task will be retried\. Error: The actor is "
               r"temporarily unavailable"),
    "ray/_private/worker.py",  # (the caller's get: Worker.get_objects)
    "Ray restarts actor {actor} again and again and retries its {method} calls each time, "
    "for ever (max_restarts=-1, max_task_retries=-1), because its process dies before it "
    "serves them: an exit in __init__ (sys.exit, os._exit) or a crash is a death that Ray "
    "restarts, not an error it hands to the caller. Fix what kills it (the actor's own output "
    "in this log says why), raise an exception in __init__ instead of exiting (the calls "
    "then fail with it), and give max_restarts and max_task_retries a bound so that ray.get "
    "raises ActorDiedError instead of waiting for ever",
    # Ray prefixes a worker's output with its actor and PID, and folds repeats
    # (``[repeated 10x across cluster]``)
    cause=r"(?P<said>\({actor} pid=\d+\) .*?)(?: \[repeated \d+x across cluster\])?$",
    churns=r"^ray::{actor}(?:\.|$)",  # each incarnation: ray::Scorer, ray::Scorer.__init__
)

FRAMEWORK = Framework(
    name="ray",
    job_words=("ray::",),
    launchers=("ray",),
    title_prefixes=("ray::",),
    # The driver's own threads (ray/_private/worker.py): they relay the cluster's errors and
    # the workers' logs, and wait for them as they always do; every worker's garbage
    # collection trigger (ray/_private/gc_collect_manager.py), parked until the raylet asks.
    # Ray Train runs the training function on a thread of its own; its MonitoringThread
    # watches that thread
    work_threads=("TrainingThread",),
    # Ray Data's executor loops on its thread while its operators' actors and tasks do the
    # work: a loop that hands nothing out (a dead actor's slot still counted, ray#62746)
    # moves all the same
    dispatch_threads=("StreamingExecutor-",),
    stall_warnings=(SPLIT_STALL, ERRORED_BLOCKS, ACTOR_RESTARTS),
    helper_threads=("ray_listen_error_messages", "ray_print_logs", "PythonGCThread",
                    "MonitoringThread"),
    helper_processes=(
        # The agents retitle themselves (ray_constants.AGENT_PROCESS_TYPE_*): by the title,
        # which reads like an actor's, they are its system processes all the same.
        ("ray::DashboardAgent", Role.HELPER),
        ("ray::RuntimeEnvAgent", Role.HELPER),
        ("raylet", Role.HELPER),
        ("gcs_server", Role.HELPER),
        ("ray/dashboard/agent.py", Role.HELPER),
        ("ray/dashboard/dashboard.py", Role.HELPER),
        ("runtime_env/agent/main.py", Role.HELPER),
        ("ray/_private/log_monitor.py", Role.HELPER),
        ("ray/_private/monitor.py", Role.HELPER),
        ("ray/autoscaler/_private/monitor.py", Role.HELPER),
        # ``ray start --head --block`` watches the node's processes in a sleep loop for the
        # node's life; the client server (``ray.util.client.server``) waits for Ray clients
        ("/bin/ray start", Role.HELPER),
        ("ray.util.client.server", Role.HELPER),
        # Ray Data's stats actor, which its executor's loop calls with metrics on each turn
        # (``_record_prometheus_metric``): bookkeeping, never the job's work (a pipeline stuck
        # behind a dead actor read "progressing" from its few samples in those calls)
        ("ray::_StatsActor", Role.HELPER),
    ),
    object_wait=OBJECT_WAIT,
    # The driver hands tasks out and waits in ray.get; the work runs in these workers (its
    # agents, retitled ``ray::DashboardAgent``, are helpers by role and stay unwatched).
    work_titles=("ray::",),
    # A worker the raylet starts, until ``connect`` retitles it ``ray::IDLE``: its Python
    # start-up and a site hook (a tracer's sitecustomize) run before, seconds on a busy node,
    # while the driver's ``ray.init`` or its actor's creation waits for it.
    work_programs=("ray/_private/workers/default_worker.py",),
    # Ray Train's own code: its training function's call into it is the site.
    library_files=("ray/train/",),
    # Ray Train's own collectives over its workers, a barrier through its
    # SynchronizationActor: every worker must call ``report`` the same number of times, as
    # its docstring warns ("Otherwise, your training will hang"), as it agrees with the others
    # on the checkpoint's directory first. (Then it hands its result to a queue of one that
    # the controller drains at each poll of the workers, every 2 s: a wait for the
    # controller, not for a peer.)
    polled_waits=(("TrainContext._wait_then_report",
                   "ray/train/v2/_internal/execution/context.py"),),
    polled_why=("Waiting for Ray Train's controller to take its report: the controller "
                "takes one result from each worker per poll, every "
                "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (2 s by default), so a loop that reports "
                "more often runs at that pace: report less often (once per epoch)."),
    collectives=(
        ("TrainContext._sync_checkpoint_dir_name_across_ranks",
         "ray/train/v2/_internal/execution/context.py", "ray.train.report"),
        ("barrier", "ray/train/collective/collectives.py", "barrier"),
        ("broadcast_from_rank_zero", "ray/train/collective/collectives.py",
         "broadcast_from_rank_zero"),
    ),
)
