"""hangscope must never hurt a target, and never fall over on one: a clear message, a partial
result, never a traceback.

Every test runs real processes (tests/targets/reliability_job.py: a launcher and ranks that are
busy or idle, never hung) and asserts on what the user sees: exit code, stderr, JSON. The
fault matrix these tests cover is docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from targets.reliability_support import (
    JobHandle,
    fake_processes,
    running_job,
    start_with_pid,
    stopped_threads,
    task_states,
    wait_dead,
    wait_for,
    write_fake_pyspy,
)

FAST = ("--samples", "2", "--window", "0.3")


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Any]:
    """Factory: ``job(ranks=2, mode="busy", args=(), expect=())`` -> a ready JobHandle."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        count = 0

        def start(**kwargs: Any) -> JobHandle:
            nonlocal count
            count += 1
            return stack.enter_context(running_job(tmp_path / f"job{count}", **kwargs))

        yield start


@pytest.fixture
def real_pyspy() -> str:
    from hangscope.collect.pyspy import find_pyspy
    from hangscope.errors import ToolMissing

    try:
        return find_pyspy()
    except ToolMissing:
        pytest.skip("py-spy is not installed")


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text[-3000:]
    assert "internal error" not in text, text[-3000:]


def dump_doc(cli: Any, pid: int, *extra: str, env: dict[str, str] | None = None,
             timeout: float = 90) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    result = cli("dump", str(pid), "--format", "json", *FAST, *extra, env=env, timeout=timeout)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result


def proc_of(doc: dict[str, Any], pid: int) -> dict[str, Any]:
    found = [p for p in doc["processes"] if p["pid"] == pid]
    assert found, f"PID {pid} is not in the report: {[p['pid'] for p in doc['processes']]}"
    return found[0]


def flat(text: str) -> str:
    """Text output with the line wrapping of its tables undone."""
    return " ".join(text.split())


def python_threads(proc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in proc["threads"] if t["python"]]


def assert_all_running(handle: JobHandle) -> None:
    """Every process of the job is alive and no thread of it is stopped or traced."""
    pids = [handle.launcher, *handle.ranks]
    for pid in pids:
        assert psutil.pid_exists(pid), f"PID {pid} of the target was killed"
    assert stopped_threads(pids) == {}, "a target was left stopped"


def assert_progress(handle: JobHandle, rank: int, timeout: float = 20.0) -> None:
    """The busy rank keeps computing: its iteration count grows."""
    before = (handle.stats(rank) or {}).get("iterations", 0)
    wait_for(lambda: (handle.stats(rank) or {}).get("iterations", 0) > before + 20, timeout,
             f"rank {rank} to make progress")


# -- never harm a target ---------------------------------------------------------------------

