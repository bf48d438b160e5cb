"""Wait chains across processes end at the right suspect (issue 17): real hung jobs.

GIVEN a real job of tests/targets/chain_jobs.py, hung the way a real report describes (each
test cites it), WHEN ``hangscope dump PID --format json`` reads it, THEN the verdict names the
process that keeps the chain waiting and says why. No rule reads these jobs' names: the
sentences quote them only because they are the jobs' own frames.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from support import TARGETS, Target, dump_json, running_target

JOBS = TARGETS / "chain_jobs.py"
FAST = ("--samples", "2", "--window", "0.5")


def _dump(mode: str, tmp_path: Path, tags: list[str], *, zombie: str | None = None,
          ) -> tuple[dict[str, Any], dict[str, int]]:
    workdir = tmp_path / f"job-{mode}"
    ready = workdir / "ready"

    def settled(target: Target) -> bool:
        # The exited child is a zombie before the dump (its parent never reaps it).
        if zombie is None:
            return True
        pid = target.pids.get(zombie)
        try:
            return pid is not None and psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    with running_target([sys.executable, str(JOBS), mode, str(ready), str(workdir)], workdir,
                        tags=tags + ([zombie] if zombie else []), ready=settled) as job:
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    return data, pids


@pytest.mark.extended
def test_a_daemon_that_inherited_the_output_pipe_is_the_suspect_not_the_exited_shell(
        tmp_path: Path) -> None:
    """Real report: python/cpython#76116 (communicate() waits for EOF on a pipe a background
    grandchild inherited; the shell that started it exited)."""
    data, pids = _dump("daemon_output", tmp_path, ["tool", "daemon"], zombie="shell")
    tool, shell, daemon = pids["tool"], pids["shell"], pids["daemon"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict  # not a "missing rank": the job has none
    assert verdict["suspects"] == [daemon]
    summary = verdict["summary"]
    assert f"(PID {tool}) is blocked reading pipe" in summary, summary
    assert f"which only PID {daemon} (" in summary
    assert f"waits for EOF, but its child PID {shell} already exited with code 0, a zombie" \
        in summary
    assert "inherited the write end and keeps it open" in summary
    (zombie,) = [f for f in data["findings"] if f["id"] == "proc.zombie"]
    assert zombie["severity"] == "warning" and "waits forever" not in zombie["message"]


@pytest.mark.extended
def test_a_live_heartbeat_holding_the_pipe_is_the_suspect_not_progress(tmp_path: Path) -> None:
    """Real report: python/cpython#76116 again, with a live helper (issue 35, a helper
    process decides): the background process that keeps the pipe is a heartbeat, waking every
    0.1 s to write its own file. Its beats are no progress of the job: the reader never woke,
    so nothing reached its pipe."""
    data, pids = _dump("heartbeat_output", tmp_path, ["tool", "heartbeat"], zombie="shell")
    tool, beat = pids["tool"], pids["heartbeat"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict  # was "progressing": the beats decided
    assert verdict["suspects"] == [beat]
    assert f"PID {tool} (python) is blocked reading pipe" in verdict["summary"], verdict
    assert "inherited the write end and keeps it open" in verdict["summary"]
    decided = {r["pid"]: r for r in data["progress"]["ranks"]}
    assert decided[beat]["decision"] == "stuck", decided[beat]  # a poller's ticks
    assert "woke" in decided[beat]["reason"], decided[beat]


@pytest.mark.extended
def test_a_script_that_works_beside_a_heartbeat_progresses(tmp_path: Path) -> None:
    """The twin: the script prints a line every 0.1 s to the pipe its reader reads, a
    heartbeat (its output sent to /dev/null) beats beside it: progressing, nobody blamed."""
    data, pids = _dump("heartbeat_busy", tmp_path, ["tool", "shell", "heartbeat"])
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert not verdict["suspects"], verdict
    decided = {r["pid"]: r["decision"] for r in data["progress"]["ranks"]}
    assert decided[pids["tool"]] == "progressing", decided  # its reads of the script's lines


def test_a_child_prompting_on_a_stdin_pipe_its_parent_never_writes_is_the_suspect(
        tmp_path: Path) -> None:
    """Real report: nco/pynco#56 (a tool run with stdin=PIPE asks to overwrite; no input ever
    comes and its caller waits for it)."""
    data, pids = _dump("asker", tmp_path, ["peer", "child", "driver"])
    child, driver, peer = pids["child"], pids["driver"], pids["peer"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict  # not a deadlock of two pipes
    assert verdict["suspects"] == [child]
    summary = verdict["summary"]
    assert summary.startswith("A prompt nobody answers: "), summary
    assert f"PID {child} (python) waits for input on its stdin (pipe" in summary
    assert "asker_child (chain_jobs.py:" in summary
    assert f"(PID {driver}) holds its write end, and never writes it" in summary
    assert f"waits for its child PID {child}" in summary
    assert "stdin=subprocess.DEVNULL" in summary
    # The peer waiting on the driver leads the chain.
    assert summary.index(f"PID {peer}") < summary.index(f"PID {child} (python) waits for input")


@pytest.mark.extended
def test_a_rank_that_left_its_loop_early_into_a_store_wait_is_the_odd_one_out(
        tmp_path: Path) -> None:
    """Real report: pytorch/pytorch#33148 (uneven inputs: a rank with fewer batches leaves the
    loop and waits on the store while the others wait in the gradient all_reduce)."""
    data, pids = _dump("early_store", tmp_path, ["rank0", "rank1", "rank2"])
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank1"]]  # not rank 0, the store's owner
    summary = verdict["summary"]
    assert summary.startswith("Mismatched collectives: ranks 0,2 wait in all_reduce at "
                              "early_rank (chain_jobs.py:"), summary
    assert "rank 1 waits on the c10d store (TCPStore wait/get) for 'finished' at early_rank" \
        in summary, summary
    assert "The odd one out is rank 1." in summary


@pytest.mark.extended
def test_ranks_waiting_for_a_store_key_set_under_a_prefix_are_grouped_and_the_key_named(
        tmp_path: Path) -> None:
    """Real report: pytorch/pytorch#67972 (a store get of a key that is not set blocks until
    the timeout); here rank 0 marks a step done through a PrefixStore, so the key gains its
    prefix, and enters all_reduce, while ranks 1 and 2 wait for the bare key. The key comes
    from the waiters' line and its locals (py-spy --locals), not from any name of this job."""
    data, pids = _dump("prefixed_key", tmp_path, ["rank0", "rank1", "rank2"])
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["rank0"]]  # where the key was (not) set
    summary = verdict["summary"]
    assert summary.startswith("Wait chain: Ranks 1-2 wait in TCPStore.wait for key "
                              "'step2/saved' of the c10d store at 127.0.0.1:"), summary
    assert "at prefixed_rank (chain_jobs.py:" in summary
    assert "outside any collective" in summary
    assert f"rank 0 (PID {pids['rank0']}) waits in all_reduce at prefixed_rank " \
           "(chain_jobs.py:" in summary and " for them" in summary
    assert "nobody set 'step2/saved'; look where rank 0 sets it" in summary
    assert "PrefixStore prepends its prefix" in summary
    keys = {r["pid"]: r["store_keys"] for r in data["waits"]["locals"]}
    assert keys[pids["rank1"]] == keys[pids["rank2"]] == ["step2/saved"], keys


