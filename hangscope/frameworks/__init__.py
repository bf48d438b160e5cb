"""One home per framework: what each one's processes, threads, helpers and waits are.

Read by collect/ (discovery's climb, through titles.py) and analyze/ alike; pure data and
small pure functions, importing only the model. No other module names a framework's process
titles, launchers, helper processes or threads: it asks :data:`FRAMEWORKS` (the signature
table of analyze/evidence/signatures.py still names library frames; see docs/architecture.md).

Modules (one per framework, each a :class:`Framework` named ``FRAMEWORK``):

sglang             ``sglang::scheduler_TP3``, tokenizer, detokenizer, DP controller over ZMQ
vllm               ``VLLM::EngineCore``, ``VLLM::Worker_TP0``, the API server, over ZMQ
torch_distributed  torchrun / torch.distributed.launch, DDP, mp.spawn, gloo and NCCL threads
deepspeed          the ``deepspeed`` launcher
accelerate         ``accelerate launch`` (torchrun underneath)
lightning          Lightning's own launcher: rank 0 is the script, the others its children
ray                ``ray::Actor.method`` workers; raylet, GCS and agents are helpers
zmq                pyzmq: its I/O threads (``ZMQbg/...``) and the poll loop of an engine
uvicorn            ASGI/HTTP servers waiting for their next request (uvicorn, aiohttp...)
dataloader         torch DataLoader workers (``pt_data_worker``)
multiprocessing    the resource tracker, spawned children, forkserver
grpc               grpcio servers: a poller and a handler pool, the main thread waiting to stop

Why one file: the :class:`Framework` record and the tables built from its fields over every
framework are one registry; each field and its table are read and changed together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hangscope.model import Frame, Role


@dataclass(frozen=True)
class ObjectWait:
    """A framework's blocking get on an object that another of its processes produces (Ray's
    ``ray.get``): where a thread waits, how the object's id is read from outside, and how the
    process that owes it is found. The wait-for graph joins the two (analyze/graph/objectedges.py).
    """

    #: (function, source path substring) of the frame a thread blocks in.
    frame: tuple[str, str]
    #: That frame's locals that hold the objects waited for.
    names: tuple[str, ...]
    #: One object in a local's repr (py-spy prints an extension object as ``<type at 0xADDR>``):
    #: group ``addr``, the object's address in the waiter's memory.
    ref: re.Pattern[str]
    #: Where the object's id lies inside the object (bytes from its address) and its size: read
    #: from the waiter's memory, which does not stop it.
    id_offset: int
    id_size: int
    #: An object's id -> the id of the producer (an actor) that owes it; None: no producer a
    #: process is known by (a plain task, which any worker may run).
    producer_of: Callable[[bytes], str | None]
    #: The log file a process of the framework holds open that says which producer it hosts
    #: (its file name; a group ``pid``: the PID of the process it is about, as another process,
    #: a log monitor, may hold it open too), and the line in it (group ``id``).
    host_log: re.Pattern[str]
    host_line: re.Pattern[bytes]
    #: (function, source path substring) of the loop a producer's process waits in for its next
    #: task: a producer whose working thread is there (innermost) runs no task, so it holds up
    #: nobody's get (the result is on its way, or the task never reached it): no edge.
    idle_frame: tuple[str, str] | None = None
    #: (function, source path substring) of the frame a producer runs a method in on a thread
    #: of its own (a threaded actor, ``max_concurrency`` > 1: its main thread stays in the
    #: task loop while pool threads run the calls): such a thread runs a task.
    method_frame: tuple[str, str] | None = None
    #: What a producer is called in a sentence ("actor").
    producer_word: str = "producer"
    #: Every (function, source path substring) a thread blocks in waiting for objects
    #: (``ray.get``'s ``get_objects``, ``ray.wait``'s ``wait``): where no object names a
    #: producer a process hosts (a plain task's result), any of the framework's workers running
    #: a task may be making it.
    waits: tuple[tuple[str, str], ...] = ()
    #: Why plain tasks can wait with no worker running them (what the scheduler needs first),
    #: and what to do: said when a get waits for tasks while every worker is idle.
    pending: str = ""
    #: The title of a worker no task or actor holds (Ray's prestarted pool: ``ray::IDLE``),
    #: and what a get waiting while every worker is one of those means: no actor holds the
    #: resources, so what the wait asks for cannot be placed as asked (said instead of
    #: ``pending``).
    unheld_title: str = ""
    unheld: str = ""
    #: A line the framework logs where what a task or actor asks for no node has (group
    #: ``ask``: the request), and what that means and what to do (``{ask}`` filled in): said
    #: in place of ``pending`` when the waiter's log has it.
    infeasible: re.Pattern[str] | None = None
    infeasible_words: str = ""
    #: Thread-name prefixes of the event loops a producer runs its async methods on (Ray's
    #: async actors: ``AsyncIO Thread: default``); with every one idle in its select while a
    #: method is in flight (``method``), the method awaits another call to the producer.
    loop_threads: tuple[str, ...] = ()
    #: The method a producer's process runs now, from its title (group ``method``; ``actor``:
    #: the producer's own name, where the title has it).
    method: re.Pattern[str] | None = None
    #: What a program calls to wait for objects (``ray.get``, ``ray.wait``), by last name;
    #: each takes its timeout as a keyword only, so a call without one waits for the objects.
    calls: tuple[str, ...] = ()
    #: What leaves a method awaiting a call nobody makes, and what to do: said when no live
    #: process of the job could make it.
    uncalled: str = ""
    #: The other cause of such a wait where the producer is the program's own (not one of the
    #: framework's, whose names start with an underscore: ray.util.queue's ``_QueueActor``):
    #: the method made that call itself, through its own handle, and the call waits in the
    #: queue behind it; and what to do.
    self_call: str = ""
    #: The call a handle's method goes through (``actor.release.remote(...)``: ``"remote"``):
    #: a program's line ``X.M.remote(`` submits M to X (``Frame.submits``).
    submit: str = ""
    #: Why a submitted method waits behind the one in flight, which awaits, and what to do:
    #: said where a waiter's own line submitted a method other than the one in flight.
    queued: str = ""
    #: Why a submitted method waits behind one in flight whose own line loops (a poll loop
    #: written as a method), and what to do: said where that method runs on the producer's
    #: only thread.
    looping: str = ""
    #: The producer's constructor (a method name, ``__init__``) that must return before any of
    #: its other methods runs, and why a method called on one still in it waits, and what to
    #: do: said where a waiter's object comes from a producer whose constructor is blocked.
    constructor: str | None = None
    constructing: str = ""
    #: Why tasks waiting in a get for tasks they submitted starve them, and what to do: said
    #: where every busy worker of the framework waits so and none computes.
    nested: str = ""
    #: Native frames (substrings) inside the producer's task loop that run a task now: with one
    #: inside the loop's frame, the worker runs a task whose Python frame is suspended (a
    #: generator between its yields), not waiting for its next task.
    running_native: tuple[str, ...] = ()
    #: A native frame (substring) in which a producer's generator task waits for its caller to
    #: consume what it yielded (backpressure), and why that waits for ever and what to do:
    #: said where the process that waits on it is the caller.
    paused_native: str | None = None
    paused: str = ""
    #: (function, source path substring) of a producer's method that returns only once every
    #: one of its consumers has called it (a barrier of calls), and why a consumer that stopped
    #: calling holds the others, and what to do: said where such a consumer idles.
    call_barrier: tuple[str, str] | None = None
    call_barrier_words: str = ""
    #: A producer's class in its process's title (group ``actor``): the consumers a barrier of
    #: calls waits for are the live processes of the callers' class that are not calling.
    title_class: re.Pattern[str] | None = None


@dataclass(frozen=True)
class StallWarning:
    """A warning a framework writes to the job's log when it sees its own parties stall (Ray
    Data's split coordinator: one consumer waits for the others past 30 s), what it means and
    what to do (``words``, formatted with the line's named groups), and the source path of the
    frames of the process that waits on it (the consumer: the suspect)."""

    line: re.Pattern[str]
    waiter_path: str
    words: str
    #: The line that says why, where another line of the log has it (a restarted actor's own
    #: last words): a pattern formatted with ``line``'s named groups (escaped) whose last
    #: match in the log is quoted, its group ``said`` where it has one.
    cause: str = ""
    #: The processes of the party the warning says dies and is started again (a title
    #: pattern formatted as ``cause``): their start-up, between two deaths, is no progress
    #: where one of them died during the dump.
    churns: str = ""


@dataclass(frozen=True)
class ForkPool:
    """A library's thread pool that a forked child inherits without its threads: its frames'
    shared object (a substring of its path), what it is, and what to do."""

    path: str
    name: str
    fix: str


@dataclass(frozen=True)
class Framework:
    """What hangscope knows of one framework. Every field is optional: a framework adds what it
    has. Matching is by substring or prefix, never by a test job's names."""

    name: str
    #: Words in a job's command lines that say it runs this framework (``job_kind``); tried in
    #: :data:`FRAMEWORKS` order, the first that matches names the job.
    job_words: tuple[str, ...] = ()
    #: Its launcher starts ranks (a job of this kind without any is missing them).
    launches_ranks: bool = False
    #: argv[0] basenames of its launchers / console scripts (a Python process by that name).
    launchers: tuple[str, ...] = ()
    #: Prefixes of the titles it sets with setproctitle: a titled process is a worker of its
    #: parent's job (discovery climbs past it) and runs Python.
    title_prefixes: tuple[str, ...] = ()
    #: (title prefix, role) of its processes that are not ranks.
    title_roles: tuple[tuple[str, Role], ...] = ()
    #: Substrings of the command line or title of its system processes: helpers, never
    #: suspects (Ray's raylet and agents, multiprocessing's resource tracker).
    helper_processes: tuple[tuple[str, Role], ...] = ()
    #: Thread-name prefixes of threads only a process inside it starts.
    thread_names: tuple[str, ...] = ()
    #: Thread-name prefixes of its helper threads (timers, keep-alives, heartbeats): they wait
    #: between beats by design, so neither their wait nor their beat says where the job is.
    helper_threads: tuple[str, ...] = ()
    #: Thread-name prefixes of its native threads that serve its own coordination (c10d's
    #: TCPStore server, answering its ranks' key gets, waits and rendezvous polls): their
    #: reads and writes are that bookkeeping, never the job's data (gloo's threads move that).
    store_threads: tuple[str, ...] = ()
    #: Thread-name prefixes of the threads that run the program's own code for it (Ray
    #: Train's ``TrainingThread`` runs the training function while the actor's main thread
    #: waits in Ray's task loop): where there is one, it says where the process is.
    work_threads: tuple[str, ...] = ()
    #: (qualified function, source path substring) of its thread pools' worker loops (AnyIO's
    #: worker threads, which run a Starlette/FastAPI app's sync endpoints): a worker waiting
    #: there for a task is plumbing; one running a task runs the program's code.
    pool_workers: tuple[tuple[str, str], ...] = ()
    #: Its native thread pools that do not survive fork (frameworks/native.py).
    fork_pools: tuple[ForkPool, ...] = ()
    #: Target functions of its helper threads that Python names after them (``Thread-2
    #: (process_output_sockets)``): an engine's I/O threads, relaying messages between its
    #: sockets and its main loop's queues, wait between messages by design.
    helper_targets: tuple[str, ...] = ()
    #: Name prefixes of its scheduler threads (Ray Data's ``StreamingExecutor-<dataset>``):
    #: their lines move as they hand the job's work to its workers, whether or not any is
    #: handed: progress only while some other process of the job progresses.
    dispatch_threads: tuple[str, ...] = ()
    #: Source paths (a substring of a frame's file) of the loop a server runs while it waits
    #: for its next request: a thread there, with nothing else to do, is idle.
    server_loop_files: tuple[str, ...] = ()
    #: (function, source path substring) of the calls a server's main thread blocks in while
    #: the framework's own threads serve (gRPC's ``wait_for_termination``).
    serve_waits: tuple[tuple[str, str], ...] = ()
    #: (the line its server logs as the application's startup begins, the line it logs once
    #: that startup completed): a server whose last such line is the first has not finished
    #: starting, and serves nothing yet (uvicorn's lifespan).
    startup_lines: tuple[str, str] | None = None
    #: (the line its server logs as its graceful shutdown waits for the open connections to
    #: close, the line it logs once the process is done): the first the last of them, it
    #: exits only when every open connection has ended (uvicorn, with no shutdown timeout).
    drain_lines: tuple[str, str] | None = None
    #: (its engine's "paused" log line, its "resumed" one): the last of them a pause means it
    #: schedules nothing until resumed (vLLM's /pause for an RL weight update).
    pause_lines: tuple[re.Pattern[str], re.Pattern[str]] | None = None
    #: Its own warnings that name a stall of its parties (analyze/rules/warned.py).
    stall_warnings: tuple[StallWarning, ...] = ()
    #: Source directories of the framework's own Python code (a path component, ``accelerate/``):
    #: plumbing, so a call site is the user's line that called into the framework.
    library_files: tuple[str, ...] = ()
    #: Source paths of its own waits for a message that poll a zmq socket between spins (vLLM's
    #: shared-memory broadcast queue: ``sched_yield`` for a while after each read, then a poll
    #: of its notify socket): a thread there waits on its zmq peers whichever phase a sample
    #: catches.
    zmq_waits: tuple[str, ...] = ()
    #: (function, source path substring) of its waits for the replies to a call it sent to its
    #: own workers (vLLM's EngineCore in ``collective_rpc``'s ``get_response``): a process
    #: there has a request in hand, it does not wait for new work.
    reply_waits: tuple[tuple[str, str], ...] = ()
    #: Names whose test in an ``if`` says which rank runs its body (``trainer.is_global_zero``,
    #: ``accelerator.is_main_process``, ``dist.get_rank() == 0``): a collective in that body is
    #: called by some ranks only.
    rank_tests: tuple[str, ...] = ()
    #: Decorators whose function runs on some ranks only (Lightning's ``@rank_zero_only``,
    #: Accelerate's ``@accelerator.on_main_process``): a collective in its body is called by
    #: those ranks only, as under an ``if`` on the rank.
    rank_decorators: tuple[str, ...] = ()
    #: (qualified function, source path substring, the hook) of its own frames that call a
    #: user's hook on some ranks only while the others wait in its barrier around the call
    #: (Lightning's ``prepare_data`` on local rank 0): a collective inside that hook is called
    #: by those ranks only (Lightning#2299).
    rank_hooks: tuple[tuple[str, str, str], ...] = ()
    #: (method, source path substring of its class, what it runs, why every rank may call it)
    #: of its methods that run a collective of the ranks inside (Fabric.save ends in a
    #: barrier): called under an ``if`` on the rank, that collective pairs with the others'
    #: next one.
    collective_methods: tuple[tuple[str, str, str, str], ...] = ()
    #: Its blocking get on an object another of its processes produces.
    object_wait: ObjectWait | None = None
    #: Title prefixes of the processes that do a job's work beside its ranks or main (Ray's
    #: actor and task workers, ``ray::``): the driver only hands work out and waits for it, so
    #: the progress window watches them too, or a job that computes reads as one that waits.
    #: Its system processes stay helpers (``helper_processes``), never watched.
    work_titles: tuple[str, ...] = ()
    #: Programs (in the command line, never an option's value) of such workers before they
    #: retitle themselves: a Ray worker importing in its start-up is the job's work already.
    work_programs: tuple[str, ...] = ()
    #: (qualified function, source path substring, op) of its own frames that stand for a
    #: collective of the ranks: a wait on its handle of a collective it started without waiting
    #: (DeepSpeed ZeRO-3's parameter all_gather, where only c10d's ``Work::wait`` is below and no
    #: torch.distributed frame names the op), or a collective of its own over its workers,
    #: outside torch.distributed (Ray Train's ``report``, a barrier through an actor): a thread
    #: there waits until every rank calls the same.
    collectives: tuple[tuple[str, str, str], ...] = ()
    #: (qualified function, source path substring) of its own waits that another of its
    #: processes ends on a schedule (Ray Train's report hands its result to a queue of one
    #: that the controller drains at each poll of the workers, every 2 s), and what a thread
    #: there waits for, said as its hint: a thread there waits for the next turn, as one in
    #: ``time.sleep`` does, not for a peer.
    polled_waits: tuple[tuple[str, str], ...] = ()
    polled_why: str = ""
    #: (function, file end) of its own loops over a rank's batches (Lightning's epoch loop):
    #: a rank past such a loop, where a peer of the same code is still inside it, had fewer
    #: batches (``Frame.runs``).
    batch_loops: tuple[tuple[str, str], ...] = ()


def frame_at(function: str | None, filename: str | None,
             frames: Sequence[tuple[str, str]]) -> bool:
    """The frame (``function``, ``filename``) is one of ``frames``: (last name, path part)."""
    return function is not None and any(function.split(".")[-1] == name
                                        and path in (filename or "") for name, path in frames)


def _load() -> tuple[Framework, ...]:
    from hangscope.frameworks import (
        accelerate,
        dataloader,
        deepspeed,
        grpc,
        lightning,
        multiprocessing,
        openmp,
        ray,
        sglang,
        tokenizers,
        torch_distributed,
        uvicorn,
        vllm,
        zmq,
    )

    # The order is job_kind's: the more specific launcher first (SGLang and vLLM run
    # torch.distributed inside; a torchrun job may use multiprocessing).
    return (sglang.FRAMEWORK, vllm.FRAMEWORK, torch_distributed.FRAMEWORK,
            deepspeed.FRAMEWORK, ray.FRAMEWORK, accelerate.FRAMEWORK, lightning.FRAMEWORK,
            multiprocessing.FRAMEWORK, zmq.FRAMEWORK, uvicorn.FRAMEWORK, dataloader.FRAMEWORK,
            grpc.FRAMEWORK, tokenizers.FRAMEWORK, openmp.FRAMEWORK)


FRAMEWORKS: tuple[Framework, ...] = _load()

RANK_LAUNCHERS: frozenset[str] = frozenset(f.name for f in FRAMEWORKS if f.launches_ranks)
LAUNCHERS: frozenset[str] = frozenset(w for f in FRAMEWORKS for w in f.launchers)
TITLE_PREFIXES: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.title_prefixes)
SERVER_LOOP_FILES: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.server_loop_files)
SERVE_WAITS: tuple[tuple[str, str], ...] = tuple(w for f in FRAMEWORKS for w in f.serve_waits)
LIBRARY_FILES: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.library_files)
HELPER_THREADS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.helper_threads)
REPLY_WAITS: tuple[tuple[str, str], ...] = tuple(p for f in FRAMEWORKS for p in f.reply_waits)
HELPER_TARGETS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.helper_targets)
DISPATCH_THREADS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.dispatch_threads)
WORK_THREADS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.work_threads)
STORE_THREADS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.store_threads)
ZMQ_WAITS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.zmq_waits)
WORK_TITLES: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.work_titles)
WORK_PROGRAMS: tuple[str, ...] = tuple(p for f in FRAMEWORKS for p in f.work_programs)
BATCH_LOOPS: tuple[tuple[str, str], ...] = tuple(p for f in FRAMEWORKS for p in f.batch_loops)
COLLECTIVES: tuple[tuple[str, str, str], ...] = tuple(
    p for f in FRAMEWORKS for p in f.collectives)
