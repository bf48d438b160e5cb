"""The wait-for graph on real hung jobs (issue 17, items 1-3): each edge kind, each pattern.

GIVEN a real job of tests/targets/waitgraph_jobs.py, hung the way a real report describes (each
test cites it), WHEN ``hangscope dump PID --format json`` reads it, THEN the JSON's
``wait_graph`` holds the edge the kernel or the interpreter shows, and the verdict names the
pattern, the suspect and the chain in one sentence. No rule reads these jobs' file or
function names: the sentences quote them only because they are the jobs' own frames.

GIVEN rank 0 of a gloo job at a ``cmd.Cmd`` prompt reading a FIFO whose write end every rank and
the launcher hold (inherited), while ranks 1-2 wait in barrier for it
(tests/targets/prompt_jobs.py) THEN no deadlock: the prompt nobody answers, rank 0 the suspect
at its own line, the holders of the write end named as able to answer; GIVEN the launcher
answering the console every 20 ms (the healthy twin) THEN progressing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import TARGETS, dump_json, job_dump, poll, verdict_job

JOBS = TARGETS / "waitgraph_jobs.py"
#: Two samples half a second apart: the progress watcher and a stuck/moved call, quickly.
FAST = ("--samples", "2", "--window", "0.5")


def _dump(mode: str, tmp_path: Path, tags: list[str],
          settled: Callable[[dict[str, int]], bool] | None = None,
          ) -> tuple[dict[str, Any], dict[str, int]]:
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        if settled is not None:  # the ready mark comes a moment before the blocking call
            poll(lambda: settled(job.pids) or None, f"{mode} to block", timeout=30)
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    return data, pids


def _in_sleep(pid: int) -> bool:
    """A thread of ``pid`` sleeps in the kernel's nanosleep (libc ``sleep`` called)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "wchan").read_text().startswith("hrtimer_nanosleep"):
                return True
        except OSError:
            continue
    return False


def _edges(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in data["wait_graph"]["edges"] if e["kind"] == kind]


