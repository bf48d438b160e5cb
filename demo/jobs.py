"""Start the bundled demo hangs (``hangscope.demo``), wait until they hang, clean up.

Each demo is a real program that deadlocks deterministically. Right before a
process (or thread) enters its hanging call it appends ``"<pid> <what>"`` to a
*ready file*; :func:`running_demo` polls that file, so callers know the job is
hung for sure without sleeping for a guessed amount of time, and on exit kills
every process the demo started.

    with running_demo("mismatch") as job:
        ...  # job.pid is the launcher, job.ready_pids the hung ranks
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

#: Environment variable the demos read the ready-file path from.
READY_ENV = "HANGSCOPE_DEMO_READY"
DEFAULT_DEMO = "mismatch"
#: Poll interval while waiting for the ready file.
_POLL_S = 0.05
#: How long to wait for killed processes to disappear.
_REAP_TIMEOUT_S = 10.0
_LOG_TAIL_BYTES = 4000


@dataclass(frozen=True)
class DemoSpec:
    """How to launch one demo and how to tell that it is fully hung."""

    name: str
    #: One line for ``--help`` / listings.
    description: str
    #: Builds the command line, given the (absolute) ready-file path.
    build_argv: Callable[[Path], list[str]]
    #: Lines the ready file has once every process/thread is in its hanging call.
    ready_lines: int
    #: Ranks (or, for single-process demos, processes) hangscope should find.
    ranks: int

    def argv(self, ready_file: Path) -> list[str]:
        return self.build_argv(ready_file)


@dataclass(frozen=True)
class ReadyLine:
    """One ``"<pid> <what>"`` line of the ready file."""

    pid: int
    what: str


@dataclass
class DemoJob:
    """A demo that has reached its hang; valid inside :func:`running_demo`."""

    name: str
    #: The top process (launcher, torchrun agent, or the only process).
    pid: int
    #: Distinct pids from the ready file, in file order.
    ready_pids: list[int]
    #: Combined stdout/stderr of the whole job.
    log: Path
    expected_ranks: int
    ready_file: Path = field(default_factory=Path)
    ready: list[ReadyLine] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)

    def pid_of(self, tag: str) -> int:
        """Pid of the first ready line whose words include *tag* (e.g. ``"rank3"``)."""
        for line in self.ready:
            if tag in line.what.split():
                return line.pid
        raise KeyError(f"no ready line tagged {tag!r} in {self.ready_file}: {self.ready}")

    def processes(self) -> list[psutil.Process]:
        """The top process and all its live descendants."""
        try:
            top = psutil.Process(self.pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


def _demo_command(module: str) -> list[str]:
    """Arguments after the interpreter that run ``hangscope.demo.<module>``.

    ``-m hangscope.demo.<module>`` when the demo package is importable (an
    installed or editable hangscope); otherwise the file in the source tree's
    ``demo/`` directory, which works because the demos import nothing from
    hangscope.
    """
    qualified = f"hangscope.demo.{module}"
    with contextlib.suppress(ImportError, ValueError):
        if importlib.util.find_spec(qualified) is not None:
            return ["-m", qualified]
    path = Path(__file__).resolve().parent.parent / "demo" / f"{module}.py"
    if not path.is_file():
        raise RuntimeError(f"cannot find demo {qualified}: not importable and no {path}")
    return [str(path)]


def _plain_demo(module: str, *extra: str) -> Callable[[Path], list[str]]:
    def build(ready_file: Path) -> list[str]:
        return [sys.executable, *_demo_command(module), *extra, "--ready-file", str(ready_file)]

    return build


def _torchrun_argv(ready_file: Path) -> list[str]:
    # torchrun's own ``-m`` flag takes the module name, exactly like python's.
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "4",
        *_demo_command("mismatch"),
        "--rank-worker",
        "--ready-file",
        str(ready_file),
    ]


DEMOS: dict[str, DemoSpec] = {
    spec.name: spec
    for spec in (
        DemoSpec(
            name="mismatch",
            description="4 gloo ranks: rank 3 calls all_gather while ranks 0-2 call all_reduce",
            build_argv=_plain_demo("mismatch", "--nproc-per-node", "4"),
            ready_lines=4,
            ranks=4,
        ),
        DemoSpec(
            name="sglang",
            description="SGLang-style server: TP schedulers hang in warm-up, detokenizer waits",
            build_argv=_plain_demo("sglang_like", "--tp-size", "4", "--port", "30000"),
            ready_lines=5,
            ranks=4,
        ),
        DemoSpec(
            name="deadlock",
            description="one process, threads 'loader' and 'writer' in a lock-order deadlock",
            build_argv=_plain_demo("deadlock"),
            ready_lines=2,
            ranks=1,
        ),
        DemoSpec(
            name="straggler",
            description="4 gloo ranks: ranks 0-2 wait in all_reduce, rank 3 spins in Python",
            build_argv=_plain_demo("straggler", "--nproc-per-node", "4"),
            ready_lines=4,
            ranks=4,
        ),
        DemoSpec(
            name="torchrun",
            description="the mismatch demo's ranks launched by torchrun --standalone (4 ranks)",
            build_argv=_torchrun_argv,
            ready_lines=4,
            ranks=4,
        ),
    )
}


def list_demos() -> list[DemoSpec]:
    """All demos, the default (``mismatch``) first."""
    return list(DEMOS.values())


def get_demo(name: str) -> DemoSpec:
    try:
        return DEMOS[name]
    except KeyError:
        raise ValueError(f"unknown demo {name!r}; choose from {', '.join(DEMOS)}") from None


def read_ready_file(path: Path) -> list[ReadyLine]:
    """Parse the complete lines of a ready file (a line still being written is ignored)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    lines: list[ReadyLine] = []
    for raw in text.splitlines(keepends=True):
        if not raw.endswith("\n"):
            break
        pid, _, what = raw.strip().partition(" ")
        if pid.isdigit():
            lines.append(ReadyLine(int(pid), what))
    return lines