POLLED_WAITS: tuple[tuple[str, str, str], ...] = tuple(
    (name, path, f.polled_why) for f in FRAMEWORKS for name, path in f.polled_waits)
STALL_WARNINGS: tuple[StallWarning, ...] = tuple(w for f in FRAMEWORKS for w in f.stall_warnings)
POOL_WORKERS: tuple[tuple[str, str], ...] = tuple(p for f in FRAMEWORKS for p in f.pool_workers)
FORK_POOLS: tuple[ForkPool, ...] = tuple(p for f in FRAMEWORKS for p in f.fork_pools)


def dispatches(thread_name: str | None) -> bool:
    """A framework's scheduler thread (``dispatch_threads``: Ray Data's executor)."""
    return bool(DISPATCH_THREADS) and (thread_name or "").startswith(DISPATCH_THREADS)


def runs_program(thread_name: str | None) -> bool:
    """A framework's thread that runs the program's own code (``work_threads``)."""
    return bool(WORK_THREADS) and (thread_name or "").startswith(WORK_THREADS)


def _looked_up(table: Sequence[tuple[str, str, str]], function: str | None,
               filename: str | None) -> str | None:
    """The third field of the (qualified function, path substring, value) row this frame is:
    the function's name, or its tail after a dot, in a file whose path holds the substring."""
    if not function:
        return None
    return next((value for name, path, value in table if path in (filename or "")
                 and (function == name or function.endswith("." + name))), None)


