"""The classifier on real stacks: the H200 captures in tests/fixtures/gpu (see its README).

GIVEN a real py-spy capture WHEN it is classified THEN it gets its true category, op and site.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangscope.analyze.classify import classify_thread, pick_working_thread
from hangscope.analyze.signatures import op_from_name
from hangscope.collect.pyspy import parse_dump
from hangscope.model import Category, Frame, Thread

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"


def load_thread(case: str, kind: str = "native", wchan: str | None = None,
                state: str | None = None) -> Thread:
    """The main thread of a capture, as the sampler builds it (py-spy JSON + /proc wchan)."""
    text = (FIXTURES / f"{case}.{kind}.json").read_text()
    dump = parse_dump(1, text, native=kind == "native")
    assert dump.ok, dump.error
    main = dump.threads[0]
    return Thread(tid=main.tid, name=main.name, active=main.active, owns_gil=main.owns_gil,
                  frames=main.frames, wchan=wchan, state=state)


def proc_wchan(case: str) -> tuple[str, str]:
    """The main thread's state and wchan from the capture's /proc listing (first line)."""
    first = (FIXTURES / f"{case}.proc.txt").read_text().splitlines()[0].split()
    return first[2], first[3] if len(first) > 3 and first[3] != "0" else ""


@pytest.mark.parametrize(
    ("case", "kind", "category", "op", "site_function", "context"),
    [
        ("sync", "native", Category.CUDA_SYNC, None, "wait_for_gpu", None),
        ("sync", "py", Category.CUDA_SYNC, None, "wait_for_gpu", None),
        ("item", "native", Category.CUDA_LAUNCH, None, "read_result", None),
        ("capture", "native", Category.LOCK, None, "capture_graph", "cuda_graph_capture"),
        ("capture", "py", Category.LOCK, None, "capture_graph", "cuda_graph_capture"),
        ("nccl_init", "native", Category.COMM_INIT, None, "nccl_init", None),
        ("nccl_init", "py", Category.COMM_INIT, None, "nccl_init", None),
        ("triton", "native", Category.JIT_COMPILE, None, "triton_loop", None),
    ],
)
def test_given_real_gpu_capture_when_classified_then_true_category(
        case: str, kind: str, category: Category, op: str | None, site_function: str,
        context: str | None) -> None:
    state, wchan = proc_wchan(case) if (FIXTURES / f"{case}.proc.txt").exists() else ("S", "")
    thread = classify_thread(load_thread(case, kind, wchan=wchan or None, state=state))
    assert thread.category is category
    assert thread.op == op
    assert thread.site is not None and thread.site.startswith(site_function), thread.site
    assert "gpu_hangs.py:" in thread.site
    assert thread.context == context


def test_given_sync_spin_wait_when_classified_then_wait_not_running() -> None:
    # The capture's thread is *active* (libcuda spin-waits) and state R: still a wait.
    thread = load_thread("sync", "native", state="R")
    assert thread.active is True
    assert classify_thread(thread).category is Category.CUDA_SYNC


def test_given_nccl_init_polling_with_nanosleep_then_init_not_sleep() -> None:
    thread = classify_thread(load_thread("nccl_init", "native", wchan="hrtimer_nanosleep"))
    assert thread.frames[0].name == "clock_nanosleep"
    assert thread.category is Category.COMM_INIT


def test_given_gloo_and_nccl_symbols_when_op_parsed_then_normalised() -> None:
    assert op_from_name("ncclAllReduce") == "all_reduce"
    assert op_from_name("pncclAllGather") == "all_gather"
    assert op_from_name("c10d::ProcessGroupNCCL::_allgather_base") == "all_gather"
    assert op_from_name("c10d::ProcessGroupGloo::AsyncAllreduceWork::run") == "all_reduce"
    assert op_from_name("all_gather_into_tensor") == "all_gather"
    assert op_from_name("broadcast_object_list") == "broadcast_object_list"
    assert op_from_name("unrelated_function") is None


def test_given_cuda_process_helper_threads_then_main_thread_is_working_thread() -> None:
    # A CUDA process has ~15 futex threads and the driver's threads; py-spy sees only Python
    # threads, and /proc adds the rest. The working thread must be the main thread.
    main = classify_thread(load_thread("sync", "native", state="R"))
    helpers = []
    for line in (FIXTURES / "sync.proc.txt").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) < 4 or not parts[0].isdigit():
            break
        helpers.append(classify_thread(Thread(tid=int(parts[0]), name=parts[1], state=parts[2],
                                              wchan=parts[3], python=False)))
    assert len(helpers) >= 15
    assert pick_working_thread([*helpers, main]) is main


def test_given_idle_watchdog_thread_then_it_is_a_helper() -> None:
    watchdog = classify_thread(Thread(tid=2, name="pt_nccl_watchdg", state="S",
                                      wchan="futex_do_wait", python=False))
    assert watchdog.helper


def test_given_take_gil_at_top_then_gil_wait_beats_zmq_below() -> None:
    # spyder #6911: re-acquiring the GIL after zmq_poll returned.
    frames = (
        Frame("take_gil", "libpython3.11.so", native=True, module="libpython3.11.so"),
        Frame("PyEval_RestoreThread", "libpython3.11.so", native=True, module="libpython3.11.so"),
        Frame("zmq_poll", "libzmq.so", native=True, module="libzmq.so"),
        Frame("poll", "/venv/lib/python3.11/site-packages/zmq/sugar/poll.py", 106),
    )
    thread = classify_thread(Thread(tid=1, frames=frames))
    assert thread.category is Category.GIL_WAIT
