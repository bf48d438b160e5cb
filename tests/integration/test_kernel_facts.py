"""Hung and healthy jobs that only a kernel fact tells apart, on real processes
(tests/targets/kernelfact_jobs.py; blind round 12's misses).

GIVEN actors blocked writing their pty after ^S was written into its master, its holder
reading it THEN the terminal's output stopped, the master's holder the suspect. GIVEN a client
whose TCP socket is connected to itself (a self-connect) and a server that
cannot bind that port THEN a deadlock, the client the suspect, the self-connect and the failed
bind said. GIVEN a module body that joins a thread importing that module THEN a deadlock
between the join and the import lock. GIVEN a parent waiting for a non-Python child that
computes on a full CPU THEN progressing, never "all waiting". GIVEN a service reading an
inotify fd over an empty directory, its workers on its queue THEN idle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import FAST_WINDOW, TARGETS, dump_json, settled_dump, settled_job, show_text

JOBS = TARGETS / "kernelfact_jobs.py"


def test_a_socket_connected_to_itself_is_a_deadlock_and_the_bind_behind_it(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "self_connect", tmp_path, ["client", "server", "launcher"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"][0] == pids["client"], verdict
    summary = verdict["summary"]
    assert summary.startswith("Deadlock (a socket connected to itself): Thread MainThread of "
                              f"PID {pids['client']} (rollout-client) waits to read TCP "
                              "127.0.0.1:"), summary
    assert "a TCP self-connect" in summary, summary
    assert f"PID {pids['server']} (policy-server" in summary, summary
    assert "cannot listen on it: its log says “bind 127.0.0.1:" in summary, summary
    assert "Address already in use" in summary, summary


@pytest.mark.extended
def test_a_module_body_joining_a_thread_that_imports_it_is_a_deadlock(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "import_join", tmp_path, ["importer"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [pids["importer"]], verdict
    summary = verdict["summary"]
    assert "joins thread table-warmup" in summary, summary
    assert ("waits for the import lock of scoring.py, held by thread MainThread of PID "
            f"{pids['importer']} (eval-runner) (its import at build (scoring_helpers.py:11); "
            "thread MainThread is importing it") in summary, summary
    assert "start the thread from a function called after the import" in summary, summary


@pytest.mark.extended
def test_a_parent_waiting_for_a_native_child_that_computes_is_progressing(
        tmp_path: Path) -> None:
    with settled_job(JOBS, "native_busy", tmp_path, ["packer"]) as job:
        raw = dump_json(job.launcher, *FAST_WINDOW)
    data = json.loads(raw)
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert "sha256sum computes" in verdict["summary"], verdict
    assert "no Python stack to compare" in show_text(raw, tmp_path)


def test_a_service_reading_inotify_over_an_empty_folder_is_idle(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "drop_folder", tmp_path,
                              ["converter", "worker0", "worker1"])
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", verdict
    assert verdict["suspects"] == [], verdict
    converter = next(r for r in data["progress"]["ranks"] if r["pid"] == pids["converter"])
    assert converter["reason"].startswith(
        "waits for a file to be written where it watches (inotify), none yet"), converter
    # Its title keeps its arguments past the "/" in them.
    assert f"PID {pids['converter']} (drop-converter --inbox inbox/)" in json.dumps(data)


def test_a_pty_stopped_by_xoff_names_the_master_holder(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "tty_paused", tmp_path, ["relay", "actor"])
    verdict = data["verdict"]
    assert verdict["suspects"][0] == pids["relay"], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"A terminal's output stopped (^S): PID {pids['actor']} "
                              "(rollout-actor) is blocked writing to its terminal /dev/pts/"
                              ), summary
    assert f"whose master PID {pids['relay']} (console-relay) holds and waits to read" in (
        summary), summary
    assert "XOFF, ^S, 0x13" in summary, summary


@pytest.mark.extended
def test_one_connection_used_by_a_parent_and_its_fork_is_named(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "shared_conn", tmp_path, ["broker", "sampler", "trainer"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"][0] == pids["trainer"], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"One connection shared across fork: PID {pids['trainer']} "
                              f"(feature-trainer) and PID {pids['sampler']} (feature-sampler) "
                              "wait for replies on one connection, TCP 127.0.0.1:"), summary
    assert "Open a connection in each process after fork" in summary, summary


def test_jobs_stopped_by_a_parent_that_polls_are_paused(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "held", tmp_path, ["scheduler"])
    verdict = data["verdict"]
    assert verdict["kind"] == "paused", verdict
    assert verdict["suspects"] == [], verdict
    assert (f"stopped (state T: SIGSTOP) and their parent PID {pids['scheduler']}, alive and "
            "not stopped, sleeps") in verdict["summary"], verdict
    assert "resumes them with SIGCONT" in verdict["summary"], verdict


@pytest.mark.extended
def test_a_stopped_child_its_parent_waits_for_is_not_paused(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "held_waited", tmp_path, ["scheduler"])
    assert data["verdict"]["kind"] != "paused", data["verdict"]
