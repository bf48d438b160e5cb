"""Whom the live pipeline asks for ``py-spy dump --locals``, and what their locals say.

Pure: the sampler calls these with the merged (unclassified) processes; collect/waits.py only
runs py-spy for the PIDs named here and hands the JSON back to :func:`interpret`.

A thread blocked in a framework's get on an object another process produces (Ray's
``ray.get``): the frame's locals name each object's address, and the object's id is read from
the waiter's memory through ``peek`` (the sampler's collect/procfs.py ``read_memory``). What
the frame, the locals and the id's bytes are is the framework's (frameworks/ ``ObjectWait``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hangscope.analyze.evidence.classify import classify_process
from hangscope.analyze.evidence.locks import filelock_path, polls_filelock
from hangscope.analyze.evidence.p2p import in_p2p, in_rooted, p2p_call_of_thread, rooted_root
from hangscope.analyze.evidence.pylocals import frame_locals, thread_frames
from hangscope.analyze.evidence.store_key import LineText, store_keys, store_op, waits_in_store
from hangscope.analyze.evidence.working import notified_wait
from hangscope.analyze.evidence.world import in_init, init_args, init_store
from hangscope.frameworks import ObjectWait, object_wait_at
from hangscope.model import Process, Thread
from hangscope.model.waits import LocalsRead, ThreadObjects

#: (pid, address, size) -> those bytes of the process's memory, or None.
Peek = Callable[[int, int, int], "bytes | None"]

#: At most this many objects of one wait are read (a get on a list of 10,000 refs: the first
#: ones name its producers as well as all would).
MAX_OBJECTS = 16


def _in_object_get(thread: Thread) -> bool:
    return any(object_wait_at(f.name, f.file) is not None for f in thread.frames if not f.native)


def waits_for_object(proc: Process) -> bool:
    """Its working thread is blocked in a framework's object get."""
    thread = proc.working_thread
    return thread is not None and _in_object_get(thread)


def feeds_by_object(proc: Process) -> bool:
    """Its working thread waits on a hand-off from its own process while another of its
    threads blocks in a framework's object get (the feeder's objects are in its locals)."""
    thread = proc.working_thread
    return thread is not None and notified_wait(thread) is not None and any(
        t.tid != thread.tid and not t.helper and _in_object_get(t) for t in proc.threads)


def _wait_frame(frames: Sequence[Mapping[str, object]]
                ) -> tuple[ObjectWait, Mapping[str, object]] | None:
    for frame in frames:
        wait = object_wait_at(str(frame.get("name") or ""), str(frame.get("filename") or ""))
        if wait is not None:
            return wait, frame
    return None


def awaited_objects(pid: int, threads: Sequence[object], tid: int | None,
                    peek: Peek | None) -> tuple[str, ...]:
    """The hex ids of the objects thread ``tid`` of ``pid`` waits for: the addresses its wait
    frame's locals name, and the id each object holds in memory."""
    return _objects_in(pid, thread_frames(threads, tid), peek)


def _objects_in(pid: int, frames: Sequence[Mapping[str, object]],
                peek: Peek | None) -> tuple[str, ...]:
    """:func:`awaited_objects` of one thread's frames in a ``--locals`` dump."""
    found = _wait_frame(frames) if peek is not None else None
    if found is None or peek is None:
        return ()
    wait, frame = found
    values = frame_locals(frame)
    addresses = dict.fromkeys(int(m.group("addr"), 16) for name in wait.names
                              for m in wait.ref.finditer(str(values.get(name) or "")))
    ids: list[str] = []
    for address in list(addresses)[:MAX_OBJECTS]:
        raw = peek(pid, address + wait.id_offset, wait.id_size)
        if raw is not None:
            ids.append(raw.hex())
    return tuple(ids)


def other_objects(pid: int, threads: Sequence[object], tid: int | None,
                  peek: Peek | None) -> tuple[ThreadObjects, ...]:
    """The objects each thread but ``tid`` of ``pid`` waits for in a framework's get."""
    found = []
    for thread in threads:  # (each thread's own frames: no search of the dump per thread)
        other = thread.get("os_thread_id") if isinstance(thread, Mapping) else None
        frames = thread.get("frames") if isinstance(thread, Mapping) else None
        if not isinstance(other, int) or other == tid or not isinstance(frames, list):
            continue
        objects = _objects_in(pid, [f for f in frames if isinstance(f, Mapping)], peek)
        if objects:
            found.append(ThreadObjects(other, objects))
    return tuple(found[:MAX_OBJECTS])


def wants_locals(proc: Process) -> bool:
    """Its working thread polls a filelock, waits in a point-to-point op, in a store
    get/wait (the key is in its caller's locals), in a framework's get of an object another
    process produces (the objects are in that frame's locals; or another thread is, which
    its working thread waits on), inside
    ``init_process_group`` (its rank and world size are its arguments) or in a collective
    with one root (the root it names)."""
    # Never a process in D: a ptrace attach to it may wait for the kernel (live/sampler.py).
    return not proc.is_exited and proc.state != "D" and (
        polls_filelock(proc) or in_p2p(proc) or waits_in_store(proc)
        or waits_for_object(proc) or feeds_by_object(proc) or in_init(proc) or in_rooted(proc))


def locals_wanted(procs: Sequence[Process]) -> tuple[tuple[int, ...], dict[int, int | None],
                                                  dict[int, str]]:
    """(PIDs to ask, PID -> the working thread whose locals matter, PID -> the store call
    its working thread is blocked in)."""
    # Classified here (pure, ~µs a process) for the working thread; analyze() does it again.
    asked = [c for p in procs if wants_locals(c := classify_process(p))]
    ops = {p.pid: op for p in asked if (op := store_op(p.working_thread)) is not None}
    return tuple(p.pid for p in asked), {p.pid: p.working_tid for p in asked}, ops


def interpreter(tids: dict[int, int | None], ops: dict[int, str] | None = None,
                line_text: LineText | None = None, peek: Peek | None = None,
                ) -> Callable[[int, Sequence[object]], LocalsRead]:
    """What a process's ``--locals`` say about the thread ``tids`` names (``line_text``
    reads a frame's source line: the sampler's collect/source.py ``line_text``; ``peek`` its
    memory: collect/procfs.py ``read_memory``)."""
    def interpret(pid: int, threads: Sequence[object]) -> LocalsRead:
        tid = tids.get(pid)
        op = (ops or {}).get(pid)
        keys = store_keys(threads, tid, line_text, op) if op and line_text else ()
        rank, world = init_args(threads, tid)
        return LocalsRead(pid, lock_file=filelock_path(threads, tid),
                          p2p=p2p_call_of_thread(threads, tid), store_keys=keys,
                          objects=awaited_objects(pid, threads, tid, peek),
                          init_rank=rank, init_world=world, init_store=init_store(threads, tid),
                          root=rooted_root(threads, tid),
                          thread_objects=other_objects(pid, threads, tid, peek))
    return interpret