def _log_tail(log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - _LOG_TAIL_BYTES))
            return fh.read().decode(errors="replace")
    except OSError as exc:
        return f"<cannot read {log}: {exc}>"


def _demo_env(ready_file: Path) -> dict[str, str]:
    env = dict(os.environ)
    env[READY_ENV] = str(ready_file)
    # Few cores: every rank single-threaded (also silences torchrun's warning).
    env["OMP_NUM_THREADS"] = "1"
    # torch warns on import when NumPy is missing; the torchrun agent would
    # print it (the demos filter it themselves).
    quiet = "ignore:Failed to initialize NumPy"
    env["PYTHONWARNINGS"] = ",".join(w for w in (env.get("PYTHONWARNINGS"), quiet) if w)
    return env


def _remember_descendants(top: psutil.Process, seen: dict[int, psutil.Process]) -> None:
    # Remember descendants while they are still attached to the tree: once the
    # launcher is gone they are re-parented and ``children()`` cannot find them.
    with contextlib.suppress(psutil.Error):
        for child in top.children(recursive=True):
            seen.setdefault(child.pid, child)


def _is_gone(proc: psutil.Process) -> bool:
    try:
        # A zombie is dead; only its (possibly foreign) parent can reap it.
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_everything(
    popen: subprocess.Popen[bytes], top: psutil.Process | None, seen: dict[int, psutil.Process]
) -> list[psutil.Process]:
    """SIGKILL the demo's session, every known descendant, and wait. Returns survivors."""
    victims = dict(seen)
    if top is not None:
        _remember_descendants(top, victims)
        victims[top.pid] = top
        # Processes that stayed in the launcher's session but were re-parented
        # (their parent died) are found by session id; torchrun's workers get
        # their own sessions and are covered by the descendant snapshot.
        born = top.create_time()  # cached by psutil, valid even if top is dead
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getsid(proc.pid) == top.pid and proc.create_time() >= born:
                    victims.setdefault(proc.pid, proc)
    if popen.returncode is None:
        # Still our unreaped child, so the group id cannot have been reused.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
    for proc in victims.values():
        with contextlib.suppress(psutil.Error):
            proc.kill()  # psutil refuses if the pid now belongs to someone else
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=_REAP_TIMEOUT_S)
    deadline = time.monotonic() + _REAP_TIMEOUT_S
    pending = [p for p in victims.values() if p.pid != popen.pid]
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if not _is_gone(p)]
        if pending:
            time.sleep(_POLL_S)
    return pending


