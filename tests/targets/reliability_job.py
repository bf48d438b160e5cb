"""A small multi-process job that never hangs: the target of hangscope's reliability tests.

    python reliability_job.py --ready-file F [--ranks N] [--mode busy|idle] [--threads T]
                              [--zombie] [--foreign] [--control-dir D] [--title-rank-0 TITLE]

The launcher (no ``--rank``) starts N ranks (this file again, ``--rank I`` and ``RANK=I`` in the
environment, like torchrun) and, on request, a zombie child (forked, exits at once, never
reaped), a non-Python child (``sleep``) and, in rank 0, T extra threads. Every process appends
``"<pid> <tag>"`` to the ready file once it is in its steady state: ``launcher``, ``rankI``,
``zombie``, ``foreign``. Tags are written with one ``write`` each (O_APPEND), so lines never mix.

Ranks:
* ``busy``: the main thread computes in 1 ms steps forever and a helper thread naps; every
  0.2 s the rank writes ``stats-rankI.json`` to the control dir: iterations done and the
  longest gap between two steps (how long something - py-spy - paused it), in ms.
* ``idle``: the main thread sleeps in 50 ms naps.

A rank exits (status 0) once ``<control-dir>/exit-<its pid>`` exists, which lets a test make a
rank disappear at a precise moment. Every process exits when its parent is gone, so nothing
outlives a test that was killed.

Secrets (tests/integration/test_security.py): ``--secret-thread-name NAME`` names a Python thread,
``--native-thread-name NAME`` starts a thread with no Python state (pthread_create through
ctypes) and names it with pthread_setname_np (15 bytes at most), ``--title TITLE`` sets a
rank's process title (setproctitle), ``--say TEXT`` prints TEXT to stdout (the log) at start.
``--foreign-secret S`` starts ``sh -c 'sleep 600; :' hs-secret --api-key S`` (tag ``shell``).
``--foreign-curl-password S`` starts ``sh -c 'sleep 600; :' curl -sf -u deploy:S URL``
(tag ``curl``).
Unknown arguments are accepted and ignored: they are the secrets in argv.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time


def mark_ready(path: str, tag: str, pid: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{pid or os.getpid()} {tag}\n".encode())
    finally:
        os.close(fd)


def watch(control_dir: str | None) -> None:
    """Exit when the parent is gone, or when the test asks this process to."""
    parent = os.getppid()
    me = os.getpid()
    exit_file = os.path.join(control_dir, f"exit-{me}") if control_dir else None

    def loop() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(0)
            if exit_file and os.path.exists(exit_file):
                os._exit(0)
            time.sleep(0.01)

    threading.Thread(target=loop, name="watchdog", daemon=True).start()


def start_native_thread(name: str) -> None:
    """A thread without a Python thread state, named ``name`` in /proc/PID/task/TID/comm."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    thread = ctypes.c_ulong()
    # pause(void) as the start routine: the argument is ignored and the thread sleeps forever.
    start = ctypes.cast(libc.pause, ctypes.c_void_p)
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p]
    if libc.pthread_create(ctypes.byref(thread), None, start, None) != 0:
        raise OSError("pthread_create failed")
    libc.pthread_setname_np.argtypes = [ctypes.c_ulong, ctypes.c_char_p]
    libc.pthread_setname_np(thread, name.encode()[:15])


def busy_loop(rank: int, control_dir: str | None) -> None:
    """Compute in ~1 ms steps forever; report progress and the longest pause."""
    stats = os.path.join(control_dir, f"stats-rank{rank}.json") if control_dir else None
    iterations = 0
    max_gap = 0.0
    last = time.monotonic()
    next_write = last
    while True:
        total = 0
        for i in range(3000):
            total += i * i
        now = time.monotonic()
        max_gap = max(max_gap, now - last)
        last = now
        iterations += 1
        if stats and now >= next_write:
            tmp = f"{stats}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                json.dump({"iterations": iterations, "max_gap_ms": round(max_gap * 1000, 1),
                           "t": time.time()}, fh)
            os.replace(tmp, stats)
            next_write = now + 0.2


def helper_naps() -> None:
    while True:
        time.sleep(0.02)


def rank_main(args: argparse.Namespace) -> None:
    watch(args.control_dir)
    if args.title:
        import setproctitle

        setproctitle.setproctitle(args.title)
    if args.say:
        print(args.say, flush=True)
    if args.secret_thread_name:
        threading.Thread(target=helper_naps, name=args.secret_thread_name, daemon=True).start()
    if args.native_thread_name:
        start_native_thread(args.native_thread_name)
    if args.threads:
        threading.stack_size(256 * 1024)
        never = threading.Event()
        for i in range(args.threads):
            threading.Thread(target=never.wait, name=f"pool-{i}", daemon=True).start()
        threading.stack_size(0)
    if args.mode == "busy":
        threading.Thread(target=helper_naps, name="helper", daemon=True).start()
        mark_ready(args.ready_file, f"rank{args.rank}")
        busy_loop(args.rank, args.control_dir)
    else:
        mark_ready(args.ready_file, f"rank{args.rank}")
        while True:
            time.sleep(0.05)


def launcher_main(args: argparse.Namespace, extra: list[str]) -> None:
    watch(args.control_dir)
    if args.say:
        print(args.say, flush=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    ranks = []
    for rank in range(args.ranks):
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(rank),
               "--ready-file", args.ready_file, "--mode", args.mode]
        if args.control_dir:
            cmd += ["--control-dir", args.control_dir]
        if rank == 0 and args.threads:
            cmd += ["--threads", str(args.threads)]
        if rank == 0 and args.title:
            cmd += ["--title", args.title]
        for flag in ("say", "secret_thread_name", "native_thread_name"):
            value = getattr(args, flag)
            if value:
                cmd += [f"--{flag.replace('_', '-')}", value]
        cmd += extra
        ranks.append(subprocess.Popen(
            cmd, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank),
                      "WORLD_SIZE": str(args.ranks)}))
    if args.foreign:
        foreign = subprocess.Popen(["sleep", "600"])
        mark_ready(args.ready_file, "foreign", foreign.pid)
    if args.foreign_secret:  # a shell (not Python) with a secret on its command line
        shell = subprocess.Popen(["sh", "-c", "sleep 600; :", "hs-secret", "--api-key",
                                  args.foreign_secret])
        mark_ready(args.ready_file, "shell", shell.pid)
    if args.foreign_curl_password:  # a child whose argv reads like curl -u USER:PASSWORD
        curl = subprocess.Popen(["sh", "-c", "sleep 600; :", "curl", "-sf", "-u",
                                 f"deploy:{args.foreign_curl_password}", "https://nexus.internal/x"])
        mark_ready(args.ready_file, "curl", curl.pid)
    if args.zombie:
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        mark_ready(args.ready_file, "zombie", pid)
    mark_ready(args.ready_file, "launcher")
    while True:  # like torchrun: watch the ranks, reap the ones that exit
        for proc in ranks:
            proc.poll()
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--rank", type=int)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--mode", choices=("busy", "idle"), default="busy")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--zombie", action="store_true")
    parser.add_argument("--foreign", action="store_true")
    parser.add_argument("--control-dir")
    parser.add_argument("--title")
    parser.add_argument("--say")
    parser.add_argument("--secret-thread-name")
    parser.add_argument("--native-thread-name")
    parser.add_argument("--foreign-secret")
    parser.add_argument("--foreign-curl-password")
    args, extra = parser.parse_known_args()
    if args.rank is None:
        launcher_main(args, extra)
    else:
        rank_main(args)


if __name__ == "__main__":
    main()
