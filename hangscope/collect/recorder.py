"""py-spy record's dense Python-only sampling of one process over a window: start the
recorder, stop it with SIGINT (it writes what it saw), parse its raw (collapsed) output.

``py-spy record --nonblocking --idle --threads --rate 100 --format raw --pid N`` pauses
nobody; per thread it gives the distinct Python stacks and how many samples each got. Every
failure is a value on the :class:`Recorder` (``error``), never an exception.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

from hangscope.collect.pyspy import (
    CHILDREN,
    PERMISSION_LINE,
    Interrupted,
    _classify_failure,
    _error_line,
)

# ``process 123:"cmdline";`` (with --subprocesses) and ``thread (456): Name;`` prefixes.
_PROCESS = re.compile(r'process (\d+):".*?";(?=process \d+:|thread \()')
_THREAD = re.compile(r"thread \((\d+|0x[0-9a-fA-F]+)\)(?:: ([^;]*))?;?")


def parse_raw(text: str) -> dict[int, dict[int, tuple[str | None, dict[tuple[str, ...], int]]]]:
    """py-spy's raw (collapsed) output -> {pid: {tid: (thread name, {stack: samples})}}.

    One line per distinct stack: ``[process P:"cmd";]...thread (TID): name;f1;f2;... COUNT``,
    frames outermost first. Without ``process`` prefixes the pid key is 0 (one target).
    """
    found: dict[int, dict[int, tuple[str | None, dict[tuple[str, ...], int]]]] = {}
    for line in text.splitlines():
        body, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        pid = 0
        pos = 0
        while match := _PROCESS.match(body, pos):  # nested for --subprocesses: keep the last
            pid, pos = int(match.group(1)), match.end()
        thread = _THREAD.match(body, pos)
        if thread is None:
            continue
        tid_text = thread.group(1)
        tid = int(tid_text, 16) if tid_text.startswith("0x") else int(tid_text)
        rest = body[thread.end():]
        frames = tuple(f for f in rest.split(";") if f) if rest else ()
        _, stacks = found.setdefault(pid, {}).setdefault(tid, (thread.group(2), {}))
        stacks[frames] = stacks.get(frames, 0) + int(count_text)
    return found


@dataclass
class Recorder:
    pid: int
    proc: subprocess.Popen[bytes] | None
    out: str
    error: str | None = None
    error_kind: str | None = None


@functools.cache
def _die_with_us() -> tuple[str, ...]:
    """``setpriv --pdeathsig KILL --``: a recorder dies with the thread that started it (a
    SIGKILLed hangscope must not leave recorders behind); () where setpriv cannot do it."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    cmd = (setpriv, "--pdeathsig", "KILL", "--")
    try:
        ok = subprocess.run([*cmd, "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=5, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return cmd if ok else ()


def start_recorder(pyspy: str, pid: int, rate: int, folder: str,
                    duration: int | None = None) -> Recorder:
    """``py-spy record --nonblocking --idle --threads --rate R --format raw -p PID -o OUT``."""
    out = os.path.join(folder, f"{pid}.txt")
    cmd = [*_die_with_us(), pyspy, "record", "--nonblocking", "--idle", "--threads",
           "--rate", str(rate), "--format", "raw", "--pid", str(pid), "--output", out]
    if duration is not None:  # a cap, also where setpriv is missing
        cmd += ["--duration", str(duration)]
    try:
        proc = CHILDREN.popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    except Interrupted:
        return Recorder(pid, None, out, "interrupted (Ctrl-C)", "failed")
    except OSError as exc:
        return Recorder(pid, None, out, f"py-spy could not start: {exc}", "failed")
    return Recorder(pid, proc, out)


def stop_recorder(rec: Recorder, deadline: float) -> None:
    """SIGINT (py-spy writes its file on it), then wait; killed past the deadline."""
    proc = rec.proc
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        rec.error, rec.error_kind = "py-spy did not stop in time; its samples are lost", "timeout"
        return
    finally:
        CHILDREN.forget(proc)
    text = stderr.decode(errors="replace")
    if not os.path.exists(rec.out):
        rec.error_kind = _classify_failure(text, proc.returncode or 0)
        rec.error = (PERMISSION_LINE if rec.error_kind == "permission" else
                     _error_line(text) or f"py-spy record exited with {proc.returncode}")