def collective_at(function: str | None, filename: str | None) -> str | None:
    """The op of the frameworks' own collective this frame stands for (``collectives``)."""
    return _looked_up(COLLECTIVES, function, filename)


def polled_why(function: str | None, filename: str | None) -> str | None:
    """What a thread in this frame of a framework's polled wait waits for (``polled_waits``)."""
    return _looked_up(POLLED_WAITS, function, filename)


def frames_pattern(frames: Sequence[tuple[str, ...]]) -> str:
    """A regular expression of ``function (path)`` texts (as py-spy prints a frame) matching
    the rows (qualified function, path substring, ...) of ``frames`` as :func:`_looked_up`
    does."""
    return "|".join(rf"(?:^|\.){re.escape(row[0])} \([^)]*{re.escape(row[1])}\)"
                    for row in frames) or r"(?!)"


def in_zmq_wait(location: str | None) -> bool:
    """A frame's file (or its ``func (file:line)`` label) is inside a framework's own wait for
    a message that polls a zmq socket between spins (``zmq_waits``)."""
    return bool(location) and any(w in location for w in ZMQ_WAITS)


OBJECT_WAITS: tuple[ObjectWait, ...] = tuple(
    f.object_wait for f in FRAMEWORKS if f.object_wait is not None)


#: The names programs call the frameworks' object gets by (``ObjectWait.calls``).
WAIT_CALLS: frozenset[str] = frozenset(name for w in OBJECT_WAITS for name in w.calls)
#: The calls handles' methods go through (``ObjectWait.submit``).
SUBMITS: frozenset[str] = frozenset(w.submit for w in OBJECT_WAITS if w.submit)


