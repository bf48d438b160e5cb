"""Helpers for the reliability and security tests: start ``reliability_job.py``, wait, clean up.

The job runs through the one harness, ``support.running_target``: readiness is a file
handshake with a deadline (never sleep-and-hope); teardown resumes any stopped process
(SIGCONT) and kills every process the job started, including ones a test created on the side
(``JobHandle.also_kill``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
from support import Target, poll, read_ready, running_target

TARGETS = Path(__file__).resolve().parent
JOB_SCRIPT = TARGETS / "reliability_job.py"
__all__ = ["JOB_SCRIPT", "JobHandle", "read_ready", "running_job", "wait_for"]


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    """Poll ``predicate`` until it returns something true; fail with ``what`` at the deadline."""
    return poll(predicate, what, timeout, interval=0.02)


@dataclass
class JobHandle(Target):
    """A started ``reliability_job.py``: the harness's Target plus its control files."""

    control_dir: Path = Path()
    new_session: bool = True

    def rank(self, i: int) -> int:
        return self.pids[f"rank{i}"]

    @property
    def ranks(self) -> list[int]:
        return [pid for tag, pid in sorted(self.pids.items()) if tag.startswith("rank")]

    def stats(self, rank: int) -> dict[str, float] | None:
        path = self.control_dir / f"stats-rank{rank}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def make_exit(self, pid: int) -> None:
        """Ask one process of the job to exit (it polls for the file every 10 ms)."""
        (self.control_dir / f"exit-{pid}").touch()


def task_states(pid: int) -> dict[int, str]:
    """Every thread's state letter: ``/proc/PID/task/*/stat``."""
    states = {}
    base = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(base)
    except OSError:
        return {}
    for tid in tids:
        try:
            text = (base / tid / "stat").read_text()
        except OSError:
            continue
        states[int(tid)] = text.rsplit(")", 1)[-1].split()[0]
    return states


def stopped_threads(pids: Sequence[int]) -> dict[int, list[int]]:
    """Threads in stopped (T) or traced (t) state, by PID: must be empty after hangscope."""
    out = {}
    for pid in pids:
        bad = [tid for tid, state in task_states(pid).items() if state in ("T", "t")]
        if bad:
            out[pid] = bad
    return out


def wait_dead(procs: Sequence[psutil.Process], timeout: float) -> None:
    """Wait until every process has exited (a zombie counts: init reaps it in its own time)."""

    def dead(proc: psutil.Process) -> bool:
        try:
            return proc.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(lambda: all(dead(p) for p in procs), timeout, "processes to exit")


@contextlib.contextmanager
def running_job(workdir: Path, *, ranks: int = 2, mode: str = "busy",
                args: Sequence[str] = (), expect: Sequence[str] = (),
                env: dict[str, str] | None = None, timeout: float = 60.0,
                python: str | None = None, new_session: bool = True) -> Iterator[JobHandle]:
    """Start the job, wait until every rank (and each tag in ``expect``) is ready, yield it.

    ``new_session``: the launcher leads its own session, so teardown can kill the whole
    process group; while any process of it lives, the launcher's PID (the session's ID)
    cannot be handed out again, so a test that reuses that PID passes False.
    """
    control = workdir / "control"
    control.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready"
    cmd = [python or sys.executable, str(JOB_SCRIPT), "--ready-file", str(ready),
           "--ranks", str(ranks), "--mode", mode, "--control-dir", str(control), *args]
    wanted = sorted({f"rank{i}" for i in range(ranks)} | {"launcher", *expect})
    with running_target(cmd, workdir, tags=wanted, env=env, timeout=timeout,
                        new_session=new_session) as target:
        handle = JobHandle(target.popen, target.pids, workdir, ready, target.log,
                           target.also_kill, control_dir=control, new_session=new_session)
        yield handle


