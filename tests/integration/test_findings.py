"""Findings on real processes: what `hangscope dump PID` tells a user about a broken job.

GIVEN a small job from tests/targets/ that has reached its broken state (ready-file handshake)
WHEN `hangscope dump PID` samples it
THEN the findings in the JSON, text and Markdown reports say what is wrong, in sentences.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import support
from support import Target, poll, running_target

from hangscope.collect import procfs

TARGETS = support.TARGETS
REPO_ROOT = support.REPO_ROOT
DUMP_ARGS = ("--samples", "2", "--window", "0.5")
READY_TIMEOUT_S = 90.0  # generous: a loaded machine starts torch slowly

pytest.importorskip("setproctitle")


# -- harness ----------------------------------------------------------------------------

def _wait_state(pid: int, state: str) -> None:
    """Poll /proc/PID/stat until the process is in ``state`` (T, D, ...)."""
    poll(lambda: (found := procfs.read_stat(pid)) is not None and found.state == state,
         f"PID {pid} in state {state}", READY_TIMEOUT_S, interval=0.02)


def start_target(stack: ExitStack, tmp: Path, script: str, *args: str,
                 ready_lines: int) -> Target:
    """``tests/targets/SCRIPT --ready-file F ARGS`` once F has ``ready_lines`` lines (its
    ``pids``: PID by what each line says); killed, group and all, when ``stack`` closes."""
    workdir = tmp / script.removesuffix(".py")
    return stack.enter_context(running_target(
        [sys.executable, str(TARGETS / script), "--ready-file", str(workdir / "ready"), *args],
        workdir, ready=lambda t: len(t.ready_lines()) >= ready_lines, timeout=READY_TIMEOUT_S))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_cli(*args: str, env: dict[str, str] | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """The CLI, which must succeed without a traceback."""
    result = support.run_cli(*args, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def findings_of(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for finding in doc["findings"]:
        out.setdefault(finding["id"], []).append(finding)
    return out


def pid_of_title(doc: dict[str, Any], title: str) -> int:
    return next(p["pid"] for p in doc["processes"] if p["title"] == title)


def kmsg_record(seq: int, seconds_since_boot: float, text: str) -> str:
    return f"3,{seq},{int(seconds_since_boot * 1e6)},-;{text}\n"


def boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise AssertionError("no btime")


# -- one broken server, dumped once ---------------------------------------------------

@dataclass
class BrokenServer:
    target: Target
    port: int
    log: Path
    doc: dict[str, Any]
    text: str
    markdown: str


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokenServer]:
    """An SGLang-shaped launcher that never binds --port, spawns 2 of --tp-size 4 schedulers,
    leaves a zombie child (exit 3), has TP0 log a CUDA error to a file, has TP1 reserve twice
    the machine's RAM and run ``ptxas``; plus a kernel log with an OOM kill and an Xid."""
    tmp = tmp_path_factory.mktemp("broken-server")
    port = free_port()
    with ExitStack() as stack:
        target = start_target(stack, tmp, "server.py", "--port", str(port), "--tp-size", "4",
                              "--workers", "2", "--zombie", "3", "--log-dir", str(tmp),
                              "--reserve-factor", "2", "--compiler", ready_lines=3)
        uptime = time.time() - boot_time()
        kernel_log = tmp / "kmsg.txt"
        kernel_log.write_text(
            kmsg_record(1, 1.0, "Out of memory: Killed process 777 (java) total-vm:1kB")
            + kmsg_record(2, uptime, "Out of memory: Killed process 4190001 (python) "
                          "total-vm:81234567kB, anon-rss:23456789kB, file-rss:0kB")
            + kmsg_record(3, uptime, f"NVRM: Xid (PCI:0000:3b:00): 79, "
                          f"pid={target.pids['worker0']}, name=python, GPU has fallen off "
                          "the bus."))
        saved = tmp / "dump.json"
        run_cli("dump", str(target.pid), "--format", "json", "-o", str(saved), *DUMP_ARGS,
                env={"HANGSCOPE_KMSG": str(kernel_log)})
        doc = json.loads(saved.read_text())
        text = run_cli("show", str(saved)).stdout
        markdown = run_cli("show", str(saved), "--format", "md").stdout
        yield BrokenServer(target, port, tmp / "rank0.log", doc, text, markdown)


@pytest.mark.extended
def test_launcher_that_never_binds_its_port_is_not_listening(broken_server: BrokenServer) -> None:
    found = findings_of(broken_server.doc)
    (listen,) = found["listen.missing"]
    port = broken_server.port
    assert listen["severity"] == "critical"
    assert listen["message"].startswith(f"The server is not listening on its port {port} "
                                        f"(--port {port}): no process of the job holds it")
    assert "the job listens on no TCP port at all" in listen["message"]


