"""Healthy jobs are never called hung, on real dumps of tests/targets/healthy_jobs.py
(tests/fixtures/healthy/*.dump.json: ``hangscope dump PID --format json`` of each mode),
analysed again by this analyzer; and their hung twins keep their verdicts.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.facts import facts_of
from hangscope.analyze.rules.slow import working_straggler
from hangscope.model import Severity, Snapshot, VerdictKind
from hangscope.model.serialize import load

HEALTHY = Path(__file__).parent.parent / "fixtures" / "healthy"


def reread(name: str) -> Snapshot:
    return analyze(load(HEALTHY / f"{name}.dump.json"))


def _rank(snap: Snapshot, rank: int) -> int:
    return next(p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank == rank)


def test_given_a_rank_that_calls_and_writes_while_the_others_wait_then_slow() -> None:
    snap = reread("vocab")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (_rank(snap, 1),)
    assert verdict.summary.startswith("Slow, not hung: rank 1 runs on CPU at "), verdict.summary
    assert "call chains" in verdict.summary and "wrote" in verdict.summary
    assert "Ranks 0,2 wait in all_reduce at rank_main (healthy_jobs.py:" in verdict.summary


def test_given_a_rank_spinning_in_one_loop_then_the_working_rule_does_not_hold() -> None:
    snap = reread("spin")
    assert working_straggler(facts_of(snap)) is None
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.STRAGGLER
    assert snap.verdict.suspects == (_rank(snap, 1),)


def test_given_an_idle_server_and_its_pool_reading_task_pipes_then_idle() -> None:
    snap = reread("asyncio_pool")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.IDLE, snap.verdict
    assert snap.progress is not None and snap.progress.decision == "idle"
    workers = [r for r in snap.progress.ranks if r.reason.startswith("waits for work from PID")]
    assert len(workers) == 2, snap.progress.ranks


def test_given_a_client_whose_request_was_dropped_then_a_wait_chain_to_the_server() -> None:
    snap = reread("asyncio_lost")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert "waits for a reply on TCP" in verdict.summary
    assert snap.progress is not None and snap.progress.decision not in ("idle", "paused")


def test_given_a_coordinator_asleep_between_phases_then_paused_with_idle_workers() -> None:
    snap = reread("phases")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PAUSED, verdict
    assert verdict.summary.count(" is idle at _worker (healthy_jobs.py:") == 2, verdict.summary
    assert " is paused at phases (healthy_jobs.py:" in verdict.summary
    # The worker waiting for the shared queue's read lock waits behind the one in its pipe: a
    # multiprocessing SemLock is shared, no lock stranded by fork.
    assert snap.progress is not None
    assert any("read lock of the multiprocessing.Queue" in r.reason for r in snap.progress.ranks)
    idle_cpu = next(f for f in snap.findings if f.id == "activity.idle")
    assert idle_cpu.severity is Severity.INFO and "as a job that is paused does" in idle_cpu.message


def _caught_in_its_handler(snap: Snapshot) -> Snapshot:
    """tests/targets/party_jobs.py loop_urlopen_ok as a loaded machine reads it (CI): the
    window's samples mostly in the event loop's select, six in the config fetch, and the last
    dump caught the main thread inside that fetch (urlopen's read of its reply)."""
    from dataclasses import replace

    from hangscope.model import Frame
    from hangscope.model.progress import StackCount

    reading = snap.readings[0]
    assert reading.progress is not None
    proc = reading.progress.processes[0]
    main = next(t for t in proc.threads if t.tid == proc.pid)
    loop = main.stacks[0].frames  # outermost first, ending in the selector's select
    handler = (*loop[:-1], "Handle._run (asyncio/events.py:80)", "main (party_jobs.py:509)",
               "handle_request (party_jobs.py:498)", "fetch_config (party_jobs.py:494)",
               "urlopen (urllib/request.py:216)", "HTTPResponse.begin (http/client.py:318)",
               "SocketIO.readinto (socket.py:706)")
    stacks = (StackCount(loop, main.samples), StackCount(handler, 6))
    moved = replace(main, samples=main.samples + 6, stacks=stacks)
    progress = replace(reading.progress, processes=(replace(proc, threads=tuple(
        moved if t.tid == main.tid else t for t in proc.threads)),))
    frames = tuple(Frame(name=text.split(" (")[0], file=text.split(" (")[1].split(":")[0],
                         line=int(text.rsplit(":", 1)[1][:-1])) for text in reversed(handler))
    processes = tuple(replace(p, threads=tuple(
        replace(t, frames=frames, wchan="sk_wait_data") if t.tid == p.pid else t
        for t in p.threads)) for p in snap.processes)
    return replace(snap, processes=processes, readings=(replace(reading, progress=progress),))


def test_given_an_event_loop_caught_in_a_sync_call_that_returns_then_idle() -> None:
    """CI: the last dump of a loop that fetches its config every 50 ms (synchronously, from
    its own thread's server) caught it in the fetch; the window saw it wait in its select most
    of the time. Where it waited most is what says idle, not the one sample at the end."""
    snap = analyze(_caught_in_its_handler(load(HEALTHY / "loop_urlopen.dump.json")))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.IDLE, snap.verdict
    assert snap.progress is not None and snap.progress.decision == "idle", snap.progress
    (rank,) = snap.progress.ranks
    assert rank.mostly[0] == "EpollSelector.select (selectors.py)", rank
    assert rank.reason.startswith("waits for requests on port "), rank.reason


def test_given_an_event_loop_the_window_saw_back_at_its_select_then_not_blocked() -> None:
    """tests/targets/party_jobs.py loop_urlopen_slow: each turn the loop fetches its config
    synchronously from a service that answers after 60 ms. Both dumps and the kernel caught
    the loop's thread in the fetch's socket read, but the window saw it at its selector's
    select in 25 of 43 samples: the read returns and the loop runs its tasks between (slow,
    not an event loop blocked)."""
    snap = reread("loop_urlopen_slow")
    assert snap.verdict is not None and snap.verdict.kind in (
        VerdictKind.IDLE, VerdictKind.PROGRESSING), snap.verdict
    assert not snap.verdict.summary.startswith("Event loop blocked"), snap.verdict.summary


def test_given_a_loop_the_window_saw_only_in_its_select_but_the_dump_caught_in_a_fetch() -> None:
    """tests/targets/party_jobs.py loop_urlopen_ok under xdist's load (as CI read it): all 52
    of the window's samples in the selector's select, the last dump on the few milliseconds
    of a config fetch, the kernel's syscall (read again) never back in it. The window's 52
    samples say idle, not the one dump: no "all waiting"."""
    snap = reread("loop_urlopen_caught")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.IDLE, snap.verdict


def test_given_an_engine_front_caught_handing_a_request_to_zmq_then_progressing() -> None:
    """tests/frameworks/test_zmq_engine.py's busy engine under CI's load: the front end's
    asyncio loop caught inside ``send_pyobj`` on a zmq.asyncio socket (libzmq writing its
    mailbox, the kernel already back in the loop's epoll_wait). A zmq send hands its message
    over and returns: no zmq receive, no "event loop blocked", no chain (CI read WAIT CHAIN,
    the front end the suspect)."""
    snap = reread("zmq_loop_sending")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING, snap.verdict
    assert snap.verdict.suspects == (), snap.verdict


def test_given_a_ray_queue_whose_producer_task_computes_the_next_item_then_progressing() -> None:
    """tests/targets/frameworks/ray_jobs.py queue_slow: the consumer waits in ``Queue.get``,
    the queue's actor (its loop idle, ``get`` in flight) awaits a put that the producer task,
    decoding its next shard, will make. The chain goes on to the producer, which works: not
    "a call nobody makes", not the queue's actor "waiting on a lock"."""
    snap = reread("ray_queue_producing")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING, snap.verdict
    assert snap.verdict.suspects == (), snap.verdict


def test_given_an_idle_tp2_vllm_server_whose_front_was_read_without_native_frames_then_idle(
) -> None:
    """The vLLM tier of 2026-12-05 read an idle TP 2 server "Deadlock" (its two Workers'
    zmq receives, a ring): its API server was read without pausing it, a Python stack alone
    under uvloop's run, so its serving loop was not seen; the kernel's wait channel
    (do_epoll_wait) says where a loop running in C waits."""
    snap = analyze(load(Path(__file__).parent.parent / "fixtures" / "frameworks"
                        / "vllm_tp2_idle_python_only.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.IDLE, snap.verdict
    assert snap.verdict.suspects == (), snap.verdict
