"""What the tests share: the one harness for hung targets, waiting with a deadline, running
the CLI, real captured snapshots.

Imported by tests in every tier as ``support`` (tests/ is on sys.path through the
``pythonpath`` option in pyproject.toml), and by the recorder scripts as ``tests.support``;
so it imports nothing else from tests/. Nothing here sleeps and hopes: every wait polls a
condition against a deadline and says what it waited for when it gives up.

Every test that starts a hung process goes through :func:`running_target`: it starts the
target in its own session, waits for its ready signal (``"<pid> <tag>"`` lines in a ready
file, or any condition) against a deadline, yields its PIDs, and kills the whole process group
and every descendant it saw when the block ends, on failure too. (The bundled demos start
through ``hangscope.demo.jobs.running_demo``, the product's own harness for ``hangscope demo``;
the ``demo_job`` fixture in tests/conftest.py wraps it.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psutil

from hangscope.analyze import analyze
from hangscope.model import Snapshot
from hangscope.model.serialize import load

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"
GPU_DUMPS = FIXTURES / "gpu" / "validation"
TARGETS = TESTS / "targets"
#: The verdict tests' jobs: ``verdict_jobs.py MODE READY_FILE WORKDIR``.
VERDICT_JOBS = TARGETS / "verdict_jobs.py"
#: The xdist group of every test module that starts a local Ray (``pytest.mark.xdist_group``):
#: two Ray instances on the machine at once make a process that looks for "the" cluster fail
#: with "Found multiple active Ray instances", a log line a dump then reads (a frameworks tier
#: run named the driver, not rank 0, while two modules' Ray jobs overlapped).
RAY_GROUP = "ray"

if TYPE_CHECKING:
    from textual.pilot import Pilot

T = TypeVar("T")


def poll(condition: Callable[[], T | None], what: str, timeout: float = 20.0,
         interval: float = 0.05) -> T:
    """Call ``condition`` until it returns something truthy; fail naming ``what`` at the
    deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


async def until(pilot: Pilot, condition: Callable[[], object], what: str,
                timeout: float = 10.0) -> None:
    """Let a Textual app run until ``condition()`` holds, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)


@dataclass
class Said:
    """What a long-running child (``hangscope watch``) prints, each line with when it came: a
    reader thread collects them, ``said`` waits for a word with a deadline."""

    proc: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def said(self, word: str, timeout: float) -> float:
        """When the child first printed a line holding ``word``."""
        def seen() -> float | None:
            return next((t for t, line in self.lines if word in line), None)
        return poll(seen, f"the watcher to say {word!r}; it said:\n{self.text()}", timeout)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


class SaysLines:
    """For a test's record of a running watch: ``said``/``text`` of its ``output``."""

    output: Said | None

    def said(self, word: str, timeout: float) -> float:
        """When the watcher first printed a line holding ``word``."""
        assert self.output is not None, "the watcher was not started"
        return self.output.said(word, timeout)

    def text(self) -> str:
        return self.output.text() if self.output is not None else ""


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a ``python -m hangscope`` child that imports this checkout."""
    import hangscope

    env = dict(os.environ)
    package_parent = Path(hangscope.__file__).resolve().parent.parent
    if package_parent == REPO_ROOT:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def run_cli(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m hangscope ARGS`` as a user runs it: text out, exit code, no exception."""
    return subprocess.run([sys.executable, "-m", "hangscope", *args], capture_output=True,
                          text=True, timeout=timeout, env=cli_env(env), input=input,
                          check=False)


def fixture_path(name: str) -> Path:
    """A recorded dump by name: ``mismatch`` (tests/fixtures/snapshots) or ``sync`` (the
    H200 validation run, tests/fixtures/gpu/validation/sync.dump.json)."""
    for path in (SNAPSHOTS / f"{name}.json", GPU_DUMPS / f"{name}.dump.json"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"no recorded snapshot named {name!r}")


@cache
def reanalysed(name: str) -> Snapshot:
    """A recorded real snapshot, analysed again by the current analyzer (cached per run)."""
    return analyze(load(fixture_path(name)))


def recorded_names() -> list[str]:
    """Every recorded snapshot: the demo recordings, then the H200 validation dumps."""
    return sorted(p.stem for p in SNAPSHOTS.glob("*.json")) + sorted(
        p.name.removesuffix(".dump.json") for p in GPU_DUMPS.glob("*.dump.json"))