def object_wait_at(function: str | None, filename: str | None) -> ObjectWait | None:
    """The framework's object wait whose blocking frame this is, or None."""
    return next((w for w in OBJECT_WAITS if frame_at(function, filename, (w.frame,))), None)


def any_worker_wait(function: str | None, filename: str | None) -> ObjectWait | None:
    """The framework's object wait (``ObjectWait.waits``) a frame blocks in, or None."""
    return next((w for w in OBJECT_WAITS if frame_at(function, filename, w.waits)), None)


def in_task_loop(function: str | None, filename: str | None) -> bool:
    """A frame of a framework's loop a worker waits in for its next task (an object wait's
    ``idle_frame``): innermost there, the worker runs no task."""
    return any(frame_at(function, filename, (w.idle_frame,)) for w in OBJECT_WAITS
               if w.idle_frame is not None)


def titled_method(title: str | None) -> bool:
    """A producer's title names a method in flight (Ray's ``ray::Actor.method``)."""
    return any(w.method is not None and w.method.match(title or "") for w in OBJECT_WAITS)


def runs_method(function: str | None, filename: str | None) -> bool:
    """A frame in which a producer runs a method on a thread of its own (an object wait's
    ``method_frame``)."""
    return any(frame_at(function, filename, (w.method_frame,)) for w in OBJECT_WAITS
               if w.method_frame is not None)