@pytest.mark.extended
def test_a_rank_that_left_its_loop_early_into_a_barrier_is_the_odd_one_out(
        tmp_path: Path) -> None:
    """Real report: pytorch/pytorch#38174 (the Join RFC: a rank out of inputs enters the next
    collective of its own, a barrier, while the others wait in their gradient all_reduce)."""
    data, pids = _dump("early_barrier", tmp_path, ["rank0", "rank1", "rank2"])
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank1"]]
    assert "rank 1 waits in barrier at early_rank (chain_jobs.py:" in verdict["summary"]
    assert "The odd one out is rank 1." in verdict["summary"]


@pytest.mark.extended
def test_two_single_threaded_servers_calling_each_other_over_loopback_are_a_deadlock(
        tmp_path: Path) -> None:
    """Real report: puma/puma#612 (a handler's request needs the same single-threaded server;
    the connection waits in its accept queue)."""
    data, pids = _dump("callback", tmp_path, ["client", "a_asks_b", "b_asks_a"])
    a, b = pids["a_asks_b"], pids["b_asks_a"]
    backlog = [e for e in data["wait_graph"]["edges"]
               if e["kind"] == "tcp" and e["pid"] == b and "accept queue" in e["how"]]
    assert backlog and backlog[0]["to_pid"] == a, data["wait_graph"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) <= {a, b} and verdict["suspects"]
    summary = verdict["summary"]
    assert f"from PID {a} (python), which has not even accepted that connection" in summary
    assert "serve requests on more threads" in summary