def soak(handle: JobHandle, snapshots: int, progress: bool = False) -> dict[str, Any]:
    """``snapshots`` consecutive Snapshots of a live busy job, checking the targets after each.

    Returns the numbers docs/reliability.md records.
    """
    from hangscope.live.sampler import SampleOptions, Sampler

    ranks = handle.ranks
    expected = {handle.launcher, *ranks}
    sampler = Sampler(handle.launcher, SampleOptions(samples=2, window=0.2, timeout=10))
    durations = []
    start_iterations = {r: (handle.stats(r) or {}).get("iterations", 0)
                        for r in range(len(ranks))}
    incomplete = []
    started = time.monotonic()
    for i in range(snapshots):
        t0 = time.monotonic()
        snap = sampler.snapshot()
        durations.append(time.monotonic() - t0)
        for pid in expected:
            assert psutil.pid_exists(pid), f"snapshot {i}: target PID {pid} is gone"
        stopped = stopped_threads(sorted(expected))
        assert stopped == {}, f"snapshot {i}: threads left stopped: {stopped}"
        seen = {p.pid: p for p in snap.processes}
        problems = [f"PID {pid} missing" for pid in expected - set(seen)]
        problems += [f"PID {p.pid}: {p.errors}" for p in seen.values() if p.errors]
        problems += [f"PID {pid}: no Python stack" for pid in expected
                     if pid in seen and not any(t.python and t.frames
                                                for t in seen[pid].threads)]
        if snap.verdict is None:
            problems.append("no verdict")
        if problems:
            incomplete.append((i, problems))
        if progress and (i + 1) % 100 == 0:
            print(f"soak: {i + 1} snapshots, {time.monotonic() - started:.0f} s, "
                  f"{len(incomplete)} incomplete", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    end_stats = {r: handle.stats(r) or {} for r in range(len(ranks))}
    durations.sort()
    return {
        "snapshots": snapshots,
        "ranks": len(ranks),
        "incomplete": incomplete,
        "elapsed_s": round(elapsed, 1),
        "snapshot_p50_s": round(durations[len(durations) // 2], 3),
        "snapshot_p95_s": round(durations[int(len(durations) * 0.95) - 1], 3),
        "snapshot_max_s": round(durations[-1], 3),
        "rank_iterations": {r: end_stats[r].get("iterations", 0) - start_iterations[r]
                            for r in end_stats},
        "rank_max_pause_ms": {r: end_stats[r].get("max_gap_ms") for r in end_stats},
    }


@pytest.mark.extended
@pytest.mark.timeout(900)
def test_soak_25_snapshots_of_a_busy_job_leave_every_target_running(job: Any) -> None:
    """GIVEN 3 busy ranks WHEN 25 snapshots are taken back to back THEN none is killed or left
    stopped, each snapshot is complete, and the ranks keep computing (the CI-sized soak; the
    slow tier takes 1,000)."""
    handle = job(ranks=3, mode="busy")
    result = soak(handle, int(os.environ.get("HANGSCOPE_CI_SOAK_SNAPSHOTS", "25")))
    out = os.environ.get("HANGSCOPE_SOAK_RESULTS")
    if out:
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
    assert result["incomplete"] == []
    assert all(n > 0 for n in result["rank_iterations"].values()), result
    assert_all_running(handle)
    for rank in range(3):
        assert_progress(handle, rank)


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_soak_1000_snapshots_of_a_busy_job(job: Any) -> None:
    """The 1,000-snapshot soak (docs/reliability.md records its numbers)."""
    handle = job(ranks=3, mode="busy")
    count = int(os.environ.get("HANGSCOPE_SOAK_SNAPSHOTS", "1000"))
    result = soak(handle, count, progress=True)
    out = os.environ.get("HANGSCOPE_SOAK_RESULTS")
    if out:
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    assert result["incomplete"] == []
    assert_all_running(handle)
    for rank in range(3):
        assert_progress(handle, rank)


@pytest.mark.extended
@pytest.mark.parametrize("victims", ["hangscope", "hangscope-and-py-spy"])
def test_sigkill_of_hangscope_mid_sample_leaves_targets_running(
        job: Any, tmp_path: Path, victims: str) -> None:
    """GIVEN hangscope sampling a busy job WHEN it is SIGKILLed (alone, or with the py-spy that
    is attached to a rank at that moment) THEN every target keeps running, none stays stopped."""
    handle = job(ranks=2, mode="busy")
    from support import cli_env as _cli_env

    proc = subprocess.Popen(
        [sys.executable, "-m", "hangscope", "dump", str(handle.launcher), "--samples", "100",
         "--window", "60", "--format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_cli_env(None),
        start_new_session=True)
    try:
        def ptrace_stopped() -> bool:  # py-spy has a rank stopped right now
            return any(state == "t" for pid in handle.ranks
                       for state in task_states(pid).values())

        wait_for(ptrace_stopped, 60, "py-spy to be attached to a rank")
        pyspies = [c for c in psutil.Process(proc.pid).children(recursive=True)]
        if victims == "hangscope":
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        wait_dead(pyspies, 20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    wait_for(lambda: stopped_threads([handle.launcher, *handle.ranks]) == {}, 10,
             "the targets to be running again")
    assert_all_running(handle)
    for rank in range(2):
        assert_progress(handle, rank)


@pytest.mark.extended
def test_ctrl_c_mid_sample_exits_130_and_leaves_targets_running(job: Any) -> None:
    """GIVEN hangscope with py-spy attached to a rank WHEN the user presses Ctrl-C (SIGINT to
    the foreground process group: hangscope and its py-spy) THEN exit 130, one line, no
    traceback, and the ranks keep running."""
    handle = job(ranks=2, mode="busy")
    from support import cli_env as _cli_env

    proc = subprocess.Popen(
        [sys.executable, "-m", "hangscope", "dump", str(handle.launcher), "--samples", "100",
         "--window", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_cli_env(None),
        start_new_session=True)
    try:
        wait_for(lambda: any(state == "t" for pid in handle.ranks
                             for state in task_states(pid).values()),
                 60, "py-spy to be attached to a rank")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 130, err
    assert "hangscope: interrupted" in err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    wait_for(lambda: stopped_threads([handle.launcher, *handle.ranks]) == {}, 10,
             "the targets to be running again")
    assert_all_running(handle)
    assert_progress(handle, 0)


def test_reader_closing_the_pipe_early_is_not_an_error(tmp_path: Path) -> None:
    """`hangscope show big.json | head -1`: exit 0, nothing on stderr."""
    from support import cli_env as _cli_env

    doc = json.loads((Path(__file__).parents[1] / "fixtures/snapshots/mismatch.json").read_text())
    doc["processes"] = doc["processes"] * 60
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    for fmt in ("json", "text"):
        result = subprocess.run(
            f'"{sys.executable}" -m hangscope show "{path}" -f {fmt} | head -c 10; '
            'exit "${PIPESTATUS[0]}"', shell=True, executable="/bin/bash", capture_output=True,
            text=True, env=_cli_env(None), timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""


# -- a rank that changes under hangscope ------------------------------------------------------

def fake_env(fake: Path, mode: str, victim: int, handle: JobHandle) -> dict[str, str]:
    return {"HANGSCOPE_PYSPY": str(fake), "HS_FAKE_MODE": mode,
            "HS_FAKE_VICTIM": str(victim), "HS_FAKE_DIR": str(handle.control_dir)}


@pytest.mark.extended
def test_rank_that_exits_between_discovery_and_sampling_is_reported_gone(
        job: Any, tmp_path: Path, hangscope_cli: Any, real_pyspy: str) -> None:
    """GIVEN a rank that exits after discovery, right before py-spy reads it THEN the report
    says it exited and still has every other rank's stack."""
    handle = job(ranks=3, mode="idle")
    fake = write_fake_pyspy(tmp_path / "py-spy", real_pyspy)
    victim = handle.rank(1)
    doc, _ = dump_doc(hangscope_cli, handle.launcher,
                      env=fake_env(fake, "exit", victim, handle))
    assert (handle.control_dir / "exited").exists(), "the fake py-spy never saw the victim"
    gone = proc_of(doc, victim)
    assert gone["state"] in ("gone", "Z")
    assert any("exited" in e or "zombie" in e for e in gone["errors"]), gone["errors"]
    for rank in (0, 2):
        assert python_threads(proc_of(doc, handle.rank(rank)))
    assert doc["verdict"]["kind"] == "missing_rank"
    assert victim in doc["verdict"]["suspects"]


def _ns_last_pid_writable() -> bool:
    return os.access("/proc/sys/kernel/ns_last_pid", os.W_OK)


@pytest.mark.quiet  # the freed PID must not go to another test's process first
@pytest.mark.skipif(not _ns_last_pid_writable(),
                    reason="needs root and a writable /proc/sys/kernel/ns_last_pid to reuse a PID")
@pytest.mark.extended
def test_pid_reused_between_discovery_and_sampling_is_not_sampled_as_the_rank(
        job: Any, tmp_path: Path, hangscope_cli: Any, real_pyspy: str) -> None:
    """GIVEN a rank that exits while py-spy runs and a new process that gets its PID THEN the
    start times differ, the rank is reported gone and the stranger's stacks appear nowhere."""
    handle = job(ranks=2, mode="idle")
    fake = write_fake_pyspy(tmp_path / "py-spy", real_pyspy)
    victim = handle.rank(1)
    try:
        result = hangscope_cli("dump", str(handle.launcher), "--format", "json", *FAST,
                               env=fake_env(fake, "reuse", victim, handle), timeout=90)
    finally:
        impostor = handle.control_dir / "impostor-ready"
        if impostor.exists() and impostor.read_text():  # empty: another process took it
            handle.also_kill.append(int(impostor.read_text()))
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert impostor.exists(), "the fake py-spy did not reuse the PID"
    assert "impostor_main" not in result.stdout
    doc = json.loads(result.stdout)
    reused = proc_of(doc, victim)
    assert reused["state"] == "gone"
    assert any("reused by another process" in e for e in reused["errors"]), reused["errors"]
    assert python_threads(proc_of(doc, handle.rank(0)))
    assert victim in doc["verdict"]["suspects"]


@pytest.mark.quiet  # the freed PID must not go to another test's process first
@pytest.mark.skipif(not _ns_last_pid_writable(),
                    reason="needs root and a writable /proc/sys/kernel/ns_last_pid to reuse a PID")
@pytest.mark.extended
def test_live_view_stops_when_the_job_exits_and_its_pid_is_reused(job: Any,
                                                                  tmp_path: Path) -> None:
    """GIVEN `attach`'s sampler on a job WHEN the job exits and a stranger gets the
    launcher's PID THEN the next snapshot says the job exited; the stranger is not traced."""
    from hangscope.errors import ProcessNotFound
    from hangscope.live.sampler import SampleOptions, Sampler

    handle = job(ranks=2, mode="idle", new_session=False)
    sampler = Sampler(handle.launcher, SampleOptions(samples=1, window=0))
    assert {p.pid for p in sampler.snapshot().processes} >= {handle.launcher, *handle.ranks}
    launcher = handle.launcher
    for pid in [*handle.ranks, launcher]:
        handle.make_exit(pid)
    handle.popen.wait(timeout=10)  # reaped: the PID is free
    ready = tmp_path / "stranger-ready"
    stranger = start_with_pid(launcher, [
        sys.executable, "-c",
        f"import time; open({str(ready)!r}, 'w').close(); time.sleep(60)"])
    if stranger is not None:
        handle.also_kill.append(stranger)
        wait_for(ready.exists, 20, "the stranger to start")
    elif not psutil.pid_exists(launcher):
        pytest.skip(f"another process took PID {launcher} first, and is gone already")
    # Whoever holds the PID now (ours, or another process that took it first) is a stranger.
    with pytest.raises(ProcessNotFound, match="has exited"):
        sampler.snapshot()
    if stranger is not None:
        with pytest.raises(ProcessNotFound, match="now belongs to another process"):
            sampler.snapshot()
        assert stopped_threads([stranger]) == {}


@pytest.mark.extended
def test_stopped_rank_is_reported_and_never_resumed(job: Any, hangscope_cli: Any) -> None:
    """GIVEN a SIGSTOPped rank THEN it is reported as stopped (with `kill -CONT`), py-spy does
    not touch it, and it is still stopped afterwards: hangscope never resumes or kills it."""
    handle = job(ranks=2, mode="idle")
    victim = handle.rank(1)
    os.kill(victim, signal.SIGSTOP)
    wait_for(lambda: set(task_states(victim).values()) == {"T"}, 10, "the rank to stop")
    doc, _ = dump_doc(hangscope_cli, handle.launcher)
    stopped = proc_of(doc, victim)
    assert stopped["state"] == "T"
    assert any("stopped" in e and f"kill -CONT {victim}" in e for e in stopped["errors"])
    assert "proc.stopped" in {f["id"] for f in doc["findings"]}
    assert doc["verdict"]["kind"] == "missing_rank"
    assert doc["verdict"]["suspects"] == [victim]
    assert python_threads(proc_of(doc, handle.rank(0)))
    text = hangscope_cli("dump", str(handle.launcher), "--samples", "1")
    no_traceback(text)
    assert text.returncode == 0
    assert f"kill -CONT {victim}" in flat(text.stdout)
    assert set(task_states(victim).values()) == {"T"}, "hangscope resumed a stopped rank"
    assert psutil.pid_exists(victim)


# -- py-spy: missing, hanging, failing --------------------------------------------------------

@pytest.mark.extended
def test_pyspy_missing_override_says_the_path_is_wrong(job: Any, hangscope_cli: Any) -> None:
    handle = job(ranks=1, mode="idle")
    result = hangscope_cli("dump", str(handle.launcher),
                           env={"HANGSCOPE_PYSPY": "/nonexistent/py-spy"})
    no_traceback(result)
    assert result.returncode == 5
    assert "/nonexistent/py-spy" in result.stderr
    # the path is wrong, py-spy is not missing: point it right or unset it (issue 20, item 19)
    assert "unset it" in result.stderr and "pip install" not in result.stderr


@pytest.mark.extended
def test_pyspy_missing_from_venv_and_path_says_how_to_install(
        job: Any, tmp_path: Path) -> None:
    """An interpreter with no py-spy beside it and none on PATH: exit 5 and the install line."""
    import psutil as psutil_mod

    import hangscope

    handle = job(ranks=1, mode="idle")
    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    (bare / "python").symlink_to(os.path.realpath(sys.executable))
    site = str(Path(psutil_mod.__file__).resolve().parent.parent)
    package = str(Path(hangscope.__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("HANGSCOPE_PYSPY", "VIRTUAL_ENV")}
    env.update(PATH=f"{bare}:/usr/bin:/bin", PYTHONPATH=f"{package}:{site}")
    if any(Path(d, "py-spy").exists() for d in ("/usr/bin", "/bin")):
        pytest.skip("py-spy is installed system-wide")
    result = subprocess.run([str(bare / "python"), "-m", "hangscope", "dump",
                             str(handle.launcher)], capture_output=True, text=True, env=env,
                            timeout=60, check=False)
    no_traceback(result)
    assert result.returncode == 5, result.stderr
    assert "py-spy was not found" in result.stderr
    assert "pip install py-spy" in result.stderr


@pytest.mark.extended
@pytest.mark.quiet  # --timeout 1 must hold for the ranks that answer: run alone
def test_hanging_pyspy_is_killed_at_timeout_and_the_other_ranks_report(
        job: Any, tmp_path: Path, hangscope_cli: Any, real_pyspy: str) -> None:
    """GIVEN py-spy hangs on one rank WHEN --timeout 1 THEN that py-spy is killed, the rank is
    reported with the reason, the other ranks have stacks, nothing is left stopped."""
    handle = job(ranks=2, mode="idle")
    fake = write_fake_pyspy(tmp_path / "py-spy", real_pyspy)
    victim = handle.rank(1)
    started = time.monotonic()
    doc, _ = dump_doc(hangscope_cli, handle.launcher, "--timeout", "1",
                      env=fake_env(fake, "hang", victim, handle))
    elapsed = time.monotonic() - started
    assert list(handle.control_dir.glob("hanging-*")), "the fake py-spy never hung"
    assert elapsed < 30, f"hangscope took {elapsed:.1f} s with a 1 s timeout"
    hung = proc_of(doc, victim)
    assert any("did not answer within 1 s" in e for e in hung["errors"]), hung["errors"]
    assert python_threads(proc_of(doc, handle.rank(0)))
    assert fake_processes(fake) == [], "the hanging py-spy was not killed"
    assert_all_running(handle)


@pytest.mark.extended
@pytest.mark.quiet  # --timeout 1 must hold for the ranks that answer: run alone
def test_native_dump_that_times_out_is_retried_python_only(
        job: Any, tmp_path: Path, hangscope_cli: Any, real_pyspy: str) -> None:
    """GIVEN py-spy --native hangs on one rank (a wedged native unwind) WHEN --samples 1 THEN
    that rank is retried Python-only and still has its Python stack; no py-spy is left."""
    handle = job(ranks=2, mode="idle")
    fake = write_fake_pyspy(tmp_path / "py-spy", real_pyspy)
    victim = handle.rank(1)
    doc, _ = dump_doc(hangscope_cli, handle.launcher, "--timeout", "1", "--samples", "1",
                      env=fake_env(fake, "hang-native", victim, handle))
    assert list(handle.control_dir.glob("hanging-*")), "the fake py-spy never hung"
    retried = proc_of(doc, victim)
    frames = [f["name"] for t in python_threads(retried) for f in t["frames"]]
    assert "rank_main" in frames, (frames, retried["errors"])
    assert python_threads(proc_of(doc, handle.rank(0)))
    assert fake_processes(fake) == [], "the hanging py-spy was not killed"
    assert_all_running(handle)


@pytest.mark.parametrize(("mode", "words"), [("garbage", "py-spy printed invalid JSON"),
                                             ("badjson", "py-spy printed unexpected JSON")])
def test_pyspy_printing_nonsense_on_one_rank_is_that_ranks_error(
        job: Any, tmp_path: Path, hangscope_cli: Any, real_pyspy: str, mode: str,
        words: str) -> None:
    handle = job(ranks=2, mode="idle")
    fake = write_fake_pyspy(tmp_path / "py-spy", real_pyspy)
    victim = handle.rank(0)
    doc, _ = dump_doc(hangscope_cli, handle.launcher, env=fake_env(fake, mode, victim, handle))
    odd = proc_of(doc, victim)
    assert any(words in e for e in odd["errors"]), odd["errors"]
    assert python_threads(proc_of(doc, handle.rank(1)))


@pytest.mark.extended
def test_pyspy_failing_on_one_rank_reports_its_sentence_not_its_backtrace(
        job: Any, tmp_path: Path, hangscope_cli: Any, real_pyspy: str) -> None:
    handle = job(ranks=2, mode="idle")
    fake = write_fake_pyspy(tmp_path / "py-spy", real_pyspy)
    victim = handle.rank(0)
    doc, result = dump_doc(hangscope_cli, handle.launcher,
                           env=fake_env(fake, "fail", victim, handle))
    failed = proc_of(doc, victim)
    assert any("simulated failure" in e for e in failed["errors"]), failed["errors"]
    assert python_threads(proc_of(doc, handle.rank(1)))
    assert "Stack backtrace" not in result.stdout and "anyhow" not in result.stdout
    text = hangscope_cli("dump", str(handle.launcher), "--samples", "1",
                         env=fake_env(fake, "fail", victim, handle))
    no_traceback(text)
    assert text.returncode == 0
    assert "simulated failure" in flat(text.stdout)


# -- no permission ---------------------------------------------------------------------------

TEST_USER = "hangscope-rel"


@pytest.fixture(scope="module")
def unprivileged_user() -> Iterator[pwd.struct_passwd]:
    """A throwaway system user (created idempotently, removed after the module)."""
    if os.geteuid() != 0:
        pytest.skip("creating a user needs root")
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        pytest.skip("needs setpriv and useradd (util-linux, passwd)")
    created = False
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        TEST_USER], check=True, capture_output=True)
        created = True
        entry = pwd.getpwnam(TEST_USER)
    try:
        yield entry
    finally:
        if created:
            subprocess.run(["userdel", TEST_USER], check=False, capture_output=True)


def as_user(user: pwd.struct_passwd, argv: list[str], env: dict[str, str],
            timeout: float = 60, read_cap: bool = False) -> subprocess.CompletedProcess[str]:
    """Run argv as ``user`` with no capabilities (``read_cap``: keep only CAP_DAC_READ_SEARCH,
    for an interpreter installed where that user may not look, such as /root/.pyenv)."""
    cmd = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    if read_cap:
        cmd += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False, cwd="/")


@pytest.mark.extended
def test_unprivileged_user_gets_exit_4_and_the_ptrace_remedy(
        job: Any, unprivileged_user: pwd.struct_passwd) -> None:
    """GIVEN a root-owned job WHEN an ordinary user runs hangscope on it THEN exit 4, a partial
    report, and the fix: root, CAP_SYS_PTRACE, ptrace_scope, Docker's --cap-add SYS_PTRACE."""
    from support import cli_env as _cli_env

    handle = job(ranks=2, mode="idle")
    env = _cli_env({"HOME": "/", "USER": TEST_USER})
    env.pop("HANGSCOPE_PYSPY", None)
    # Everything a dump imports (the venv may sit in a directory that user cannot read).
    probe = [sys.executable, "-c", "import hangscope.live.sampler, hangscope.render.output"]
    read_cap = as_user(unprivileged_user, probe, env).returncode != 0
    if read_cap and as_user(unprivileged_user, probe, env, read_cap=True).returncode != 0:
        pytest.skip(f"{TEST_USER} cannot run {sys.executable}")
    result = as_user(unprivileged_user, [sys.executable, "-m", "hangscope", "dump",
                                         str(handle.launcher), *FAST], env, read_cap=read_cap)
    no_traceback(result)
    assert result.returncode == 4, (result.returncode, result.stderr)
    err = result.stderr
    assert f"Not allowed to read the stacks of PID {handle.launcher}" in err
    for remedy in ("sudo hangscope", "CAP_SYS_PTRACE", "ptrace_scope", "--cap-add SYS_PTRACE"):
        assert remedy in err, f"{remedy!r} missing from: {err}"
    assert str(handle.rank(0)) in result.stdout, "the partial report was not printed"
    assert "needs root or CAP_SYS_PTRACE" in flat(result.stdout)
    assert "!!" not in result.stdout  # not py-spy's own `sudo env "PATH=$PATH" !!` advice
    assert_all_running(handle)


def test_kernel_log_an_ordinary_user_cannot_read_is_said(
        unprivileged_user: pwd.struct_passwd) -> None:
    """GIVEN kernel.dmesg_restrict=1 (or no CAP_SYSLOG) THEN the reader says the kernel log
    was not checked instead of silently finding no OOM kill."""
    from support import cli_env as _cli_env

    if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() != "1":
        pytest.skip("kernel.dmesg_restrict is 0 here: an ordinary user may read the log")
    env = _cli_env({"HOME": "/", "USER": TEST_USER})
    env.pop("HANGSCOPE_KMSG", None)
    code = "from hangscope.collect import kmsg; print(kmsg.read([1], None))"
    result = as_user(unprivileged_user, [sys.executable, "-c", code], env)
    if result.returncode != 0:
        result = as_user(unprivileged_user, [sys.executable, "-c", code], env, read_cap=True)
    no_traceback(result)
    assert "kernel log not checked: /dev/kmsg: Operation not permitted" in result.stdout


@pytest.mark.extended
@pytest.mark.parametrize("fmt", ["json", "md"])
def test_partial_report_on_permission_failure_honours_format_and_output(
        job: Any, unprivileged_user: pwd.struct_passwd, fmt: str) -> None:
    """GIVEN an ordinary user WHEN `dump --format json -o node.json` meets a root job THEN the
    partial report is written to node.json in that format (the per-node merge needs it), exit 4."""
    import tempfile

    from support import cli_env as _cli_env

    handle = job(ranks=2, mode="idle")
    env = _cli_env({"HOME": "/", "USER": TEST_USER})
    env.pop("HANGSCOPE_PYSPY", None)
    probe = [sys.executable, "-c", "import hangscope.live.sampler, hangscope.render.output"]
    read_cap = as_user(unprivileged_user, probe, env).returncode != 0
    if read_cap and as_user(unprivileged_user, probe, env, read_cap=True).returncode != 0:
        pytest.skip(f"{TEST_USER} cannot run {sys.executable}")
    outdir = Path(tempfile.mkdtemp(prefix="hs-partial-"))
    try:
        os.chown(outdir, unprivileged_user.pw_uid, unprivileged_user.pw_gid)
        out = outdir / f"node.{fmt}"
        result = as_user(unprivileged_user, [sys.executable, "-m", "hangscope", "dump",
                                             str(handle.launcher), "--format", fmt, "-o",
                                             str(out), *FAST], env, read_cap=read_cap)
        no_traceback(result)
        assert result.returncode == 4, (result.returncode, result.stderr)
        assert f"Not allowed to read the stacks of PID {handle.launcher}" in result.stderr
        assert f"wrote {fmt} report to {out}" in result.stderr
        assert result.stdout == "", "the report went to stdout instead of the file"
        text = out.read_text()
        if fmt == "json":
            doc = json.loads(text)
            assert {p["pid"] for p in doc["processes"]} >= {handle.rank(0), handle.rank(1)}
            errors = " ".join(e for p in doc["processes"] for e in p["errors"])
            assert "needs root or CAP_SYS_PTRACE" in errors
            if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1":
                # the kernel log is closed to this user too: the report says it was not read
                assert any(n.startswith("kernel log not checked: ") for n in doc["notes"])
        else:
            assert text.startswith("#") and str(handle.rank(0)) in text
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    assert_all_running(handle)


# -- no NVML, many threads, zombies, non-Python processes -------------------------------------

FAKE_PYNVML = {
    "missing": "raise ImportError('no pynvml here')\n",
    "no-driver": (
        "class NVMLError(Exception):\n"
        "    def __init__(self, value):\n"
        "        super().__init__(value)\n"
        "        self.value = value\n"
        "class NVMLLibraryMismatchError(Exception):\n"
        "    pass\n"
        "def nvmlInit():\n"
        "    raise NVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED\n"
    ),
    "hangs": (
        "import time\n"
        "class NVMLError(Exception):\n"
        "    pass\n"
        "class NVMLLibraryMismatchError(Exception):\n"
        "    pass\n"
        "def nvmlInit():\n"
        "    time.sleep(3600)  # a wedged driver\n"
    ),
}
NVML_NOTE = {
    "missing": "nvidia-ml-py (pynvml) is not installed",
    "no-driver": "no NVIDIA driver",
    "hangs": "NVML did not answer within 1 s",
}


@pytest.mark.extended
@pytest.mark.parametrize("case", sorted(FAKE_PYNVML))
def test_no_nvml_no_driver_or_stuck_nvml_still_gives_a_report(
        job: Any, tmp_path: Path, hangscope_cli: Any, case: str) -> None:
    handle = job(ranks=1, mode="idle")
    shadow = tmp_path / "pynvml-shadow"
    shadow.mkdir()
    (shadow / "pynvml.py").write_text(FAKE_PYNVML[case])
    from support import cli_env as _cli_env

    path = os.pathsep.join(p for p in (str(shadow), _cli_env(None).get("PYTHONPATH")) if p)
    started = time.monotonic()
    doc, _ = dump_doc(hangscope_cli, handle.launcher, "--timeout", "1",
                      env={"PYTHONPATH": path})
    assert time.monotonic() - started < 30
    assert doc["hosts"][0]["gpu_error"] == NVML_NOTE[case] or (
        case == "hangs" and doc["hosts"][0]["gpu_error"].startswith(NVML_NOTE[case]))
    assert python_threads(proc_of(doc, handle.rank(0)))
    text = hangscope_cli("dump", str(handle.launcher), "--samples", "1", "--timeout", "1",
                         env={"PYTHONPATH": path})
    no_traceback(text)
    assert NVML_NOTE[case] in flat(text.stdout)


@pytest.mark.extended
def test_rank_with_2000_threads_is_reported_whole(job: Any, hangscope_cli: Any) -> None:
    handle = job(ranks=1, mode="idle", args=["--threads", "2000"])
    doc, _ = dump_doc(hangscope_cli, handle.launcher, "--no-native", "--timeout", "60",
                      "--samples", "1", timeout=150)
    rank = proc_of(doc, handle.rank(0))
    assert rank["num_threads"] >= 2001
    assert len(python_threads(rank)) >= 2001
    assert {f"pool-{i}" for i in (0, 999, 1999)} <= {t["name"] for t in rank["threads"]}
    assert rank["errors"] == []
    assert_all_running(handle)


def test_zombie_and_non_python_child_are_reported_with_proc_facts(
        job: Any, hangscope_cli: Any) -> None:
    """GIVEN a launcher with a zombie child and a `sleep` child THEN both are listed (not
    dropped) with their /proc state; py-spy is not run on the zombie."""
    handle = job(ranks=2, mode="idle", args=["--zombie", "--foreign"],
                 expect=["zombie", "foreign"])
    doc, _ = dump_doc(hangscope_cli, handle.launcher)
    zombie = proc_of(doc, handle.pids["zombie"])
    assert zombie["state"] == "Z"
    assert any("zombie" in e for e in zombie["errors"])
    assert not any("py-spy" in e for e in zombie["errors"])
    assert "proc.zombie" in {f["id"] for f in doc["findings"]}
    foreign = proc_of(doc, handle.pids["foreign"])
    assert foreign["python"] is False
    assert foreign["cmdline"] == ["sleep", "600"]
    assert foreign["state"] == "S"
    assert foreign["rss"] and foreign["num_threads"] == 1
    assert [t["wchan"] for t in foreign["threads"]] != [None]
    assert any("not a Python process" in e for e in foreign["errors"])
    for rank in (0, 1):
        assert python_threads(proc_of(doc, handle.rank(rank)))


# -- bad PIDs on the command line -------------------------------------------------------------

@pytest.mark.parametrize(
    ("pid", "code", "words"),
    [
        ("0", 2, "not a process ID"),
        ("-1", 2, "not a process ID"),
        ("-99999999999999999999", 2, "not a process ID"),
        ("4194305", 2, "larger than any process ID"),
        ("99999999999999999999999999", 2, "larger than any process ID"),
        ("abc", 2, "not a process ID"),
        ("", 2, "not a process ID"),
        ("12abc", 2, "not a process ID"),
        ("1e3", 2, "not a process ID"),
        ("0x10", 2, "not a process ID"),
        ("2", 2, "kernel thread"),
    ],
)
def test_bad_pid_gets_a_sentence_and_an_exit_code(hangscope_cli: Any, pid: str, code: int,
                                                  words: str) -> None:
    # `attach` validates the PID before it opens the screen; a few cases prove that.
    for command in ("dump", "attach") if pid in ("0", "abc", "2") else ("dump",):
        result = hangscope_cli(command, pid)
        no_traceback(result)
        assert result.returncode == code, (command, result.stderr)
        assert words in result.stderr, result.stderr
        assert result.stdout == ""


def test_hangscope_own_pid_is_refused(hangscope_cli: Any) -> None:
    from support import cli_env as _cli_env

    # `exec` keeps the shell's PID, so $$ is hangscope's own PID.
    result = subprocess.run(["sh", "-c", f'exec "{sys.executable}" -m hangscope dump $$'],
                            capture_output=True, text=True, env=_cli_env(None), timeout=60,
                            check=False)
    no_traceback(result)
    assert result.returncode == 2
    assert "is hangscope itself" in result.stderr


def test_pid_that_is_gone_is_exit_3(hangscope_cli: Any) -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert not psutil.pid_exists(child.pid)
    result = hangscope_cli("dump", str(child.pid))
    no_traceback(result)
    assert result.returncode == 3
    assert f"No process with PID {child.pid} exists" in result.stderr
    assert "pgrep -af python" in result.stderr


def test_target_that_is_a_zombie_is_reported_as_exited(job: Any, hangscope_cli: Any) -> None:
    """GIVEN a job that exited but whose launcher is not yet reaped THEN a report that says so."""
    handle = job(ranks=2, mode="idle")
    for pid in [*handle.ranks, handle.launcher]:
        handle.make_exit(pid)
    wait_for(lambda: psutil.Process(handle.launcher).status() == psutil.STATUS_ZOMBIE, 10,
             "the launcher to become a zombie")
    doc, _ = dump_doc(hangscope_cli, handle.launcher)
    launcher = proc_of(doc, handle.launcher)
    assert launcher["state"] == "Z"
    assert any("zombie" in e for e in launcher["errors"])
    assert doc["verdict"]["kind"] == "missing_rank"