@pytest.mark.extended
def test_popen_wait_on_a_child_blocked_writing_its_full_stdout_pipe_is_a_deadlock(
        tmp_path: Path) -> None:
    """Real report: google/turbinia#945 (Popen.wait with stdout=PIPE; the child blocks once
    the pipe is full, 0 % CPU, never exits)."""
    data, pids = _dump("popen_pipe", tmp_path, ["parent", "child"])
    parent, child = pids["parent"], pids["child"]
    assert any(e["pid"] == parent and e["to_pid"] == child for e in _edges(data, "child"))
    pipe = [e for e in _edges(data, "pipe") if e["pid"] == child]
    assert pipe and pipe[0]["to_pid"] == parent and pipe[0]["fd"] == 1, data["wait_graph"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [parent]
    summary = verdict["summary"]
    assert f"waits for its child PID {child}" in summary and "list_jobs" in summary, summary
    assert "is blocked writing its stdout (pipe" in summary and f"(PID {parent}) reads" in summary
    assert "read the child's output while waiting" in summary
    assert any(line.startswith("wait-for: ") for line in verdict["evidence"])


def test_join_before_draining_a_queue_whose_feeder_blocks_is_a_deadlock(tmp_path: Path) -> None:
    """Real report: n8n-io/n8n#19084 (the child's queue feeder blocks writing the pipe at
    64 KB while the parent sits in process.join())."""
    data, pids = _dump("mp_queue", tmp_path, ["parent", "child"])
    parent, child = pids["parent"], pids["child"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [parent]
    assert "joins thread QueueFeederThread" in verdict["summary"]
    assert any(e["pid"] == child and e["to_pid"] == parent for e in _edges(data, "pipe"))


@pytest.mark.extended
def test_a_unix_socket_client_waits_for_a_server_stuck_in_its_handler(tmp_path: Path) -> None:
    """Real report: SDL-Hercules-390/hyperion#377 (a request waits on a handler that never
    answers); here the client and the server are two processes of one job."""
    data, pids = _dump("unix_server", tmp_path, ["server", "client"])
    server, client = pids["server"], pids["client"]
    edge = _edges(data, "unix")
    assert edge and edge[0]["pid"] == client and edge[0]["to_pid"] == server
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain" and verdict["suspects"] == [server], verdict
    assert "waits for a reply on Unix socket" in verdict["summary"]
    # The server serves (it waits on no child): a worker of the job (analyze/evidence/roots.py
    # working_roots), named by its PID, not "the launcher".
    assert f"PID {server} (python) sleeps at forever" in verdict["summary"]
    # Item 8: the traceback its reply thread died with is part of the chain.
    assert "ends in an error: 'RuntimeError: reply cache corrupted'" in verdict["summary"]


@pytest.mark.extended
def test_a_tcp_client_on_this_host_waits_for_the_server_process(tmp_path: Path) -> None:
    """Real report: Git-on-my-level/codex-autorunner#1375 (a local server accepts TCP and
    returns no bytes; the client waits forever)."""
    data, pids = _dump("tcp_server", tmp_path, ["server", "client"])
    server, client = pids["server"], pids["client"]
    edge = _edges(data, "tcp")
    assert edge and edge[0]["pid"] == client and edge[0]["to_pid"] == server, data["wait_graph"]
    assert data["verdict"]["suspects"] == [server]
    assert "waits for a reply on TCP 127.0.0.1:" in data["verdict"]["summary"]


def _lock_cycle(mode: str, tmp_path: Path) -> None:
    data, pids = _dump(mode, tmp_path, ["a_blocked", "b_blocked"])
    a, b = pids["a_blocked"], pids["b_blocked"]
    edges = {(e["pid"], e["to_pid"]) for e in _edges(data, "file_lock")}
    assert edges == {(a, b), (b, a)}, data["wait_graph"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    summary = verdict["summary"]
    assert "index.lock" in summary and "cache.lock" in summary, summary
    assert "take the locks in the same order" in summary


def test_two_processes_each_waiting_for_the_others_flock_is_a_deadlock(tmp_path: Path) -> None:
    """Real report: openSUSE/open-build-service#1606 (two processes flock'ing files and
    hanging; a deadlock needs a cycle over different files)."""
    _lock_cycle("flock", tmp_path)


@pytest.mark.extended
def test_ofd_locks_show_pid_minus_one_yet_the_holders_are_named(tmp_path: Path) -> None:
    """Real report: juicedata/juicefs#774 (no deadlock detection for these locks: the
    kernel detects POSIX lock cycles only). OFD locks are pid -1 in /proc/locks; fdinfo
    names the holder."""
    _lock_cycle("ofd", tmp_path)


@pytest.mark.quiet  # the spinning main thread shows in take_gil only with a core to wait on
def test_a_thread_holding_the_gil_in_a_c_call_is_what_the_others_wait_for(
        tmp_path: Path) -> None:
    """Real report: P1sec/pysctp#7 (all Python threads hang while one blocks in a C call
    that does not release the GIL)."""
    data, pids = _dump("gil", tmp_path, ["main", "holder"],
                       settled=lambda pids: _in_sleep(pids["holder"]))
    gil = _edges(data, "gil")
    assert gil, data["wait_graph"]
    proc = data["processes"][0]
    owner = next(t for t in proc["threads"] if t["owns_gil"])
    assert gil[0]["to_tid"] == owner["tid"] and owner["name"] == "native-call"
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain" and verdict["suspects"] == [pids["main"]], verdict
    assert "waits for the GIL, which thread native-call" in verdict["summary"]


def test_threads_waiting_for_a_lock_held_by_a_thread_in_recv_name_the_probable_holder(
        tmp_path: Path) -> None:
    """Real report: KxSystems/kafka#42 (a socket blocks while holding a lock, and the
    process hangs); here one lock, eight waiters, thirty idle threads."""
    data, _ = _dump("lock_recv", tmp_path, ["threads"])
    proc = data["processes"][0]
    holder = next(t for t in proc["threads"] if t["name"] == "refresher")
    edges = _edges(data, "py_lock")
    assert len(edges) == 8 and {e["to_tid"] for e in edges} == {holder["tid"]}
    assert all(e["probable"] for e in edges)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict  # not a lock-order inversion: one lock
    summary = verdict["summary"]
    assert "8 threads of" in summary and "probably held by thread refresher" in summary
    assert "thread refresher" in summary and "waits for a reply on Unix socket" in summary
    assert "lock-order" not in summary and "prefetch" not in summary, summary


def test_a_child_forked_while_a_thread_held_a_lock_waits_on_it_forever(tmp_path: Path) -> None:
    """Real report: python/cpython#19416 (bpo-40091: a hang at fork in the logging module,
    its lock inherited held by the child)."""
    data, pids = _dump("fork_lock", tmp_path, ["parent", "child"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [pids["child"]]
    assert f"forked from the launcher (PID {pids['parent']}) without exec" in verdict["summary"]
    assert "start children with 'spawn' or 'forkserver'" in verdict["summary"]


@pytest.mark.extended
def test_a_pool_whose_worker_was_killed_waits_for_a_result_nobody_computes(
        tmp_path: Path) -> None:
    """Real report: python/cpython#96062 (multiprocessing.Pool stuck forever when a worker is
    killed; the pool starts a replacement, the task is lost)."""
    data, pids = _dump("pool_lost", tmp_path, ["driver"])
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["driver"]]
    summary = verdict["summary"]
    assert "waits for a result of its multiprocessing Pool" in summary
    assert "all 2 workers idle" in summary and "replaced a worker" in summary, summary
    killed = pids["busy"]
    assert f"worker {killed} " not in summary  # the replacement is named, not the dead one


@pytest.mark.extended
def test_input_on_a_fifo_nobody_writes_under_a_filtering_launcher_is_a_prompt(
        tmp_path: Path) -> None:
    """Real report: pytorch/torchtitan#652 (torch.distributed.breakpoint(rank=1) hangs because
    --local-ranks-filter 0 hides rank 1's prompt)."""
    data, pids = _dump("prompt", tmp_path, ["child", "launcher"])
    child = pids["child"]
    edge = [e for e in _edges(data, "fifo") if e["pid"] == child]
    assert edge and edge[0]["to_pid"] is None and edge[0]["fd"] == 0, data["wait_graph"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain" and verdict["suspects"] == [child], verdict
    assert "waits for input on FIFO" in verdict["summary"]
    assert "runs with --local-ranks-filter 0" in verdict["summary"]


@pytest.mark.extended
def test_an_asyncio_loop_blocked_by_a_sync_recv_in_a_coroutine_is_named(tmp_path: Path) -> None:
    """Real report: python/cpython#107470 (one nonresponsive peer blocks the whole asyncio
    loop); here a coroutine calls a blocking sock.recv, as in SGLang-style servers."""
    data, pids = _dump("asyncio_recv", tmp_path, ["loop", "peer"])
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["loop"]]
    summary = verdict["summary"]
    assert "asyncio event loop" in summary and "inside fetch_tokens" in summary, summary
    assert f"waiting for PID {pids['peer']}" in summary


@pytest.mark.extended
def test_a_tcpstore_get_of_a_key_never_set_waits_for_the_stores_owner(tmp_path: Path) -> None:
    """Real report: pytorch/pytorch#154563 (ranks left waiting in the store for a rank that
    will not act); here rank 1 waits in TCPStore.get for a key rank 0 never sets. The wait is
    a poll on the store's socket, read from the poll's pollfd array."""
    with verdict_job("store_get", tmp_path, ["owner", "waiter"], jobs=JOBS, timeout=120) as job:
        data = json.loads(dump_json(job.launcher, *FAST))
        owner, waiter = job.pids["owner"], job.pids["waiter"]
    edge = _edges(data, "store")
    assert edge and edge[0]["pid"] == waiter and edge[0]["to_pid"] == owner, data["wait_graph"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain" and verdict["suspects"] == [owner], verdict
    # The key comes from the waiter's line and locals (py-spy --locals of its caller's frame).
    assert "waits in TCPStore.get for key 'ready_to_train' of the c10d store at 127.0.0.1:" in (
        verdict["summary"])
    assert "nobody set 'ready_to_train'; look where PID " in verdict["summary"]


PROMPT_JOBS = TARGETS / "prompt_jobs.py"
PROMPT_TAGS = ["launcher", "rank0", "rank1", "rank2"]


@pytest.mark.extended
def test_a_rank_at_a_console_prompt_on_a_fifo_its_peers_could_write_is_the_suspect(
        tmp_path: Path) -> None:
    data, pids = job_dump("unanswered", tmp_path, PROMPT_TAGS, PROMPT_JOBS)
    verdict = data["verdict"]
    assert (verdict["kind"], verdict["suspects"]) == ("wait_chain", [pids["rank0"]]), verdict
    summary = verdict["summary"]
    line = PROMPT_JOBS.read_text().splitlines().index(
        "            Console(stdin=commands, stdout=sys.stdout).cmdloop()") + 1
    assert summary.startswith("A prompt nobody answers: "), summary
    assert (f"rank 0 (PID {pids['rank0']}) waits for input on FIFO "
            f"{tmp_path / 'job-unanswered' / 'console'} at rank_main (prompt_jobs.py:{line}) "
            "(a prompt), which nobody answers") in summary, summary
    assert "hold its write end and could answer, but none writes" in summary, summary
    assert "waits in barrier" in summary, summary


@pytest.mark.extended
def test_a_rank_whose_console_the_launcher_answers_is_progressing(tmp_path: Path) -> None:
    data, _ = job_dump("answered", tmp_path, PROMPT_TAGS, PROMPT_JOBS)
    assert data["verdict"]["kind"] == "progressing", data["verdict"]


def _parked(pids: dict[str, int]) -> bool:
    """Both workers' threads sleep in the kernel (the exit's join, the feeders' write or
    write-lock wait): the ready mark comes before the worker returns from its target."""
    def asleep(pid: int) -> bool:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return len(tasks) >= 2 and all((t / "stat").read_text().rsplit(")", 1)[1].split()[0]
                                       == "S" for t in tasks)
    return all(asleep(pids[w]) for w in ("worker0", "worker1"))


@pytest.mark.extended
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_joining_two_queue_writers_before_draining_is_a_deadlock_with_the_lock_holder(
        tmp_path: Path, method: str) -> None:
    """Real report: python/cpython#73983 and blind round 15's 08 (torch.multiprocessing.spawn's
    parent joins its workers before it gets their results): the worker whose feeder holds the
    queue's write lock is blocked on the full pipe, the other's feeder waits for that lock. The
    other worker holds the pipe's read end only as every process given the queue does: it is no
    reader, never the suspect; the parent, which joins before it drains, is."""
    data, pids = _dump(f"queue_pair_{method}", tmp_path, ["worker0", "worker1", "parent"],
                       settled=_parked)
    parent, verdict = pids["parent"], data["verdict"]
    assert (verdict["kind"], verdict["suspects"]) == ("deadlock", [parent]), verdict
    summary = verdict["summary"]
    assert "get every result from the queue before join()" in summary, summary
    writer = next(e["pid"] for e in _edges(data, "pipe")
                  if e["pid"] in (pids["worker0"], pids["worker1"]) and "(read end)" in e["object"])
    other = pids["worker1"] if writer == pids["worker0"] else pids["worker0"]
    # the writer's pipe is read only by the parent; the other worker waits for its lock
    clause = summary.split(f"QueueFeederThread of PID {writer} (python) is blocked writing")[1]
    readers = clause.split(" reads")[0].split("which only ")[1]
    assert readers in (f"the launcher (PID {parent})", f"PID {parent} (python)"), summary
    assert f"PID {other} (python) waits for the write lock" in summary, summary
    assert any(e["pid"] == other and e["to_pid"] == writer for e in _edges(data, "queue_lock"))


@pytest.mark.extended
def test_draining_the_queue_before_joining_its_writers_is_no_hang(tmp_path: Path) -> None:
    """The twin: the parent gets both results, joins, and sleeps: nothing waits on anyone."""
    data, pids = _dump("queue_pair_drained", tmp_path, ["worker0", "worker1", "parent"])
    verdict = data["verdict"]
    assert verdict["kind"] not in ("deadlock", "wait_chain", "unknown"), verdict
    live = {p["pid"] for p in data["processes"] if not p.get("exit_code")}
    assert pids["parent"] in live and not {pids["worker0"], pids["worker1"]} & live, live
    assert not _edges(data, "queue_lock") and not _edges(data, "pipe"), data["wait_graph"]
