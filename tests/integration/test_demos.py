"""The demo jobs really hang where they say they do, and leave nothing behind.

Each torch demo needs ~5 s on 2 cores to import torch in 4-5 processes; the
whole file is meant to stay well under a minute.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import support
from hangscope.demo.jobs import (
    DEFAULT_DEMO,
    DEMOS,
    DemoJob,
    DemoSpec,
    list_demos,
    read_ready_file,
    running_demo,
)
from support import poll

REPO_ROOT = support.REPO_ROOT


@dataclass
class ThreadStack:
    tid: int
    state: str
    name: str
    #: Innermost first, e.g. ``"all_reduce (torch/distributed/distributed_c10d.py:3252)"``.
    frames: list[str] = field(default_factory=list)

    @property
    def functions(self) -> list[str]:
        return [frame.split(" (", 1)[0] for frame in self.frames]

    def has(self, function: str) -> bool:
        """True if *function* (``name`` or ``Class.name``) is on this stack."""
        return any(f == function or f.endswith("." + function) for f in self.functions)


def parse_py_spy_dump(text: str) -> dict[str, ThreadStack]:
    """Thread name -> stack, from ``py-spy dump`` output."""
    threads: dict[str, ThreadStack] = {}
    current: ThreadStack | None = None
    for line in text.splitlines():
        if line.startswith("Thread "):
            # Thread 5441 (idle): "loader"
            head, _, name = line.partition(": ")
            tid, _, state = head.removeprefix("Thread ").partition(" ")
            current = ThreadStack(int(tid, 0), state.strip("()"), name.strip().strip('"'))
            threads[current.name] = current
        elif current is not None and line.startswith("    "):
            current.frames.append(line.strip())
    return threads


def dump(py_spy: str, pid: int) -> dict[str, ThreadStack]:
    out = subprocess.run(
        [py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, f"py-spy dump --pid {pid} failed: {out.stderr}"
    return parse_py_spy_dump(out.stdout)


def wait_for_stack(
    py_spy: str, pid: int, *functions: str, thread: str = "MainThread", timeout: float = 10.0
) -> ThreadStack:
    """Dump *pid* until *thread* has all *functions* on its stack.

    The ready line is written just before the blocking call, so the very first
    dump may still catch the process a few bytecodes earlier.
    """
    def found() -> ThreadStack | None:
        stack = dump(py_spy, pid).get(thread)
        return stack if stack is not None and all(stack.has(f) for f in functions) else None

    return poll(found, f"pid {pid} thread {thread} with {functions} on its stack", timeout, 0.1)


def snapshot(job: DemoJob) -> list[psutil.Process]:
    procs = job.processes()
    assert procs, f"demo {job.name} has no live processes"
    return procs


def assert_all_gone(procs: list[psutil.Process]) -> None:
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    assert not alive, f"still running after the demo ended: {alive}"


def title(proc: psutil.Process) -> str:
    # setproctitle pads argv with NULs, so psutil returns ['title', '', '', ...].
    return " ".join(part for part in proc.cmdline() if part)


def test_list_demos() -> None:
    names = [spec.name for spec in list_demos()]
    assert names[0] == DEFAULT_DEMO == "mismatch"
    assert set(names) == {"mismatch", "sglang", "deadlock", "straggler", "torchrun"}
    for spec in list_demos():
        assert spec.description and "\n" not in spec.description
        assert spec.ready_lines >= spec.ranks >= 1
        argv = spec.argv(Path("/tmp/x.ready"))
        assert argv[0] == sys.executable and "/tmp/x.ready" in argv


def test_unknown_demo() -> None:
    with pytest.raises(ValueError, match="unknown demo"), running_demo("nope"):
        pass


@pytest.mark.extended
def test_mismatch(tmp_path: Path, py_spy: str) -> None:
    with running_demo("mismatch", workdir=tmp_path) as job:
        procs = snapshot(job)
        assert sorted(line.what for line in job.ready) == [
            "rank0 all_reduce",
            "rank1 all_reduce",
            "rank2 all_reduce",
            "rank3 all_gather",
        ]
        ranks = psutil.Process(job.pid).children()
        assert sorted(p.pid for p in ranks) == sorted(job.ready_pids)
        assert all("--rank-worker" in p.cmdline() for p in ranks)
        assert {p.environ()["RANK"] for p in ranks} == {"0", "1", "2", "3"}

        stack = wait_for_stack(py_spy, job.pid_of("rank3"), "gather_metrics", "all_gather")
        assert not stack.has("all_reduce")
        for rank in (0, 1, 2):
            stack = wait_for_stack(
                py_spy, job.pid_of(f"rank{rank}"), "sync_gradients", "all_reduce"
            )
            assert "idle" in stack.state
        wait_for_stack(py_spy, job.pid, "launch_ranks", "wait")
    assert_all_gone(procs)


@pytest.mark.extended
def test_sglang(tmp_path: Path, py_spy: str) -> None:
    with running_demo("sglang", workdir=tmp_path) as job:
        procs = snapshot(job)
        by_title = {title(p): p for p in procs}
        expected = {f"sglang::scheduler_TP{i}" for i in range(4)} | {"sglang::detokenizer"}
        assert expected <= set(by_title)
        assert {by_title[t].pid for t in expected} == set(job.ready_pids)

        tp3 = by_title["sglang::scheduler_TP3"].pid
        wait_for_stack(py_spy, tp3, "init_memory_pool", "profile_max_num_token", "all_gather")
        for i in range(3):
            stack = wait_for_stack(
                py_spy, by_title[f"sglang::scheduler_TP{i}"].pid, "init_memory_pool", "all_reduce"
            )
            assert not stack.has("profile_max_num_token")
        detok = by_title["sglang::detokenizer"].pid
        wait_for_stack(py_spy, detok, "DetokenizerManager.event_loop", "recv")
        wait_for_stack(py_spy, job.pid, "_wait_for_scheduler_ready", "recv")
        # The launcher never got as far as serving: port 30000 is not bound.
        listening = [
            c for c in psutil.Process(job.pid).net_connections("tcp") if c.status == "LISTEN"
        ]
        assert all(c.laddr.port != 30000 for c in listening)
    assert_all_gone(procs)


def test_deadlock(demo_job: Callable[..., DemoJob], py_spy: str) -> None:
    job = demo_job("deadlock")
    assert job.ready_pids == [job.pid]
    assert sorted(line.what.split()[0] for line in job.ready) == ["loader", "writer"]
    assert psutil.Process(job.pid).children() == []
    loader = wait_for_stack(py_spy, job.pid, "load_shard", thread="loader")
    writer = wait_for_stack(py_spy, job.pid, "flush_cache", thread="writer")
    assert "idle" in loader.state and "idle" in writer.state
    wait_for_stack(py_spy, job.pid, "main", "join")
    # The OS-level thread names are set too (what /proc/<pid>/task/*/comm shows).
    comms = {
        Path(f"/proc/{job.pid}/task/{t.id}/comm").read_text().strip()
        for t in psutil.Process(job.pid).threads()
    }
    assert {"loader", "writer"} <= comms


@pytest.mark.extended
def test_straggler(tmp_path: Path, py_spy: str) -> None:
    with running_demo("straggler", workdir=tmp_path) as job:
        procs = snapshot(job)
        spinner = psutil.Process(job.pid_of("rank3"))
        assert "rank3 preprocess_batch" in {line.what for line in job.ready}
        stack = wait_for_stack(py_spy, spinner.pid, "train_step", "preprocess_batch")
        assert "active" in stack.state
        assert not stack.has("all_reduce")
        for rank in (0, 1, 2):
            wait_for_stack(py_spy, job.pid_of(f"rank{rank}"), "train_step", "all_reduce")
        # Busy, not blocked: it keeps burning CPU (lenient: the box may be loaded).
        before = sum(spinner.cpu_times()[:2])
        time.sleep(0.5)
        assert sum(spinner.cpu_times()[:2]) - before > 0.02
    assert_all_gone(procs)


@pytest.mark.extended
def test_torchrun(tmp_path: Path, py_spy: str) -> None:
    with running_demo("torchrun", workdir=tmp_path) as job:
        procs = snapshot(job)
        assert "torch.distributed.run" in psutil.Process(job.pid).cmdline()
        ranks = [psutil.Process(pid) for pid in job.ready_pids]
        assert len(ranks) == 4
        assert {p.environ()["RANK"] for p in ranks} == {"0", "1", "2", "3"}
        # torchrun starts each worker in its own session, so killing the
        # agent's process group alone would not be enough.
        assert all(p.pid in {q.pid for q in procs} for p in ranks)
        wait_for_stack(py_spy, job.pid_of("rank3"), "gather_metrics", "all_gather")
        wait_for_stack(py_spy, job.pid_of("rank0"), "sync_gradients", "all_reduce")
    assert_all_gone(procs)


def _fake_spec(name: str, code: str, ready_lines: int = 1) -> DemoSpec:
    return DemoSpec(
        name=name,
        description="test double",
        build_argv=lambda ready: [sys.executable, "-c", code, str(ready)],
        ready_lines=ready_lines,
        ranks=1,
    )


def test_launcher_exits_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = "import sys; print('boom: no GPUs today'); sys.exit(3)"
    monkeypatch.setitem(DEMOS, "broken", _fake_spec("broken", code))
    with (
        pytest.raises(RuntimeError, match=r"(?s)exited with code 3.*boom: no GPUs today"),
        running_demo("broken", workdir=tmp_path, timeout=30),
    ):
        pass


@pytest.mark.extended
def test_timeout_kills_the_whole_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A launcher whose child leaves the session (like torchrun's workers) and
    # which never writes its ready line.
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " start_new_session=True)\n"
        "open(sys.argv[1] + '.child', 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    monkeypatch.setitem(DEMOS, "stuck", _fake_spec("stuck", code))
    started = time.monotonic()
    with (
        pytest.raises(RuntimeError, match="not hung after"),
        running_demo("stuck", workdir=tmp_path, timeout=3),
    ):
        pass
    assert time.monotonic() - started < 20
    child_pid = int((tmp_path / "stuck.ready.child").read_text())
    assert not psutil.pid_exists(child_pid) or (
        psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE
    )


def _demo_argv_forms() -> list[object]:
    forms = [pytest.param("file", [str(REPO_ROOT / "demo" / "deadlock.py")], id="file")]
    try:
        importable = importlib.util.find_spec("hangscope.demo.deadlock") is not None
    except ImportError:
        importable = False
    if importable:
        forms.append(pytest.param("module", ["-m", "hangscope.demo.deadlock"], id="module"))
    return forms


@pytest.mark.parametrize(("form", "target"), _demo_argv_forms())
def test_demo_runs_as_file_or_module(
    form: str, target: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = DemoSpec(
        name=f"deadlock-{form}",
        description="deadlock demo via an explicit command line",
        # The ready file comes from the environment this time, not --ready-file.
        build_argv=lambda ready: [sys.executable, *target],
        ready_lines=2,
        ranks=1,
    )
    monkeypatch.setitem(DEMOS, spec.name, spec)
    with running_demo(spec.name, workdir=tmp_path) as job:
        procs = snapshot(job)
        assert len(read_ready_file(job.ready_file)) == 2
        assert job.log.read_text() == ""  # quiet
    assert_all_gone(procs)


def test_hangscope_cli_help(
    hangscope_cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    result = hangscope_cli("--help", timeout=60)
    assert result.returncode == 0, result.stderr
