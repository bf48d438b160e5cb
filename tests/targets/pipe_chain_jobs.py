"""Real hung jobs whose wait chain crosses a shell, a thread pool or a detached daemon.

    python pipe_chain_jobs.py MODE READY_FILE WORKDIR [ARG]

Each process appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in
(tests/support.py running_target's handshake). Modes, each the mechanism of a real report (the
tests cite it):

- ``shell_pipe``  the parent runs ``sh -c "python ... ; echo"`` with stdout=PIPE and calls
                  Popen.wait(); the shell waits for any child (wait4(-1)); its child writes
                  1 MiB to the stdout pipe, which only the parent could read.
- ``stdin_pool``  the parent runs two children from a ThreadPoolExecutor with stdin=PIPE and
                  stdout=PIPE; each pool thread reads its child's stdout to EOF while the main
                  thread waits on the futures; each child reads its stdin to EOF, which the
                  parent never writes nor closes.
- ``flock_daemon`` the parent starts a detached daemon (its own session, parent pid 1) that
                  takes an exclusive flock on a file and waits for an Event its worker thread,
                  which dies at once, should set; then the parent's forked child blocks in
                  flock on the same file.
- ``transcode_pool`` a coordinator hands tasks to 3 forked workers over multiprocessing
                  queues (every worker inherits both queues' pipe ends) and waits for results;
                  worker 0 pipes 4 MiB into ``tr`` and reads its output only after: it blocks
                  writing tr's stdin while tr blocks writing its stdout; the other workers
                  wait for the next task.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

MODE, READY, WORKDIR = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def ready(tag: str, pid: int | None = None) -> None:
    with open(READY, "a") as f:
        f.write(f"{pid or os.getpid()} {tag}\n")


def wait_for_line(tag: str, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):  # the first ready() creates it
            for line in Path(READY).read_text().splitlines():
                pid, _, name = line.partition(" ")
                if name == tag:
                    return int(pid)
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {tag}")


def _me(mode: str, *extra: str) -> list[str]:
    return [sys.executable, __file__, mode, READY, str(WORKDIR), *extra]


# -- a shell between the waiting parent and the writer -----------------------------------

def report_builder() -> None:
    command = " ".join(f"'{a}'" for a in _me("table_writer")) + "; echo writer-exit=$?"
    shell = subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    ready("shell", shell.pid)
    wait_for_line("writer")
    ready("parent")
    shell.wait()  # never reads: the writer's stdout fills


def table_writer() -> None:
    ready("writer")
    row = b"r" * 2048 + b"\n"
    for _ in range(512):  # 1 MiB: far past the pipe's 64 KiB
        data = row
        while data:  # a write that a ptrace stop cut short goes on with the rest
            data = data[os.write(1, data):]


# -- a thread pool whose children read the stdin pipe it never closes --------------------

def grade(n: int) -> bytes:
    child = subprocess.Popen(_me("grader", str(n)), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    assert child.stdout is not None
    return child.stdout.read()  # to EOF: the child never ends


def grading_pool() -> None:
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="grade") as pool:
        futures = [pool.submit(grade, n) for n in range(2)]
        wait_for_line("grader0")
        wait_for_line("grader1")
        ready("parent")
        for future in futures:
            future.result()


def grader() -> None:
    ready(f"grader{sys.argv[4]}")
    extra = sys.stdin.read()  # stdin is a pipe: read it to EOF, as a CLI appends it
    print(len(extra))


# -- a flock held by a detached daemon whose worker died ---------------------------------

def sync_daemon() -> None:
    lock = open(WORKDIR / "shard.lock", "w")  # noqa: SIM115 (held for the daemon's life)
    fcntl.flock(lock, fcntl.LOCK_EX)
    done = threading.Event()

    def push() -> None:
        target = os.environ["SHARD_SYNC_TARGET"]  # unset: KeyError, the thread dies
        done.set()
        print(target)

    threading.Thread(target=push, name="pusher").start()
    time.sleep(0.3)  # the thread's traceback is in the log before the handshake
    ready("daemon")
    # A kill that misses it still ends it: it never outlives the test's minute.
    threading.Timer(300, lambda: os._exit(0)).start()
    done.wait()


def shard_writer() -> None:
    with open(WORKDIR / "shard.lock", "w") as lock:
        ready("waiter")
        fcntl.flock(lock, fcntl.LOCK_EX)


def shard_job() -> None:
    log = open(WORKDIR / "daemon.log", "w")  # noqa: SIM115 (the daemon's stdout)
    env = {k: v for k, v in os.environ.items() if k != "SHARD_SYNC_TARGET"}
    # The shell exits at once: the daemon, in its own session, is reparented to init.
    subprocess.run(["sh", "-c", " ".join(f"'{a}'" for a in _me("sync_daemon")) + " &"],
                   stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                   start_new_session=True, check=True)
    wait_for_line("daemon")
    # Forked without exec, as torch.multiprocessing starts ranks: a lock wait in a fork is no
    # lock inherited across it when the kernel names the lock's holder.
    child = multiprocessing.get_context("fork").Process(target=shard_writer)
    child.start()
    wait_for_line("waiter")
    ready("parent")
    child.join()


# -- a worker and its child writing each other's pipes, behind a coordinator's queues -----

def transcode_worker(tasks: multiprocessing.Queue, results: multiprocessing.Queue,
                     ) -> None:
    while True:
        item = tasks.get()
        if item != 0:
            results.put(item)
            ready(f"done{item}")
            continue
        child = subprocess.Popen(["tr", "a-z", "A-Z"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
        ready("tr", child.pid)
        ready("transcoder")
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(b"x" * (4 << 20))  # more than both pipes hold: tr fills its stdout
        child.stdin.close()
        results.put(len(child.stdout.read()))


def transcode_pool() -> None:
    context = multiprocessing.get_context("fork")
    tasks, results = context.Queue(), context.Queue()
    workers = [context.Process(target=transcode_worker, args=(tasks, results))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for item in (1, 0, 2):
        tasks.put(item)
    for tag in ("transcoder", "done1", "done2"):
        wait_for_line(tag)
    ready("coordinator")
    for _ in workers:
        results.get()


MODES = {
    "transcode_pool": transcode_pool,
    "shell_pipe": report_builder, "table_writer": table_writer,
    "stdin_pool": grading_pool, "grader": grader,
    "flock_daemon": shard_job, "sync_daemon": sync_daemon,
}

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        MODES[MODE]()
