"""A newcomer's first hour (issue 20): hangscope run as a user runs it, from a shell.

GIVEN a shell, a real hung demo job or a real non-Python process, WHEN ``hangscope`` runs as a
process (in a shell, in a tmux pane for Ctrl-C), THEN the exit code and the words the user reads
say what to do. Every process a test starts is killed at teardown, even when it fails.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import support
from test_reliability import unprivileged_user  # noqa: F401  (a fixture: a throwaway user)

HANGSCOPE = [sys.executable, "-m", "hangscope"]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; each is killed (its whole tree) at teardown."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for p in tree:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                continue
        proc.wait(timeout=10)


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def test_dump_of_the_shell_it_runs_in_is_refused() -> None:
    # WHEN a user types `hangscope dump $$` in a shell (not exec'd: the shell is its parent)
    result = subprocess.run(["bash", "-c", f"{shlex.join(HANGSCOPE)} dump $$; exit $?"],
                            capture_output=True, text=True, env=support.cli_env(), timeout=120,
                            check=False)
    # THEN hangscope does not diagnose itself: rc 2 and a sentence with the fix
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "is the shell hangscope runs in" in result.stderr
    assert "pgrep -af python" in result.stderr


def test_shell_that_runs_a_job_and_hangscope_reports_the_job_not_hangscope(tmp_path: Path) \
        -> None:
    # GIVEN a shell that started a Python job in the background, then hangscope on itself
    ready = tmp_path / "ready"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import pathlib, sys, time\n"
                       "pathlib.Path(sys.argv[1]).write_text('up')\ntime.sleep(600)\n")
    script = (f"{shlex.quote(sys.executable)} {shlex.quote(str(sleeper))} "
              f"{shlex.quote(str(ready))} >/dev/null 2>&1 & job=$!; "
              f"while [ ! -s {shlex.quote(str(ready))} ]; do sleep 0.05; done; "
              f"timeout 120 {shlex.join(HANGSCOPE)} dump $$ --format json --samples 2 "
              "--window 0.5; rc=$?; kill $job; exit $rc")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                            env=support.cli_env(), timeout=180, check=False)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    import json

    snap = json.loads(result.stdout)
    cmdlines = [" ".join(p["cmdline"]) for p in snap["processes"]]
    # THEN the job is the shell and its sleeper: no hangscope, no py-spy, no `live/sampler.py` stack
    # (the shell's own command line is the script, which names hangscope: it is the launcher)
    assert len(cmdlines) == 2 and cmdlines[0].startswith("bash -c"), cmdlines
    assert cmdlines[1].endswith("ready") and "sleeper.py" in cmdlines[1], cmdlines
    assert "live/sampler.py" not in result.stdout


def test_non_python_pid_is_refused_up_front(started: list[subprocess.Popen[bytes]]) -> None:
    # GIVEN a process that is not Python and has no Python relatives
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    started.append(sleeper)
    t0 = time.monotonic()
    result = support.run_cli("dump", str(sleeper.pid), timeout=120)
    # THEN refused before any sampling: rc 2, what it is and what to give instead
    no_traceback(result)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert f"PID {sleeper.pid} (sleep) is not a Python process" in result.stderr
    assert "pgrep -af python" in result.stderr
    assert time.monotonic() - t0 < 60


def test_non_python_child_of_a_python_process_names_the_parent(
        started: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    # GIVEN `sleep` started by a Python process (a job's helper, say)
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; "
         "p = subprocess.Popen(['sleep', '600']); open(sys.argv[1], 'w').write(str(p.pid)); "
         "time.sleep(600)", str(pid_file)], start_new_session=True)
    started.append(parent)
    child = int(support.poll(lambda: pid_file.exists() and pid_file.read_text(), "the child"))
    result = support.run_cli("dump", str(child), timeout=120)
    # THEN the fix names the parent to give instead
    no_traceback(result)
    assert result.returncode == 2
    assert f"Its parent, PID {parent.pid}, runs Python: `hangscope dump {parent.pid}`" \
        in result.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_ctrl_c_stops_every_py_spy_at_once(demo_job: Any, py_spy: str, tmp_path: Path) -> None:
    # GIVEN a hung job and a long dump of it running in a terminal (tmux)
    job = demo_job("deadlock")
    rc_file, err_file = tmp_path / "rc", tmp_path / "err"
    command = (f"{shlex.join(HANGSCOPE)} dump {job.pid} --window 30 --samples 30 "
               f"> /dev/null 2> {shlex.quote(str(err_file))}; "
               f"echo $? > {shlex.quote(str(rc_file))}")
    socket = f"hangscope-ctrlc-{time.monotonic_ns()}"
    env_prefix = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "hs",
                    "-x", "80", "-y", "24", env_prefix + command], check=True, timeout=10)
    try:
        job_pids = {p.pid for p in (psutil.Process(job.pid),
                                    *psutil.Process(job.pid).children(recursive=True))}

        def samplers() -> list[psutil.Process]:
            out = []
            for p in psutil.process_iter(["cmdline"]):
                cmd = p.info["cmdline"] or []
                if any("py-spy" in c for c in cmd[:2]) and "--pid" in cmd and \
                        int(cmd[cmd.index("--pid") + 1]) in job_pids:
                    out.append(p)
            return out

        # WHEN the user presses Ctrl-C twice while py-spy runs (the recorders, at least)
        support.poll(samplers, "py-spy to run on the job", timeout=120)
        t0 = time.monotonic()
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "hs", "C-c"], check=True)
        time.sleep(0.05)  # the second: the pane may be gone already (hangscope exited)
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "hs", "C-c"],
                       capture_output=True, check=False)
        rc = support.poll(lambda: rc_file.exists() and rc_file.read_text().strip(),
                          "hangscope to exit", timeout=30)
        took = time.monotonic() - t0
        # THEN rc 130 within a fraction of a second, a sentence, no traceback, no py-spy left
        assert rc == "130", err_file.read_text()
        assert took < 1.5, f"Ctrl-C took {took:.2f} s"
        err = err_file.read_text()
        assert "interrupted (Ctrl-C)" in err and "Traceback" not in err, err
        assert not samplers(), [p.cmdline() for p in samplers()]
        # and the job is as it was: nothing stopped
        assert all(psutil.Process(pid).status() != psutil.STATUS_STOPPED for pid in job_pids)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10,
                       check=False)


@pytest.fixture
def python_sleeper(started: list[subprocess.Popen[bytes]]) -> int:
    """A Python process (root's, as the tests run), asleep for good."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            start_new_session=True)
    started.append(proc)
    support.poll(lambda: "time" in " ".join(psutil.Process(proc.pid).cmdline()), "the sleeper")
    return proc.pid


def test_permission_denied_leads_with_the_cause_and_the_fix(
        python_sleeper: int, unprivileged_user: Any) -> None:  # noqa: F811 (the fixture)
    from test_reliability import TEST_USER, as_user

    # GIVEN a root job WHEN an ordinary user dumps it
    env = support.cli_env({"HOME": "/", "USER": TEST_USER})
    env.pop("HANGSCOPE_PYSPY", None)
    probe = [sys.executable, "-c", "import hangscope.live.sampler, hangscope.render.output"]
    read_cap = as_user(unprivileged_user, probe, env).returncode != 0
    result = as_user(unprivileged_user, [*HANGSCOPE, "dump", str(python_sleeper), "--samples",
                                         "2", "--window", "0.5"], env, read_cap=read_cap)
    no_traceback(result)
    assert result.returncode == 4, result.stderr
    # THEN the verdict is the cause, not a diagnosis no stack supports, and the fix in
    # hangscope's words (never py-spy's `sudo env "PATH=$PATH" !!`)
    head = "\n".join(result.stdout.splitlines()[:4])
    assert "VERDICT: NO STACKS" in head and "No stack could be read" in head, result.stdout
    assert "ALL WAITING" not in result.stdout
    assert f"sudo hangscope dump {python_sleeper}" in result.stdout
    assert "!!" not in result.stdout + result.stderr


def test_verbose_says_where_the_dump_time_went(python_sleeper: int) -> None:
    # WHEN a user asks a cold dump where its time went (issue 22: the fixed cost over py-spy)
    started = time.monotonic()
    result = support.run_cli("dump", str(python_sleeper), "--samples", "1", "--verbose",
                             timeout=120)
    wall = time.monotonic() - started
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    # THEN stderr has one line of phases, in order, whose total is the command's own time
    line = next(li for li in result.stderr.splitlines() if li.startswith("hangscope: phases:"))
    names = [part.rsplit(" ", 2)[0].strip() for part in line.split(": ", 2)[2].split(";")[0]
             .split(", ")]
    assert names == ["start", "parser", "imports", "discover", "first round (py-spy)",
                     "window", "locals and waits", "analysis", "render"], line
    total = float(line.rsplit("total ", 1)[1].split()[0])
    assert 0 < total <= wall + 0.05, (line, wall)
    assert "VERDICT" in result.stdout  # the report itself is unchanged on stdout


def test_pyspy_path_that_is_wrong_gives_a_proc_only_report(python_sleeper: int) -> None:
    # WHEN HANGSCOPE_PYSPY names no binary
    result = support.run_cli("dump", str(python_sleeper), "--samples", "2", "--window", "0.5",
                             env={"HANGSCOPE_PYSPY": "/nope"}, timeout=120)
    no_traceback(result)
    # THEN a /proc-only report that says why, rc 5, and the fix is about that path
    assert result.returncode == 5, result.stderr
    assert "VERDICT: NO STACKS" in result.stdout and "ALL WAITING" not in result.stdout
    assert str(python_sleeper) in result.stdout
    assert "HANGSCOPE_PYSPY points to '/nope'" in result.stderr
    assert "pip install" not in result.stderr
    assert "unset it" in result.stderr


def test_show_of_a_markdown_report_names_the_json_beside_it(tmp_path: Path) -> None:
    # GIVEN a report saved as both Markdown and JSON (what attach's `s` key writes)
    dump = tmp_path / "hangscope-1.json"
    shutil.copy(support.SNAPSHOTS / "deadlock.json", dump)
    md = tmp_path / "hangscope-1.md"
    assert support.run_cli("show", str(dump), "--format", "md", "-o", str(md)).returncode == 0
    # WHEN the user shows the Markdown one
    result = support.run_cli("show", str(md))
    no_traceback(result)
    # THEN rc 6 and the file to pass instead
    assert result.returncode == 6
    assert "is a Markdown report" in result.stderr
    assert f"hangscope show {dump}" in result.stderr


@pytest.mark.parametrize("argv", [["attach", "{pid}"], ["show", "{dump}", "--tui"]])
def test_tui_without_a_terminal_is_refused(python_sleeper: int, argv: list[str]) -> None:
    # WHEN the TUI is asked for with no terminal (`ssh node hangscope attach PID`, no -t)
    args = [a.format(pid=python_sleeper, dump=support.SNAPSHOTS / "deadlock.json") for a in argv]
    result = subprocess.run([*HANGSCOPE, *args], stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, env=support.cli_env(), timeout=120, check=False)
    # THEN rc 2 at once, no escape codes, and the two ways out
    no_traceback(result)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "needs a terminal" in result.stderr
    assert "ssh -t" in result.stderr and "hangscope dump PID" in result.stderr


@pytest.mark.extended
def test_window_asked_for_is_the_window_used_and_reported(shared_demo: Any, py_spy: str) -> None:
    # GIVEN torch ranks, whose first (native) round takes seconds on a busy host
    job = shared_demo("mismatch")
    # WHEN the user asks for half a second between two samples
    result = support.run_cli("dump", str(job.pid), "--window", "0.5", "--samples", "2",
                             "--format", "json", timeout=300)
    assert result.returncode == 0, result.stderr
    import json

    doc = json.loads(result.stdout)
    # THEN the window is that half second (not the first round's seconds added to it), and
    # the progress measured agrees with it
    assert 0.5 <= doc["window_s"] < 0.8, doc["window_s"]
    assert abs(doc["progress"]["seconds"] - doc["window_s"]) < 0.1, doc["progress"]["seconds"]


def test_help_says_the_defaults_each_command_uses_and_every_key() -> None:
    attach = support.run_cli("attach", "--help").stdout
    # attach samples 2 times over 1 s (dump: 3 over 2 s): its help says so
    assert "over the window (default 2)" in attach and "(default 1.0)" in attach
    for key in ("space", "1 2 3 4", "tab", "enter", "pgup", "home end", "h f1", " c ", " p "):
        assert key in attach, key
    dump = support.run_cli("dump", "--help").stdout
    assert "over the window (default 3)" in dump and "(default 2.0)" in dump
    assert "format (default text)" in dump
    for text in (attach, dump, support.run_cli("demo", "--help").stdout,
                 support.run_cli("show", "--help").stdout):
        assert "``" not in text  # RST double backticks are not terminal text


@pytest.mark.extended
def test_pyspy_spellings_and_unknown_flags_point_at_the_commands_help(
        python_sleeper: int) -> None:
    # `-p PID` and `--json`, as a py-spy user types them
    result = support.run_cli("dump", "-p", str(python_sleeper), "--json", "--samples", "1",
                             timeout=120)
    assert result.returncode == 0, result.stderr
    import json

    assert python_sleeper in {p["pid"] for p in json.loads(result.stdout)["processes"]}
    wrong = support.run_cli("dump", str(python_sleeper), "--bogus")
    assert wrong.returncode == 2
    assert "unrecognized argument: --bogus. See `hangscope dump --help`." in wrong.stderr
    both = support.run_cli("dump", "1", "-p", "2")
    assert both.returncode == 2 and "Two PIDs given" in both.stderr


@pytest.mark.extended
def test_demo_keep_leaves_the_demo_hung_until_ctrl_c(py_spy: str) -> None:
    import signal

    # WHEN `hangscope demo deadlock --keep` has printed its report
    proc = subprocess.Popen([*HANGSCOPE, "demo", "deadlock", "--keep", "--samples", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=support.cli_env(), start_new_session=True)
    try:
        import threading

        err: list[str] = []
        threading.Thread(target=lambda: err.extend(proc.stderr or ()), daemon=True).start()

        def kept() -> str | None:
            text = "".join(err)
            return text if "the demo stays hung" in text else None

        text = support.poll(kept, "the --keep line", timeout=120)
        pid = int(text.split("stays hung (launcher PID ")[1].split(")")[0])
        # THEN the demo is still there for `hangscope dump PID`
        other = support.run_cli("dump", str(pid), "--samples", "1", timeout=120)
        assert other.returncode == 0 and "LOCAL DEADLOCK" in other.stdout, other.stderr
        # and Ctrl-C stops it and cleans up
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_report_at_80_columns_keeps_bullets_indented_and_ends_with_the_verdict() -> None:
    # WHEN a report is piped at 80 columns (tmux's default width)
    result = support.run_cli("show", str(support.SNAPSHOTS / "straggler.json"),
                             env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").split("\n")
    # THEN no line is wider, none ends in padding, a wrapped bullet keeps its indent
    assert max(len(line) for line in lines) <= 80
    assert not [line for line in lines if line != line.rstrip()]
    start = next(i for i, line in enumerate(lines) if "· ranks 0-2 (PIDs" in line)
    assert lines[start + 1].startswith("│     "), lines[start:start + 2]
    # and the last line says the verdict again (it scrolled far up), as pytest does
    assert lines[-1] == "== VERDICT: STRAGGLER · suspect: rank 3 (PID 8035) =="