def test_fewer_workers_than_tp_size_is_named_once(broken_server: BrokenServer) -> None:
    doc = broken_server.doc
    assert doc["job"]["expected_ranks"] == 4
    assert doc["verdict"]["kind"] == "missing_rank"
    assert "expected 4 ranks (--tp-size 4), found 0-1: ranks 2-3 are missing" in (
        doc["verdict"]["summary"])
    # The verdict says it; a finding would only repeat it.
    assert "ranks.missing" not in findings_of(doc)


def test_zombie_child_with_its_exit_code(broken_server: BrokenServer) -> None:
    (zombie,) = findings_of(broken_server.doc)["proc.zombie"]
    launcher = broken_server.target.pid
    assert zombie["severity"] == "critical"
    assert zombie["evidence"]["exit_code"] == 3
    assert zombie["evidence"]["ppid"] == launcher
    assert f"a child of the launcher (PID {launcher}), exited with code 3 and is a zombie " \
           "(<defunct>)" in zombie["message"]


def test_log_file_error_lines_are_shown_and_redacted(broken_server: BrokenServer) -> None:
    doc = broken_server.doc
    rank0 = broken_server.target.pids["worker0"]
    (log,) = findings_of(doc)["log.errors"]
    assert log["severity"] == "warning"
    assert log["message"].startswith(f"Rank 0 (PID {rank0}) logged 2 error lines to "
                                     f"{broken_server.log}, last written ")
    assert log["message"].endswith("the last: “RuntimeError: CUDA error: out of memory”.")
    assert log["evidence"]["errors"] == ["Traceback (most recent call last):",
                                         "RuntimeError: CUDA error: out of memory"]
    proc = next(p for p in doc["processes"] if p["pid"] == rank0)
    assert proc["log_tail"][-1] == "[TP0] Retrying memory pool init after error."
    # The secret in the log is masked everywhere hangscope writes it.
    for output in (json.dumps(doc), broken_server.text, broken_server.markdown):
        assert "abcdefghijklmnopqrstuvwxyz0123456789" not in output
    assert any("connecting to hub with token=" in line and "***" in line
               for line in proc["log_tail"])
    # The user sees the error lines under the finding, in text and Markdown.
    assert "│ RuntimeError: CUDA error: out of memory" in broken_server.text
    assert "  RuntimeError: CUDA error: out of memory" in broken_server.markdown


def test_reserved_address_space_is_called_overcommit_not_use(broken_server: BrokenServer) -> None:
    doc = broken_server.doc
    rank1 = broken_server.target.pids["worker1"]
    (over,) = findings_of(doc)["mem.overcommit"]
    assert over["severity"] == "info"
    assert over["evidence"]["factor"] >= 2.0
    message = over["message"]
    assert message.startswith("The job has reserved ")
    assert f"Rank 1 (PID {rank1}) alone reserves" in message or \
        f"rank 1 (PID {rank1}) alone reserves" in message
    assert "That is address space, not use: only " in message
    (usage,) = findings_of(doc)["mem.usage"]
    assert "resident" in usage["message"] and "of RAM" in usage["message"]
    assert "mem.pressure" not in findings_of(doc)


def test_compiler_under_a_rank_and_its_age(broken_server: BrokenServer) -> None:
    (compiler,) = findings_of(broken_server.doc)["compile.running"]
    rank1 = broken_server.target.pids["worker1"]
    assert compiler["evidence"]["program"] == "ptxas"
    assert compiler["evidence"]["rank_pid"] == rank1
    assert 0 <= compiler["evidence"]["age_s"] < 60
    assert compiler["message"].startswith(f"The compiler ptxas (PID {compiler['evidence']['pid']}) "
                                          "has been running for ")
    assert f"under rank 1 (PID {rank1}): the rank waits for a GPU kernel to compile" in \
        compiler["message"]


def test_idle_ranks_age_and_stuck_stacks(broken_server: BrokenServer) -> None:
    found = findings_of(broken_server.doc)
    (idle,) = found["activity.idle"]
    assert idle["message"].startswith("Every rank was idle on CPU for the whole ")
    (age,) = found["age.job"]
    assert f"(its launcher, PID {broken_server.target.pid})" in age["message"]
    (stacks,) = found["age.stacks"]
    assert stacks["message"].startswith("No rank's stack changed during the ")


def test_kernel_oom_kill_and_xid_since_the_job_started(broken_server: BrokenServer) -> None:
    found = findings_of(broken_server.doc)
    (oom,) = found["kernel.oom"]  # the older kill of PID 777 predates the job: not shown
    assert oom["severity"] == "critical"
    assert oom["message"].startswith("The kernel's OOM killer killed PID 4190001 (python) at ")
    (xid,) = found["kernel.xid"]
    rank0 = broken_server.target.pids["worker0"]
    assert xid["severity"] == "critical"
    assert xid["message"].startswith(
        "The GPU driver reported Xid 79 on PCI:0000:3b:00 at ")
    assert f", for rank 0 (PID {rank0}): the GPU has fallen off the bus." in xid["message"]