@pytest.mark.extended
def test_pool_workers_all_inside_tasks_that_wait_for_a_queued_task_saturate_the_pool(
        tmp_path: Path) -> None:
    """Real report: PrefectHQ/prefect#14194 (tasks that wait for other tasks hang once they
    fill the bounded pool: the tasks they wait for stay queued behind them)."""
    data, pids = _dump("pool_chain", tmp_path, ["driver", "task_0", "task_1"])
    driver, workers = pids["driver"], {pids["task_0"], pids["task_1"]}
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert set(verdict["suspects"]) == workers  # not the Manager, nor the driver
    summary = verdict["summary"]
    assert summary.startswith(f"Pool saturated: PID {driver} (python) waits for a result of "
                              "its multiprocessing Pool at pool_chain (chain_jobs.py:"), summary
    assert "all 2 workers are busy with tasks that themselves wait" in summary
    assert "in task stitch (chain_jobs.py:" in summary
    assert "is the multiprocessing Manager" in summary
    assert "saturated by tasks waiting for tasks" in summary


@pytest.mark.extended
@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_both_ends_of_one_connection_reading_it_are_a_deadlock_of_the_handler_thread(
        tmp_path: Path, family: str) -> None:
    """Real report: rust-lang/socket2#39 (a server reads a request to EOF; the client sends it
    and, keeping its socket open, waits for the answer): the uploader's wait leads to the
    server's handler thread blocked on the peer socket, not to its main thread in accept."""
    workdir = tmp_path / f"job-half_close-{family}"
    ready = workdir / "ready"

    def blocked(pid: int | None, tid: int | None = None) -> bool:
        # in its recv (unix_stream_read_generic, wait_woken), past its ready-file write
        with contextlib.suppress(OSError):
            wchan = Path(f"/proc/{pid}/task/{tid or pid}/wchan").read_text()
            return wchan not in ("", "0") and "sleep" not in wchan and "poll" not in wchan
        return False

    def reading(target: Target) -> bool:
        server = target.pids.get("server")
        handlers = [int(t) for t in os.listdir(f"/proc/{server}/task") if int(t) != server] \
            if server is not None else []
        return blocked(target.pids.get("uploader")) and any(blocked(server, t) for t in handlers)

    argv = [sys.executable, str(JOBS), "half_close", str(ready), str(workdir), family]
    with running_target(argv, workdir, tags=["server", "reader", "uploader"],
                        ready=reading) as job:
        data = json.loads(dump_json(job.launcher, *FAST))
        server, uploader = job.pids["server"], job.pids["uploader"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) == {server, uploader}, verdict
    summary = verdict["summary"]
    assert f"PID {uploader} (python) and thread Thread-1 (process_request_thread) of PID " \
           f"{server} (python) both wait to read the same connection" in summary, summary
    assert "neither sends" in summary and "shutdown(socket.SHUT_WR)" in summary
    assert "in the accept queue" not in summary
    handler = [e for e in data["wait_graph"]["edges"] if e["pid"] == uploader
               and e["kind"] in ("tcp", "unix")]
    assert handler and handler[0]["to_pid"] == server and handler[0]["to_tid"], handler


@pytest.mark.extended
def test_both_ends_of_one_connection_writing_it_with_full_buffers_are_a_deadlock(
        tmp_path: Path) -> None:
    """The classic socket pitfall (each side sendall()s a large payload before it reads the
    other's: both kernel buffers fill and both block in send): no side's main thread, no
    accept queue, just the two senders."""
    workdir = tmp_path / "job-both_send"

    def sending(target: Target) -> bool:
        for tag in ("primary", "replica"):
            pid = target.pids.get(tag)
            with contextlib.suppress(OSError):
                if pid is None or "wait" not in Path(f"/proc/{pid}/wchan").read_text():
                    return False
        return True

    argv = [sys.executable, str(JOBS), "both_send", str(workdir / "ready"), str(workdir)]
    with running_target(argv, workdir, tags=["primary", "replica"], ready=sending) as job:
        data = json.loads(dump_json(job.launcher, *FAST))
        primary, replica = job.pids["primary"], job.pids["replica"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) == {primary, replica}, verdict
    summary = verdict["summary"]
    assert "both wait to send on the same connection, and neither reads" in summary, summary
    assert "both socket buffers are full" in summary


@pytest.mark.extended
def test_of_two_ranks_the_one_past_the_loop_in_a_store_get_is_the_odd_one(
        tmp_path: Path) -> None:
    """The same with 2 ranks (no majority): rank 1 waits in ``store.get("finished")`` past
    the loop rank 0 still runs (its all_reduce inside it): rank 1 left first, it alone is the
    suspect, and the key it waits for is named from its line."""
    data, pids = _dump("early_pair", tmp_path, ["rank0", "rank1"])
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank1"]], verdict
    summary = verdict["summary"]
    assert "rank 1 waits on the c10d store (TCPStore wait/get) for 'finished' at early_rank" \
        in summary, summary
    assert "Rank 1 waits after the loop at early_rank (chain_jobs.py:" in summary, summary
    assert "The odd one out is rank 1." in summary, summary