def read_ready(path: Path) -> dict[str, int]:
    """The ``"<pid> <tag>"`` lines of a ready file: PID by tag, the first line of a tag wins; a
    line still being written (no newline yet) is not read."""
    out: dict[str, int] = {}
    # Not there yet, or a target whose ready signal is a folder of files (fr_job): no lines.
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        for raw in path.read_text(errors="replace").splitlines(keepends=True):
            if not raw.endswith("\n"):
                break
            pid, _, tag = raw.strip().partition(" ")
            if pid.isdigit() and tag:
                out.setdefault(tag, int(pid))
    return out


@dataclass
class Target:
    """A started target, valid inside :func:`running_target`."""

    popen: subprocess.Popen[bytes]
    #: PID by ready tag, as the ready file said when the target was ready (see ``wait_for``).
    pids: dict[str, int]
    workdir: Path
    ready_file: Path
    #: The target's stdout and stderr together.
    log: Path
    #: More PIDs to kill at the end (processes a test started on the side).
    also_kill: list[int] = field(default_factory=list)

    @property
    def launcher(self) -> int:
        """The PID that was started (the session and process group leader)."""
        return self.popen.pid

    @property
    def pid(self) -> int:
        """The same as ``launcher``."""
        return self.popen.pid

    def tree(self) -> list[psutil.Process]:
        """The launcher and its live descendants."""
        try:
            top = psutil.Process(self.launcher)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError as exc:
            return f"<cannot read {self.log}: {exc}>"

    def ready_lines(self) -> list[str]:
        """The complete lines of the ready file now (a line still being written is not one)."""
        try:
            text = self.ready_file.read_text(errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return []
        return [line for line in text.splitlines(keepends=True) if line.endswith("\n")]

    def ready_tags(self) -> dict[str, int]:
        """The ready file now: PID by tag."""
        return read_ready(self.ready_file)

    def wait_for(self, tags: Sequence[str], timeout: float) -> dict[str, int]:
        """Wait until every tag in ``tags`` has a ready line (the target still running); the
        PIDs by tag, also merged into ``pids``."""

        def found() -> dict[str, int] | None:
            if self.popen.poll() is not None:
                raise AssertionError(f"the target exited ({self.popen.returncode}) before "
                                     f"{list(tags)} were ready:\n{self.log_tail()}")
            have = read_ready(self.ready_file)
            return have if all(t in have for t in tags) else None

        try:
            have = poll(found, f"ready lines {list(tags)} in {self.ready_file}", timeout,
                        interval=0.02)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; have {sorted(read_ready(self.ready_file))}; log:\n"
                                 f"{self.log_tail()}") from None
        self.pids.update(have)
        return have


