"""Helpers shared by the hangscope demo programs.

This module must stay importable both as ``hangscope.demo._common`` and as a
plain top-level ``_common`` (when a demo runs as ``python demo/NAME.py``, the
``demo/`` directory is ``sys.path[0]`` and the ``hangscope`` package may not be
installed at all). So it imports neither torch nor hangscope.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from types import FrameType, ModuleType
from typing import NoReturn

#: Environment variable naming the readiness file; the launchers export it so
#: that every rank / worker process (including torchrun's) inherits it.
READY_ENV = "HANGSCOPE_DEMO_READY"

# Keep every rank single-threaded: the demo machine may have 2 cores and we run
# 4-5 interpreters at once. Must be in the environment before torch is imported.
_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


def add_ready_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--ready-file`` (default: ``$HANGSCOPE_DEMO_READY``) to *parser*."""
    parser.add_argument(
        "--ready-file",
        default=os.environ.get(READY_ENV) or None,
        metavar="PATH",
        help=(
            "append one '<pid> <what>' line to PATH right before each process/thread "
            f"enters its hanging call (default: ${READY_ENV})"
        ),
    )


def export_ready_file(path: str | None) -> None:
    """Publish the readiness file through the environment so children inherit it."""
    if path:
        os.environ[READY_ENV] = os.path.abspath(path)


def mark_ready(what: str) -> None:
    """Append ``"<pid> <what>\\n"`` to the readiness file, if one is configured.

    One ``write`` on an ``O_APPEND`` descriptor, so lines written concurrently by
    several processes never interleave; open/close every time so nothing is
    buffered when the caller blocks forever right after.
    """
    path = os.environ.get(READY_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {what}\n".encode())
    finally:
        os.close(fd)


def limit_threads() -> None:
    """Force single-threaded math libraries (call before importing torch)."""
    for key, value in _THREAD_ENV.items():
        os.environ[key] = value


def import_torch() -> ModuleType:
    """Import torch quietly and single-threaded; return the torch module.

    The demo venv has no NumPy, and torch warns about that on import; the
    ranks must not print noise, so that one warning is filtered.
    """
    limit_threads()
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch
    import torch.distributed  # makes torch.distributed usable as an attribute

    torch.set_num_threads(1)
    return torch


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (like torchrun)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (best effort).

    Ranks blocked inside gloo would otherwise outlive a killed launcher for the
    whole one-hour collective timeout. SGLang does the same for its schedulers.
    """
    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def default_signals() -> None:
    """Let SIGINT/SIGTERM kill this process outright.

    Python's SIGINT handler only sets a flag that is checked between bytecodes;
    a rank blocked in a C++ collective never checks it, so Ctrl-C would leave it
    hanging for the full timeout.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def set_thread_name(name: str) -> None:
    """Set the OS-level name of the calling thread (visible in /proc/.../comm)."""
    if not sys.platform.startswith("linux"):
        return
    pr_set_name = 15
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_name, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def self_command(module_name: str | None, file: str) -> list[str]:
    """Command that re-runs the calling demo: ``-m <module>`` or its file path.

    *module_name* is ``__spec__.name`` (None when run as a file), so a demo
    started with ``-m hangscope.demo.X`` spawns its ranks the same way and one
    started as ``python demo/X.py`` spawns ``python demo/X.py --rank-worker``.
    """
    if module_name and module_name != "__main__":
        return [sys.executable, "-m", module_name]
    return [sys.executable, os.path.abspath(file)]


def run_main(main: Callable[[], int]) -> NoReturn:
    """Run a demo's ``main``; Ctrl-C ends it with the usual 130 and no traceback."""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


def _raise_system_exit(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into SystemExit so the launcher's ``finally`` kills its ranks.
    raise SystemExit(128 + signum)


def launch_ranks(worker_cmd: Sequence[str], nproc: int) -> int:
    """Spawn *nproc* rank processes with torchrun-style env and wait for them.

    Every rank gets RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT,
    exactly like ``torchrun --standalone`` provides. The launcher then waits on
    each child in turn (``Popen.wait``), forever if the job hangs.
    """
    signal.signal(signal.SIGTERM, _raise_system_exit)
    master_port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(nproc):
            env = dict(os.environ)
            env.update(_THREAD_ENV)
            env.update(
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE=str(nproc),
                LOCAL_WORLD_SIZE=str(nproc),
                GROUP_RANK="0",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(master_port),
            )
            procs.append(subprocess.Popen(list(worker_cmd), env=env, stdin=subprocess.DEVNULL))
        exit_code = 0
        for proc in procs:
            code = proc.wait()  # the launcher hangs here, like torchrun's agent
            exit_code = exit_code or code
        return exit_code
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            proc.wait()


def gloo_demo_main(argv: Sequence[str] | None, prog: str, description: str,
                   rank_main: Callable[[], int], module_name: str | None, file: str) -> int:
    """The launcher/worker entry point shared by the torchrun-style gloo demos.

    Without ``--rank-worker`` it spawns ``--nproc-per-node`` copies of itself with the
    torchrun environment (``launch_ranks``); with it, it runs one rank.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--rank-worker", action="store_true", help="run one rank (env: RANK, WORLD_SIZE, ...)"
    )
    parser.add_argument("--nproc-per-node", type=int, default=4, help="ranks to spawn (4)")
    add_ready_argument(parser)
    args = parser.parse_args(argv)
    export_ready_file(args.ready_file)
    if args.rank_worker:
        return rank_main()
    worker = self_command(module_name, file)
    return launch_ranks([*worker, "--rank-worker"], args.nproc_per_node)