@contextmanager
def running_demo(
    name: str | DemoSpec,
    workdir: Path | None = None,
    timeout: float = 90.0,
    log_file: Path | None = None,
) -> Iterator[DemoJob]:
    """Run demo *name* until it is fully hung; yield it; then kill all of it.

    The demo starts in a new session (its own process group) with output going
    to *log_file* (default ``<workdir>/<name>.log``; *workdir* defaults to a
    temporary directory). Waits until the ready file has the expected number of
    lines, polling every 50 ms; raises :class:`RuntimeError` with the log tail
    if *timeout* seconds pass or the launcher exits first. On exit, normal or
    not, SIGKILLs the process group and every descendant it saw, and waits.
    """
    # A spec of its own (the benchmarks' jobs) is run without entering the registry that
    # `hangscope demo --list` shows.
    spec = name if isinstance(name, DemoSpec) else get_demo(name)
    name = spec.name
    with contextlib.ExitStack() as stack:
        if workdir is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"hangscope-{name}-"))
            workdir = Path(tmp)
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        ready_file = workdir / f"{name}.ready"
        ready_file.unlink(missing_ok=True)
        log = (log_file or workdir / f"{name}.log").resolve()
        argv = spec.argv(ready_file)
        with open(log, "wb") as log_fh:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=_demo_env(ready_file),
                # Not the caller's cwd: with ``-m`` a source checkout in cwd
                # could shadow the installed hangscope.demo package.
                cwd=workdir,
                start_new_session=True,
            )
        top: psutil.Process | None = None
        seen: dict[int, psutil.Process] = {}
        try:
            with contextlib.suppress(psutil.NoSuchProcess):
                top = psutil.Process(popen.pid)
            deadline = time.monotonic() + timeout
            polls = 0
            while True:
                ready = read_ready_file(ready_file)
                if len(ready) >= spec.ready_lines:
                    break
                if popen.poll() is not None:
                    raise RuntimeError(
                        f"demo {name!r} exited with code {popen.returncode} before it hung "
                        f"({len(ready)}/{spec.ready_lines} ready lines); command: {argv}\n"
                        f"--- {log} (tail) ---\n{_log_tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"demo {name!r} not hung after {timeout:.0f}s "
                        f"({len(ready)}/{spec.ready_lines} ready lines); command: {argv}\n"
                        f"--- {log} (tail) ---\n{_log_tail(log)}"
                    )
                if top is not None and polls % 4 == 0:
                    _remember_descendants(top, seen)
                polls += 1
                time.sleep(_POLL_S)
            if top is not None:
                _remember_descendants(top, seen)
            ready_pids = list(dict.fromkeys(line.pid for line in ready))
            yield DemoJob(
                name=name,
                pid=popen.pid,
                ready_pids=ready_pids,
                log=log,
                expected_ranks=spec.ranks,
                ready_file=ready_file,
                ready=ready,
                argv=argv,
            )
        except BaseException:
            # Also on GeneratorExit / KeyboardInterrupt: never leave a hung job behind.
            _kill_everything(popen, top, seen)
            raise
        survivors = _kill_everything(popen, top, seen)
        if survivors:
            raise RuntimeError(f"demo {name!r} left processes running: {survivors}")