def _gone(proc: psutil.Process) -> bool:
    try:  # a zombie is dead: only its parent (maybe init) can reap it
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_target(target: Target, seen: Sequence[psutil.Process] = (), *,
                group: bool = True, timeout: float = 10.0) -> None:
    """Resume and SIGKILL everything the target started: its process group (``group``), every
    descendant seen now or in ``seen``, and ``also_kill``; wait until all are gone."""
    procs = {p.pid: p for p in [*seen, *target.tree()]}
    for pid in target.also_kill:  # may reuse a PID of the target: this is the process now
        with contextlib.suppress(psutil.Error):
            procs[pid] = psutil.Process(pid)
    for proc in procs.values():  # a stopped process must not stay stopped if a kill fails
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGCONT)
    if group and target.popen.returncode is None:
        # Still our unreaped child, so its group ID cannot have been handed out again.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(target.launcher, signal.SIGKILL)
    for proc in procs.values():
        with contextlib.suppress(psutil.Error):
            proc.kill()  # psutil refuses a PID that now belongs to another process
    with contextlib.suppress(subprocess.TimeoutExpired):
        target.popen.wait(timeout=timeout)
    with contextlib.suppress(AssertionError):
        poll(lambda: all(_gone(p) for p in procs.values()) and not _group_alive(target.launcher),
             "the target's processes to exit", timeout, interval=0.02)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def running_target(argv: Sequence[str], workdir: Path, *, tags: Sequence[str] = (),
                   ready: Callable[[Target], object] | None = None,
                   ready_file: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 90.0, new_session: bool = True,
                   cwd: Path | None = None) -> Iterator[Target]:
    """Start ``argv``, wait until it is ready, yield it as a :class:`Target`, then kill it all.

    Ready means: every tag in ``tags`` has a ``"<pid> <tag>"`` line in ``ready_file``
    (default ``workdir/ready``; the target gets its path on its command line), and then
    ``ready(target)`` (if given) returns something true. Fails with the target's log tail if it
    exits first or ``timeout`` passes. ``env`` adds to this process's environment (minus the
    torchrun and pytest variables a target must not inherit). ``new_session``: the target leads
    its own session and process group, so teardown kills the group; a test that needs the
    launcher's PID freed while its children live passes False.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    ready_file = ready_file or workdir / "ready"
    log = workdir / "target.log"
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "PYTEST_CURRENT_TEST")}
    child_env.update(env or {})
    with open(log, "wb") as out:
        popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, env=child_env, cwd=cwd,
                                 start_new_session=new_session)
    target = Target(popen, {}, workdir, ready_file, log)
    seen: list[psutil.Process] = []
    try:
        started = time.monotonic()
        if tags:
            target.wait_for(tags, timeout)
        if ready is not None:
            def check() -> object:
                if popen.poll() is not None:
                    raise AssertionError(f"the target exited ({popen.returncode}) before it "
                                         f"was ready:\n{target.log_tail()}")
                return ready(target)

            poll(check, f"{argv[1] if len(argv) > 1 else argv[0]} to be ready",
                 max(1.0, timeout - (time.monotonic() - started)), interval=0.02)
        target.pids.update({t: p for t, p in read_ready(ready_file).items()
                            if t not in target.pids})
        seen = target.tree()
        yield target
    finally:
        kill_target(target, seen, group=new_session)


#: What ``verdict_job`` yields (``launcher``, ``pids`` by ready tag, ``workdir``, ``wait_for``).
Job = Target


@contextlib.contextmanager
def verdict_job(mode: str, tmp_path: Path, tags: Sequence[str],
                timeout: float = 60.0, jobs: Path = VERDICT_JOBS) -> Iterator[Target]:
    """Run ``verdict_jobs.py MODE READY WORKDIR`` (or another ``jobs`` script of the same
    interface, e.g. hang_shapes.py) until every tag in ``tags`` is ready; kill it after."""
    workdir = tmp_path / f"job-{mode}"
    ready = workdir / "ready"
    try:
        with running_target([sys.executable, str(jobs), mode, str(ready), str(workdir)],
                            workdir, tags=tags, timeout=timeout) as job:
            yield job
    finally:  # the short directory of a job's ipc:// paths, outside the test's own
        for name in ("ipc_dir", "run_dir"):
            named = workdir / name
            if named.exists() and Path(short := named.read_text().strip()).name.startswith("hs-"):
                shutil.rmtree(short, ignore_errors=True)


def dump_json(pid: int, *extra: str, timeout: float = 120.0) -> str:
    """``python -m hangscope dump PID --format json`` on this checkout; its stdout. With
    ``HANGSCOPE_KEEP_DUMPS=DIR`` set, each dump is also kept there, named by its test (a rare
    wrong verdict can then be re-judged offline: ``hangscope show FILE``)."""
    done = run_cli("dump", str(pid), "--format", "json", *extra, timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip(), done.stderr
    keep = os.environ.get("HANGSCOPE_KEEP_DUMPS")
    if keep:
        test = os.environ.get("PYTEST_CURRENT_TEST", "dump").split(" ")[0]
        name = re.sub(r"[^\w.-]+", "_", test)[-120:]
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.{time.time_ns()}.json").write_text(done.stdout)
    return done.stdout


#: A dump's shortest honest window for a settled job: 2 stack samples over 0.5 s.
FAST_WINDOW = ("--samples", "2", "--window", "0.5")


def job_dump(mode: str, tmp_path: Path, tags: Sequence[str], jobs: Path,
             window: Sequence[str] = FAST_WINDOW) -> tuple[dict[str, Any], dict[str, int]]:
    """The JSON dump of a :func:`verdict_job` of ``jobs``, from its launcher, and its PIDs."""
    with verdict_job(mode, tmp_path, tags, timeout=120, jobs=jobs) as job:
        return json.loads(dump_json(job.launcher, *window)), dict(job.pids)


@dataclass(frozen=True)
class JobVerdict:
    """What a test of a :func:`verdict_job` reads: the dump's verdict, its report as text, the
    job's PIDs by tag, its launcher's, and those of the children it waited for asleep."""

    verdict: dict[str, Any]
    text: str
    pids: dict[str, int]
    launcher: int
    sleepers: tuple[int, ...] = ()


def job_verdict(mode: str, tmp_path: Path, tags: Sequence[str], jobs: Path, *,
                timeout: float = 60.0, sleepers: int = 0) -> JobVerdict:
    """Dump a :func:`verdict_job` of ``jobs`` from its launcher (the default window) once it
    is ready and, where it forks ``sleepers`` children that block, once they sleep."""
    with verdict_job(mode, tmp_path, tags, timeout=timeout, jobs=jobs) as job:
        asleep_now = tuple(p.pid for p in asleep_children(job.launcher, sleepers)) \
            if sleepers else ()
        raw = dump_json(job.launcher)
        pids = dict(job.pids)
    return JobVerdict(json.loads(raw)["verdict"], show_text(raw, tmp_path), pids, job.launcher,
                      asleep_now)


def asleep(pid: int) -> bool:
    """Every thread of ``pid`` sleeps in the kernel (state S or D): it is where it blocks."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks]
    except OSError:
        return False
    return bool(states) and all(s in ("S", "D") for s in states)


