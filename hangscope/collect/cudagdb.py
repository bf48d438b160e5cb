"""The kernels running on a stuck rank's GPU: ``cuda-gdb -batch -p PID -ex "info cuda kernels"
-ex detach``.

cuda-gdb stops the process while it attaches and reads the GPU's state (8-11 s on an H200),
then detaches. So hangscope asks only for ranks already stuck with a spinning GPU
(``dump --kernels``), bounds each by a hard deadline, and after every path (answer, refusal,
timeout) checks ``/proc/PID/stat``: a process left stopped (T/t) gets SIGCONT.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hangscope.collect import procfs
from hangscope.model import kernels as ke

#: How long one rank may be held by cuda-gdb before it is killed (an H200 answered in 8-11 s).
DEADLINE_S = 30.0
#: At most this many ranks are read at once (each cuda-gdb is a ~1 GiB process).
MAX_PARALLEL = 8

_ROW = re.compile(
    r"^\s*(?P<focus>\*)?\s*(?P<kernel>\d+)\s+(?P<parent>\S+)\s+(?P<dev>\d+)\s+(?P<grid>\d+)\s+"
    r"(?P<status>[A-Za-z]+)\s+(?P<mask>0x[0-9a-fA-F]+|\S+)\s+"
    r"(?:\((?P<cluster>[\d,]+)\)\s+)??\((?P<griddim>[\d,]+)\)\s+\((?P<blockdim>[\d,]+)\)\s+"
    r"(?P<invocation>.+?)\s*$")
_REFUSED = re.compile(r"ptrace: Operation not permitted|Could not attach|not permitted|"
                      r"Permission denied|already traced|ptrace: No such process")


def find_cuda_gdb() -> str | None:
    """``$HANGSCOPE_CUDA_GDB``, ``cuda-gdb`` on PATH, or the CUDA toolkit's (CUDA_HOME,
    CUDA_PATH, /usr/local/cuda*)."""
    chosen = os.environ.get("HANGSCOPE_CUDA_GDB")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    found = shutil.which("cuda-gdb")
    if found:
        return found
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    homes += ["/usr/local/cuda", *sorted(map(str, Path("/usr/local").glob("cuda-*")))]
    for home in homes:
        if home and os.access(Path(home, "bin", "cuda-gdb"), os.X_OK):
            return str(Path(home, "bin", "cuda-gdb"))
    return None


def _dims(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x) if text else ()


def parse_kernels(text: str) -> tuple[ke.CudaKernel, ...]:
    """The rows of ``info cuda kernels`` (header ``Kernel Parent Dev Grid Status SMs Mask
    GridDim BlockDim Invocation``) found anywhere in cuda-gdb's output."""
    rows: list[ke.CudaKernel] = []
    in_table = False
    for line in text.splitlines():
        if re.match(r"^\s*Kernel\s+Parent\s+Dev\s+Grid\s+Status", line):
            in_table = True
            continue
        if not in_table:
            continue
        found = _ROW.match(line)
        if found is None:
            in_table = False
            continue
        invocation = found["invocation"]
        mask = found["mask"]
        sms = bin(int(mask, 16)).count("1") if mask.lower().startswith("0x") else None
        rows.append(ke.CudaKernel(
            name=ke._cut(invocation, "(", ")").strip() or invocation,
            short=ke.shorten(invocation), device=int(found["dev"]),
            grid_id=int(found["grid"]), status=found["status"], grid=_dims(found["griddim"]),
            block=_dims(found["blockdim"]), sms=sms, sm_mask=mask,
            collective=ke.nccl_collective(invocation), focus=bool(found["focus"])))
    return tuple(rows)


def _last_words(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.startswith(("[New ", "[Thread ", "[Detaching"))]
    return (lines[-1] if lines else "no output")[:200]


def _resume(pid: int) -> tuple[str | None, bool]:
    """The process's state once cuda-gdb is gone; a stopped one (T/t) is sent SIGCONT."""
    deadline = time.monotonic() + 1.0
    state = None
    resumed = False
    while True:
        stat = procfs.read_stat(pid)
        state = stat.state if stat is not None else None
        if state not in ("T", "t"):
            return state, resumed
        if not resumed or time.monotonic() > deadline:
            if resumed:
                return state, resumed
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
            resumed = True
        time.sleep(0.05)


