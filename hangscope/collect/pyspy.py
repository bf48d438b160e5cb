"""Python and native stacks through py-spy: ``py-spy dump --json [--native] --pid N``.

The only module that runs py-spy. It normalises py-spy's JSON on entry (``frames[0]`` is the
innermost frame, ``line == 0`` means unknown) into model Frames, and turns every failure into a
typed result: no exceptions leave this module except ToolMissing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from hangscope.collect import framework_lines
from hangscope.collect.framework_lines import branch_tests, rank_guards
from hangscope.collect.loops import code_loop_facts, loop_facts
from hangscope.collect.parkedlocks import parked_for
from hangscope.collect.procfs import read_cmdline
from hangscope.collect.source import (
    at_loop_header,
    calls_at,
    capture_block,
    lock_scope,
    loop_unsafe,
    within,
)
from hangscope.errors import ToolMissing
from hangscope.model import Frame, in_library
from hangscope.model.sharedstacks import kept_stack


@dataclass(frozen=True)
class PyThread:
    """One thread as py-spy reports it."""

    tid: int  # the OS thread id
    name: str | None
    active: bool | None
    owns_gil: bool | None
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class DumpResult:
    """The outcome of one py-spy dump: threads, or the reason there are none."""

    pid: int
    threads: tuple[PyThread, ...] = ()
    native: bool = False
    error: str | None = None
    error_kind: str | None = None  # permission | not_python | gone | timeout | failed
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


#: py-spy's refusal in hangscope's words (its own advice, ``sudo env "PATH=$PATH" !!``, names
#: a shell history trick, not the privilege that is missing).
PERMISSION_LINE = ("permission denied: tracing this process needs root or CAP_SYS_PTRACE "
                   "(Docker: --cap-add SYS_PTRACE)")


class _Children:
    """Every py-spy this process runs, so that Ctrl-C ends them all at once.

    A py-spy that pauses a target is ended by SIGKILL: the kernel detaches a dead tracer's
    tracees and resumes them (the same as a --timeout), so no target is left stopped. Once
    ``stop_all`` ran, nothing new starts: a worker thread that was about to run py-spy gets an
    "interrupted" result at once instead of a fresh child.
    """

    def __init__(self) -> None:
        # Reentrant: Ctrl-C's handler (``stop_all``) runs on the main thread between two of its
        # bytecodes, maybe while that thread starts a recorder inside ``popen``; a plain lock
        # deadlocked there, and the dump neither ended nor said why (the newcomer's Ctrl-C
        # test, 2 runs in 15).
        self._lock = threading.RLock()
        self._live: set[subprocess.Popen[bytes]] = set()
        self.stopped = False

    def popen(self, cmd: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """``subprocess.Popen(cmd)``, registered. Raises Interrupted after ``stop_all``."""
        with self._lock:
            if self.stopped:
                raise Interrupted
            proc: subprocess.Popen[bytes] = subprocess.Popen(cmd, **kwargs)  # type: ignore[call-overload]
            self._live.add(proc)
            if self.stopped:  # Ctrl-C came while it started: it missed this one
                proc.kill()
                proc.wait()
                self._live.discard(proc)
                raise Interrupted
            return proc

    def forget(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._live.discard(proc)

    def run(self, cmd: list[str], timeout: float) -> tuple[int, str, str]:
        """``subprocess.run(cmd, capture_output=True, timeout=timeout)``: (status, out, err).

        Raises:
            subprocess.TimeoutExpired: past ``timeout`` (the child is killed and reaped).
            Interrupted: after ``stop_all``.
            OSError: the binary cannot run.
        """
        proc = self.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            self.forget(proc)
        if self.stopped and proc.returncode < 0:
            raise Interrupted  # killed by stop_all, not a failure of the target
        return (proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))

    def stop_all(self, grace: float = 0.3) -> None:
        """Kill every live py-spy, reap it (no zombies), and let none start from now on."""
        with self._lock:
            self.stopped = True
            live = list(self._live)
        for proc in live:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGKILL)
                except OSError:  # reaped meanwhile
                    continue
        deadline = time.monotonic() + grace
        for proc in live:
            try:
                proc.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                continue  # in D state: the kernel ends it; its parent (init, once we exit) reaps


class Interrupted(Exception):
    """Raised where a py-spy would start or was killed after Ctrl-C (``stop_all``)."""


#: The one registry of this process's py-spy children.
CHILDREN = _Children()


def stop_all() -> None:
    """Ctrl-C: end every py-spy hangscope started (``cli.main`` calls it)."""
    CHILDREN.stop_all()


def find_pyspy() -> str:
    """Locate the py-spy binary: beside this Python (the wheel's), then on PATH.

    Raises:
        ToolMissing: py-spy is not installed anywhere hangscope can see.
    """
    override = os.environ.get("HANGSCOPE_PYSPY")
    if override:
        if Path(override).is_file() and os.access(override, os.X_OK):
            return override
        raise ToolMissing(f"HANGSCOPE_PYSPY points to {override!r}, which is not an executable.",
                          help_text="Point HANGSCOPE_PYSPY at the py-spy binary (`which py-spy` "
                          "prints it), or unset it: hangscope then uses the py-spy installed "
                          "beside it or on PATH.")
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("py-spy")
    if found:
        return found
    raise ToolMissing("py-spy was not found next to this Python or on PATH.")


def _classify_failure(stderr: str, returncode: int) -> str:
    """Name py-spy's failure from its stderr; py-spy gives no structured error codes."""
    text = stderr.lower()
    if "permission denied" in text or "operation not permitted" in text or "eperm" in text:
        return "permission"
    if (
        "no such process" in text
        or "failed to find process" in text
        or "does not exist" in text
        or "failed to get process executable name" in text
    ):
        return "gone"
    if (
        "failed to find python version" in text
        or "failed to get python version" in text
        or "couldn't find python" in text
        or "not a python" in text
        or "failed to find a python interpreter" in text
    ):
        return "not_python"
    return "failed"


def _error_line(stderr: str) -> str | None:
    """py-spy prints ``Error: ...`` then a Rust backtrace; keep the sentence."""
    for line in stderr.splitlines():
        if line.startswith("Error:"):
            return line[len("Error:"):].strip()
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[0].strip() if lines else None


def _frames(raw_frames: list[dict[str, object]]) -> tuple[Frame, ...]:
    frames = []
    for raw in raw_frames:
        filename = raw.get("filename")
        name = str(raw.get("name") or "?")
        line = raw.get("line")
        # py-spy marks native frames by giving the shared object as ``module``;
        # Python frames have ``module`` null.
        native = raw.get("module") is not None
        at = line if isinstance(line, int) else None
        takes, holds, releases = ((None, (), False) if native or not filename
                                  else lock_scope(str(filename), at))
        loops, loop_kind = ((), None) if native else loop_facts(
            str(filename) if filename else None, at)
        frames.append(
            Frame(
                name=name,
                file=str(filename) if filename else None,
                line=int(line) if isinstance(line, int) and line > 0 else None,
                native=native,
                module=str(raw["module"]) if raw.get("module") else None,
                capture=None if native or not filename else capture_block(str(filename), at),
                takes=takes,
                holds=holds,
                releases=releases,
                loop_next=not native and at_loop_header(
                    str(filename) if filename else None, at),
                loop_unsafe=None if native else loop_unsafe(
                    str(filename) if filename else None, at),
                within=() if native or not filename else within(str(filename), at),
                guards=() if native or not filename or in_library(str(filename))
                else rank_guards(str(filename), at),
                branches=() if native or not filename else branch_tests(str(filename), at),
                loops=loops,
                loop_kind=loop_kind,
                **({} if native or not filename else framework_lines.line_calls(str(filename),
                                                                              at)),
                loop_gets=() if native else framework_lines.untimed_in(filename, loops),
                loop_receives=() if native else framework_lines.receives_in(filename, loops),
            )
        )
    # A stack that takes a lock: what each of its lines calls says which frame was entered
    # without a call (a signal handler over the frame it interrupted).
    if any(f.takes for f in frames):
        frames = [f if f.native else replace(f, calls=calls_at(f.file, f.line),
                                             parked=parked_for(f.file, f.takes))
                  for f in frames]
    return kept_stack(tuple(frames))  # equal stacks one tuple: classify knows it by identity


def parse_dump(pid: int, text: str, native: bool, seconds: float = 0.0) -> DumpResult:
    """Parse ``py-spy dump --json`` output into a DumpResult."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return DumpResult(pid, native=native, error=f"py-spy printed invalid JSON: {exc}",
                          error_kind="failed", seconds=seconds)
    if not isinstance(data, list):
        return DumpResult(pid, native=native, error="py-spy printed unexpected JSON",
                          error_kind="failed", seconds=seconds)
    try:
        threads = [_thread(raw) for raw in data if isinstance(raw, dict)]
    except ValueError as exc:  # another py-spy's JSON: this rank's error, not a crash
        return DumpResult(pid, native=native, error=f"py-spy printed unexpected JSON ({exc})",
                          error_kind="failed", seconds=seconds)
    return DumpResult(pid, tuple(_with_code_loops(pid, threads)), native=native,
                      seconds=seconds)


def _with_code_loops(pid: int, threads: list[PyThread]) -> list[PyThread]:
    """A ``python -c CODE`` program's frames (file ``<string>``) with their loops, read from
    the code on its command line (its only source)."""
    if not any(f.file == "<string>" and not f.native for t in threads for f in t.frames):
        return threads
    argv = read_cmdline(pid)
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else None
    if code is None:
        return threads
    return [replace(t, frames=tuple(
        _with_loops(f, code) if f.file == "<string>" and not f.native else f
        for f in t.frames)) for t in threads]


def _with_loops(frame: Frame, code: str) -> Frame:
    loops, loop_kind = code_loop_facts(code, frame.line)
    return replace(frame, loops=loops, loop_kind=loop_kind)


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _thread(raw: dict[str, object]) -> PyThread:
    """One thread of py-spy's JSON. Raises ValueError for a shape this parser does not know."""
    tid = raw.get("os_thread_id") or raw.get("thread_id") or 0
    if isinstance(tid, bool) or not isinstance(tid, int):
        raise ValueError(f"thread id {str(tid)[:40]!r} is not a number")
    frames = raw.get("frames") or []
    if not isinstance(frames, list) or not all(isinstance(f, dict) for f in frames):
        raise ValueError(f"the frames of thread {tid} are not a list of objects")
    name = raw.get("thread_name")
    return PyThread(tid=tid, name=name if isinstance(name, str) else None,
                    active=_flag(raw.get("active")), owns_gil=_flag(raw.get("owns_gil")),
                    frames=_frames(frames))


def dump(pid: int, native: bool = True, timeout: float = 10.0, nonblocking: bool = False,
         pyspy: str | None = None) -> DumpResult:
    """Run ``py-spy dump --json [--native] [--nonblocking] --pid PID`` once, bounded by timeout.

    A native dump that fails for a reason other than permission or a vanished process is
    retried Python-only (SGLang's own dumper does the same); an unpaused one paused (a process
    that runs changes its thread states under it: "Failed to get stack traces").
    """
    binary = pyspy or find_pyspy()
    cmd = [binary, "dump", "--json", "--pid", str(pid)]
    if native:
        cmd.insert(2, "--native")
    if nonblocking:
        cmd.insert(2, "--nonblocking")
    started = time.monotonic()
    try:
        # py-spy pauses the target while it reads it; the timeout kills py-spy, and the
        # kernel resumes the target when its tracer dies, so a target is never left stopped.
        returncode, stdout, stderr_text = CHILDREN.run(cmd, timeout)
    except Interrupted:
        return DumpResult(pid, native=native, error="interrupted (Ctrl-C)", error_kind="failed",
                          seconds=time.monotonic() - started)
    except subprocess.TimeoutExpired:
        failed = DumpResult(pid, native=native, error=f"py-spy did not answer within {timeout:g} s",
                            error_kind="timeout", seconds=time.monotonic() - started)
        return _python_only_retry(failed, timeout, nonblocking, binary) if native else failed
    except OSError as exc:
        return DumpResult(pid, native=native, error=f"could not run py-spy: {exc}",
                          error_kind="failed", seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    if returncode == 0 and stdout.strip():
        return parse_dump(pid, stdout, native, seconds)
    stderr = (stderr_text or stdout or "").strip()
    kind = _classify_failure(stderr, returncode)
    last_line = _error_line(stderr) or f"exit status {returncode}"
    if kind == "permission":  # py-spy's own advice ("sudo env PATH=$PATH !!") misleads here
        last_line = PERMISSION_LINE
    failed = DumpResult(pid, native=native, error=f"py-spy: {last_line}", error_kind=kind,
                        seconds=seconds)
    if (native or nonblocking) and kind == "failed" and not CHILDREN.stopped:
        return _python_only_retry(failed, timeout, nonblocking and native, binary)
    return failed


def _python_only_retry(failed: DumpResult, timeout: float, nonblocking: bool,
                       binary: str) -> DumpResult:
    """A native dump that failed or timed out (a wedged unwind), tried again Python-only:
    with ``--samples 1`` that is the rank's only chance of a stack. A retry that fails too
    keeps the first failure, which names the real problem."""
    fallback = dump(failed.pid, False, timeout, nonblocking, binary)  # Python-only
    if not fallback.ok:
        return failed
    return DumpResult(failed.pid, fallback.threads, native=False, error=None,
                      seconds=failed.seconds + fallback.seconds)


def dump_locals(pid: int, timeout: float = 10.0, pyspy: str | None = None) -> list[object] | None:
    """``py-spy dump --locals --json --pid PID``: raw threads with each frame's locals, or None.

    Asked only of ranks in a point-to-point op (analyze/evidence/p2p.py reads the peer from the c10d
    frame); it cost the same as a plain dump on a CPU rank (<= 10 ms).
    """
    try:
        returncode, stdout, _ = CHILDREN.run([pyspy or find_pyspy(), "dump", "--locals", "--json",
                                              "--pid", str(pid)], timeout)
        data = json.loads(stdout) if returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ToolMissing, json.JSONDecodeError, Interrupted):
        return None
    return data if isinstance(data, list) else None


def version(pyspy: str | None = None) -> str | None:
    """``py-spy --version``: recorded in the snapshot's notes."""
    try:
        _, stdout, _ = CHILDREN.run([pyspy or find_pyspy(), "--version"], 5)
    except (OSError, subprocess.TimeoutExpired, ToolMissing, Interrupted):
        return None
    return stdout.strip() or None