def call_barrier_at(frames: Sequence[Frame]) -> ObjectWait | None:
    """The object wait whose barrier of calls (``call_barrier``) one of ``frames`` is in."""
    for frame in frames:
        for wait in OBJECT_WAITS:
            if wait.call_barrier is not None and not frame.native and frame_at(
                    frame.name, frame.file, (wait.call_barrier,)):
                return wait
    return None


RANK_TESTS: tuple[str, ...] = tuple(dict.fromkeys(p for f in FRAMEWORKS for p in f.rank_tests))
RANK_DECORATORS: tuple[str, ...] = tuple(dict.fromkeys(
    p for f in FRAMEWORKS for p in f.rank_decorators))
RANK_HOOKS: tuple[tuple[str, str, str], ...] = tuple(p for f in FRAMEWORKS for p in f.rank_hooks)
COLLECTIVE_METHODS: tuple[tuple[str, str, str, str], ...] = tuple(
    p for f in FRAMEWORKS for p in f.collective_methods)
#: (needle, role) of every framework's system processes, in the frameworks' order.
_HELPERS: tuple[tuple[str, Role], ...] = tuple(p for f in FRAMEWORKS for p in f.helper_processes)


def server_loop_pattern(extra: Sequence[str] = ()) -> re.Pattern[str]:
    """A frame label ``func (file)`` inside a server's request loop (any framework's, or the
    standard library's ``extra`` paths)."""
    paths = "|".join(re.escape(p) for p in (*extra, *SERVER_LOOP_FILES))
    return re.compile(r"\((?:[^)]*/)?(?:" + paths + r")")