def read_kernels(pid: int, cuda_gdb: str | None, deadline_s: float = DEADLINE_S) -> ke.KernelRead:
    """One rank's kernels, or a KernelRead whose note says why not; the rank never stays
    stopped (cuda-gdb detaches; on a timeout it is killed, which detaches too; then the state
    is checked)."""
    if cuda_gdb is None:
        return ke.KernelRead(pid, ke.NO_CUDA_GDB, note=NO_CUDA_GDB_NOTE)
    started = time.monotonic()
    children_before = set(procfs.read_children(pid))
    try:
        proc = subprocess.Popen(
            [cuda_gdb, "-batch", "-nx", "-p", str(pid), "-ex", "info cuda kernels",
             "-ex", "detach"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return ke.KernelRead(pid, ke.FAILED, note=f"cuda-gdb could not be started ({exc}).")
    status, note, kernels = ke.FAILED, None, ()
    try:
        out, _ = proc.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: cuda-gdb and its helpers
        out = ""
        with contextlib.suppress(subprocess.TimeoutExpired):
            out, _ = proc.communicate(timeout=5)
        status = ke.TIMEOUT
        note = (f"cuda-gdb did not answer for PID {pid} within {deadline_s:.0f} s and was "
                "killed (which detaches it); --kernels-timeout gives it longer.")
    elapsed = round(time.monotonic() - started, 2)
    state, resumed = _resume(pid)
    if status != ke.TIMEOUT:
        kernels = parse_kernels(out or "")
        if kernels:
            status = ke.READ
        elif _REFUSED.search(out or ""):
            status = ke.REFUSED
            note = (f"cuda-gdb could not attach to PID {pid} ({_last_words(out)}): run "
                    "hangscope as the job's user or root, with ptrace allowed "
                    "(kernel.yama.ptrace_scope, CAP_SYS_PTRACE in a container).")
        elif re.search(r"No CUDA kernels", out or ""):
            status = ke.NO_KERNELS
            note = f"cuda-gdb saw no CUDA kernel running in PID {pid}."
        else:
            note = (f"cuda-gdb gave no kernel table for PID {pid} (exit {proc.returncode}: "
                    f"{_last_words(out or '')}).")
    if resumed:
        note = ((note + " ") if note else "") + (
            f"PID {pid} was left stopped and was sent SIGCONT (state now {state}).")
    zombies = _left_zombies(pid, children_before)
    if zombies:
        names = ", ".join(f"PID {c} ({procfs.read_comm(c) or '?'})" for c in zombies)
        note = ((note + " ") if note else "") + (
            f"The attach left {names} as a zombie child of PID {pid} (the CUDA driver's debug "
            "agent; the process does not reap it): harmless, but a later dump lists it.")
    return ke.KernelRead(pid, status, kernels, note, elapsed, resumed, state, zombies)


def _left_zombies(pid: int, before: set[int]) -> tuple[int, ...]:
    """Children of ``pid`` that appeared during the read and are zombies now."""
    out = []
    for child in procfs.read_children(pid):
        stat = procfs.read_stat(child)
        if child not in before and stat is not None and stat.state == "Z":
            out.append(child)
    return tuple(out)


NO_CUDA_GDB_NOTE = ("cuda-gdb was not found (PATH, CUDA_HOME, /usr/local/cuda*/bin): install the "
                    "CUDA toolkit's debugger, or set HANGSCOPE_CUDA_GDB, to name the running "
                    "kernel.")


def read_many(pids: Sequence[int], deadline_s: float = DEADLINE_S) -> dict[int, ke.KernelRead]:
    """Each PID's kernels, read in parallel (each bounded by ``deadline_s``)."""
    if not pids:
        return {}
    gdb = find_cuda_gdb()
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(pids)),
                            thread_name_prefix="hangscope-cudagdb") as pool:
        return dict(zip(pids, pool.map(lambda p: read_kernels(p, gdb, deadline_s), pids),
                        strict=True))