def asleep_children(pid: int, count: int, timeout: float = 60.0) -> list[psutil.Process]:
    """Wait until ``pid`` has ``count`` children, each asleep in the kernel (forked workers
    where they block); fail at the deadline."""
    def ready() -> list[psutil.Process] | None:
        kids = psutil.Process(pid).children()
        return kids if len(kids) == count and all(asleep(k.pid) for k in kids) else None
    return poll(ready, f"{count} children of {pid} asleep", timeout=timeout)


def _exec_start(pid: int, tid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/task/{tid}/sched").read_text()
    except OSError:
        return None
    line = next((ln for ln in text.splitlines() if ln.startswith("se.exec_start")), None)
    return line.split(":", 1)[1].strip() if line else None


def wait_off_cpu(pid: int, seconds: float, tid: int | None = None,
                 timeout: float = 60.0) -> None:
    """Wait until thread ``tid`` (default the main thread) of ``pid`` has not run for
    ``seconds``: its ``/proc/PID/task/TID/sched`` ``se.exec_start`` (set each time it is put on
    a CPU) stayed the same that long by this process's clock. Skips the test on a kernel
    without the file (CONFIG_SCHED_DEBUG off)."""
    import pytest

    tid = pid if tid is None else tid
    if not Path(f"/proc/{pid}/task/{tid}/sched").exists() and Path(f"/proc/{pid}").exists():
        pytest.skip("no /proc/PID/task/TID/sched on this kernel")
    seen: list[tuple[str | None, float]] = []

    def settled() -> bool:
        value, now = _exec_start(pid, tid), time.monotonic()
        if value is None or not seen or seen[-1][0] != value:
            seen.append((value, now))
            return False
        return now - seen[-1][1] >= seconds

    poll(settled, f"thread {tid} of PID {pid} off CPU for {seconds} s", timeout, interval=0.1)


@contextlib.contextmanager
def settled_job(script: Path, mode: str, tmp_path: Path,
                tags: Sequence[str]) -> Iterator[Target]:
    """``python SCRIPT MODE READY WORKDIR``, ready once every tagged process is asleep in the
    kernel (where it blocks), killed afterwards."""
    workdir = tmp_path / f"job-{mode}"
    with running_target([sys.executable, str(script), mode, str(workdir / "ready"),
                         str(workdir)], workdir, tags=tags, timeout=60,
                        ready=lambda t: all(asleep(p) for p in t.pids.values())) as job:
        yield job


def settled_dump(script: Path, mode: str, tmp_path: Path, tags: Sequence[str],
                 window: Sequence[str] = FAST_WINDOW) -> tuple[dict[str, Any], dict[str, int]]:
    """The JSON dump of a :func:`settled_job` and the PIDs of its tags."""
    with settled_job(script, mode, tmp_path, tags) as job:
        data = json.loads(dump_json(job.launcher, *window))
        return data, dict(job.pids)


def show_text(data: str, where: Path) -> str:
    """``python -m hangscope show FILE`` of a saved JSON dump: the text report a user reads,
    unwrapped (box edges dropped, whitespace collapsed) so that a sentence is one string."""
    path = where / "dump.json"
    path.write_text(data)
    done = run_cli("show", str(path), env={"COLUMNS": "200"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.replace("│", " ").split())