def job_kind_of(text: str) -> str | None:
    """The framework whose words a job's command lines (joined) carry, or None."""
    for fw in FRAMEWORKS:
        if any(w in text for w in fw.job_words):
            return fw.name
    return None


def does_work(title: str | None) -> bool:
    """A process a framework runs the job's work in (a Ray actor or task worker), by its
    title, or its program before it retitles itself: the progress window watches it (a
    helper's title is the caller's to leave out)."""
    if not title:
        return False
    return title.startswith(WORK_TITLES) or _names_program(title, WORK_PROGRAMS) is not None


def program_of(title: str) -> str:
    """The command line but its options: a program's name is never an option's value (a Ray
    worker not yet retitled is ``python .../default_worker.py --raylet-name=.../raylet``)."""
    return " ".join(word for word in title.split() if not word.startswith("-"))


def _names_program(title: str, needles: Sequence[str]) -> str | None:
    """The first of ``needles`` in the title's :func:`program_of`, or None. The title is
    split only where a needle is in it at all (asked of every process of a job)."""
    if not any(n in title for n in needles):
        return None
    program = program_of(title)
    return next((n for n in needles if n in program), None)


def helper_role(title: str) -> Role | None:
    """The role of a framework's system process by its title or command line (its
    :func:`program_of`: a worker whose options name the raylet's socket is no raylet), or
    None."""
    found = _names_program(title, tuple(n for n, _ in _HELPERS))
    return dict(_HELPERS)[found] if found is not None else None


def title_role(title: str) -> Role | None:
    """The role a framework's title gives a process that is not a rank, or None."""
    for fw in FRAMEWORKS:
        for prefix, role in fw.title_roles:
            if title.startswith(prefix):
                return role
    return None


def distributed_thread(name: str | None) -> bool:
    """A thread only a process inside a framework's process group starts (gloo, NCCL)."""
    from hangscope.frameworks.torch_distributed import FRAMEWORK as TD

    return bool(name and name.startswith(TD.thread_names))