def test_findings_are_ordered_and_never_repeat_the_verdict(broken_server: BrokenServer) -> None:
    doc = broken_server.doc
    order = {"critical": 0, "warning": 1, "info": 2}
    severities = [order[f["severity"]] for f in doc["findings"]]
    assert severities == sorted(severities)
    for finding in doc["findings"]:
        assert finding["message"] not in doc["verdict"]["summary"]
        assert finding["message"][0].isupper() or finding["message"][0].isdigit()
        assert finding["message"].endswith(".")
    # Text report: the verdict, then the findings, the port first.
    text = broken_server.text
    assert text.index("VERDICT") < text.index("Findings") < text.index(
        "The server is not listening") < text.index("Where the ranks are")


# -- a stopped rank, a bound port --------------------------------------------------------

@pytest.mark.extended
def test_stopped_rank_is_named_and_left_stopped(tmp_path: Path) -> None:
    port = free_port()
    with ExitStack() as stack:
        target = start_target(stack, tmp_path, "server.py", "--port", str(port), "--bind",
                              "--tp-size", "2", "--workers", "2", ready_lines=3)
        rank1 = target.pids["worker1"]
        os.kill(rank1, signal.SIGSTOP)
        stack.callback(os.kill, rank1, signal.SIGCONT)
        _wait_state(rank1, "T")
        doc = json.loads(run_cli("dump", str(target.pid), "--format", "json", *DUMP_ARGS).stdout)
        # hangscope leaves a stopped process as it found it.
        assert Path(f"/proc/{rank1}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    found = findings_of(doc)
    (stopped,) = found["proc.stopped"]
    assert stopped["severity"] == "critical"
    assert stopped["message"].startswith(
        f"Rank 1 (PID {rank1}) is stopped (state T: SIGSTOP, Ctrl-Z or a debugger)")
    assert f"`kill -CONT {rank1}` resumes it" in stopped["message"]
    (listen,) = found["listen.ok"]
    assert listen["message"] == f"Port {port} (--port) is open, held by the launcher " \
                                f"(PID {target.pid})."
    (count,) = found["ranks.count"]
    assert count["message"] == "Expected 2 TP schedulers (--tp-size 2) and found all 2."


# -- uninterruptible sleep ------------------------------------------------------------

def test_uninterruptible_process_shows_wchan_and_kernel_stack(tmp_path: Path) -> None:
    with ExitStack() as stack:
        target = start_target(stack, tmp_path, "vfork_stuck.py", ready_lines=1)
        _wait_state(target.pid, "D")
        # ptrace cannot stop a process in D: read its memory without stopping it.
        doc = json.loads(run_cli("dump", str(target.pid), "--format", "json", *DUMP_ARGS,
                                 "--nonblocking").stdout)
    found = findings_of(doc)
    (stuck,) = [f for f in found["proc.uninterruptible"]
                if f["evidence"]["pid"] == target.pid]
    assert stuck["severity"] == "warning"
    # A Python root that works (here: in vfork) is no launcher (analyze/evidence/roots.py): named
    # by PID.
    assert f"PID {target.pid} (python) is in uninterruptible sleep (state D)" in stuck["message"]
    if stuck["evidence"]["kernel_stack"]:  # /proc/PID/stack needs root
        assert any("vfork" in line for line in stuck["evidence"]["kernel_stack"])
        assert stuck["evidence"]["lines"] == stuck["evidence"]["kernel_stack"][:8]


# -- the SGLang-style demo ---------------------------------------------------------------

@pytest.mark.extended
def test_sglang_demo_report_opens_with_port_schedulers_and_idle(tmp_path: Path) -> None:
    """The first findings of the demo's text report: no port, schedulers found, all idle."""
    pytest.importorskip("torch")
    port = free_port()
    with ExitStack() as stack:
        # Ready: two schedulers in their collectives, the detokenizer.
        proc = stack.enter_context(running_target(
            [sys.executable, str(REPO_ROOT / "demo" / "sglang_like.py"), "--tp-size", "2",
             "--port", str(port), "--ready-file", str(tmp_path / "sglang.ready")], tmp_path,
            ready_file=tmp_path / "sglang.ready", ready=lambda t: len(t.ready_lines()) >= 3,
            timeout=READY_TIMEOUT_S))
        text = run_cli("dump", str(proc.pid), *DUMP_ARGS, "--no-native").stdout
    words = " ".join(text.split())  # undo the terminal's line wrapping
    findings = words[words.index("Findings"):words.index("Where the ranks are")]
    first = [findings.index(s) for s in (
        f"✖ The server is not listening on its port {port} (--port {port}): no process of "
        "the job holds it; the job listens only on other ports (",
        "⚠ Every rank was idle on CPU for the whole ",
        "• Expected 2 TP schedulers (--tp-size 2) and found all 2.",
    )]
    assert first == sorted(first)
    # Nothing else comes between them and the verdict but more severe findings.
    assert findings.index("•") == first[2]