FAKE_PYSPY = '''#!{python}
"""A stand-in for py-spy (HANGSCOPE_PYSPY): behaves like py-spy except for one victim PID."""
import os, sys, time

REAL = {real!r}
args = sys.argv[1:]
pid = int(args[args.index("--pid") + 1]) if "--pid" in args else None
mode = os.environ.get("HS_FAKE_MODE", "")
victim = int(os.environ.get("HS_FAKE_VICTIM", "-1"))
control = os.environ.get("HS_FAKE_DIR", "/nonexistent")

def once(name):
    path = os.path.join(control, name)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False

def gone(p, reaped):
    try:
        with open(f"/proc/{{p}}/stat") as fh:
            state = fh.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return True
    return (not reaped) and state in ("Z", "X")

def wait_gone(p, reaped):
    deadline = time.monotonic() + 20
    while not gone(p, reaped):
        if time.monotonic() > deadline:
            sys.exit("fake py-spy: the victim did not exit")
        time.sleep(0.005)

if pid == victim and args and args[0] == "dump":
    if mode == "hang" or (mode == "hang-native" and "--native" in args):
        open(os.path.join(control, f"hanging-{{os.getpid()}}"), "w").close()
        time.sleep(3600)
    elif mode == "fail":
        sys.stderr.write("Error: Failed to copy PyInterpreterState: simulated failure\\n"
                         "\\nStack backtrace:\\n   0: anyhow::error\\n")
        sys.exit(1)
    elif mode == "garbage":
        print("{{this is not json")
        sys.exit(0)
    elif mode == "badjson":  # JSON of another shape, as a future py-spy might print
        print('[{{"thread_id": "abc", "frames": "nope"}}, 7, {{"frames": [{{"line": "x"}}, 3]}}]')
        sys.exit(0)
    elif mode == "exit" and once("exited"):
        open(os.path.join(control, f"exit-{{pid}}"), "w").close()
        wait_gone(pid, reaped=False)
    elif mode == "reuse" and once("reused"):
        open(os.path.join(control, f"exit-{{pid}}"), "w").close()
        wait_gone(pid, reaped=True)
        ready = os.path.join(control, "impostor-ready")
        code = ("import os, time\\n"
                "def impostor_main():\\n"
                f"    open({{ready!r}}, 'w').write(str(os.getpid()))\\n"
                "    time.sleep(120)\\n"
                "impostor_main()\\n")
        for _ in range(500):
            if os.path.exists(f"/proc/{{pid}}"):  # another process took the PID: reused too
                open(os.path.join(control, "impostor-ready"), "w").close()
                break
            with open("/proc/sys/kernel/ns_last_pid", "w") as fh:
                fh.write(str(pid - 1))
            child = os.fork()
            if child == 0:
                if os.getpid() == pid:  # a stranger: not holding py-spy's pipes open
                    null = os.open(os.devnull, os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    os.setsid()
                    os.execv(sys.executable, [sys.executable, "-c", code])
                os._exit(0)
            if child == pid:
                break
            os.waitpid(child, 0)
        else:
            sys.exit("fake py-spy: could not reuse the PID")
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            if time.monotonic() > deadline:
                sys.exit("fake py-spy: the impostor did not start")
            time.sleep(0.005)
os.execv(REAL, [REAL, *args])
'''


def write_fake_pyspy(path: Path, real: str) -> Path:
    path.write_text(FAKE_PYSPY.format(python=sys.executable, real=real))
    path.chmod(0o755)
    return path


def fake_processes(fake: Path) -> list[psutil.Process]:
    """Processes still running the fake py-spy (there must be none after hangscope exits)."""
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if any(str(fake) == part for part in cmd):
            out.append(proc)
    return out


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def start_with_pid(pid: int, argv: Sequence[str], tries: int = 200) -> int | None:
    """Start ``argv`` as process ``pid`` (a PID that was just freed): what PID reuse looks like.

    Returns the PID, or None when another process on the machine took it first. Needs root
    and a writable ``/proc/sys/kernel/ns_last_pid``. The fork follows the write at once (a
    busy machine forks all the time); a child that got another PID exits at once.
    """
    for _ in range(tries):
        if psutil.pid_exists(pid):
            return None
        NS_LAST_PID.write_text(str(pid - 1))
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            try:
                if os.getpid() == pid:
                    null = os.open(os.devnull, os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    os.setsid()
                    os.execv(argv[0], list(argv))
            finally:
                os._exit(0)
        if child == pid:
            return pid
        os.waitpid(child, 0)
    return None
