"""The classifier on real stacks: the H200 captures in tests/fixtures/gpu (see its README).

GIVEN a real py-spy capture WHEN it is classified THEN it gets its true category, op and site.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import support

from hangscope.analyze.evidence.classify import (
    classify_process,
    classify_thread,
    pick_working_thread,
)
from hangscope.analyze.evidence.signatures import op_from_name
from hangscope.collect.pyspy import parse_dump
from hangscope.model import Category, Frame, Process, Thread

FIXTURES = support.FIXTURES / "gpu"


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
        # Inside torch.cuda.graph(), but only the user's own capture_graph is on the stack:
        # a user function's name is not evidence of capture (no torch/cuda/graphs.py frame).
        ("capture", "native", Category.LOCK, None, "capture_graph", None),
        ("capture", "py", Category.LOCK, None, "capture_graph", None),
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


def test_given_torch_2_13_tensor_collectives_then_ops_and_the_users_line() -> None:
    # torch 2.13 names the tensor forms all_gather_single / reduce_scatter_single: FSDP2's
    # unshard in a forward pre-hook, reached through torch's own Sequential.forward.
    assert op_from_name("all_gather_single") == "all_gather"
    assert op_from_name("reduce_scatter_single") == "reduce_scatter"
    torch = "/venv/lib/python3.11/site-packages/torch"
    frames = (
        Frame("pthread_cond_wait", "/usr/lib/libc.so.6", None, native=True),
        Frame("all_gather_single", f"{torch}/distributed/distributed_c10d.py", 4394),
        Frame("foreach_all_gather", f"{torch}/distributed/fsdp/_fully_shard/"
              "_fsdp_collectives.py", 364),
        Frame("Module._call_impl", f"{torch}/nn/modules/module.py", 1884),
        Frame("Sequential.forward", f"{torch}/nn/modules/container.py", 253),
        Frame("train", "/job/train.py", 74),
    )
    thread = classify_thread(Thread(tid=1, name="MainThread", state="S",
                                    wchan="futex_do_wait", frames=frames))
    assert (thread.category, thread.op) == (Category.COLLECTIVE, "all_gather")
    assert thread.site == "train (train.py:74)"


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


def _eigh_returning() -> tuple[Frame, ...]:
    """A thread taking the GIL back as torch.linalg.eigh returns (CI's capture, abridged)."""
    lib = "/venv/lib/python3.11/site-packages/torch/lib/libtorch_python.so"
    return (Frame("take_gil", "libpython3.11.so", native=True, module="libpython3.11.so"),
            Frame("PyEval_RestoreThread", "libpython3.11.so", native=True,
                  module="libpython3.11.so"),
            Frame("THPVariable_linalg_eigh", lib, native=True, module=lib),
            Frame("precondition", "/job/titled_ranks.py", 27))


def test_given_a_lone_python_thread_in_take_gil_then_it_runs_not_waits() -> None:
    # Nothing else of the process has a Python thread state: nothing can hold the GIL.
    gloo = Thread(tid=12, name="pt_gloo_runloop", state="S", wchan="futex_do_wait",
                  python=False)
    proc = classify_process(Process(pid=11, threads=(
        Thread(tid=11, name="MainThread", state="R", active=True, frames=_eigh_returning()),
        gloo)))
    main = proc.threads[0]
    assert main.category is Category.RUNNING, main
    assert "takes back the GIL" in (main.hint or "")
    assert main.site == "precondition (titled_ranks.py:27)"
    assert proc.working_thread is not None and proc.working_thread.tid == 11


def test_given_another_python_thread_then_take_gil_stays_a_gil_wait() -> None:
    holder = Thread(tid=12, name="worker", state="S", owns_gil=True,
                    frames=(Frame("read", "/job/w.py", 3),))
    proc = classify_process(Process(pid=11, threads=(
        Thread(tid=11, name="MainThread", state="S", frames=_eigh_returning()), holder)))
    assert proc.threads[0].category is Category.GIL_WAIT


# --- the GPU validation run's captures (tests/fixtures/gpu/validation, demo/gpu/hangs.py) ------

VALIDATION = FIXTURES / "validation"


def validation_threads(case: str, kind: str = "native") -> list[Thread]:
    """Every Python thread of a validation capture, with /proc state and wchan where known."""
    text = (VALIDATION / f"{case}.{kind}.json").read_text()
    dump = parse_dump(1, text, native=kind == "native")
    assert dump.ok, dump.error
    tasks = {}
    for line in (VALIDATION / f"{case}.proc.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0].isdigit():
            break
        tasks[int(parts[0])] = parts
    out = []
    for pt in dump.threads:
        task = tasks.get(pt.tid)
        out.append(Thread(tid=pt.tid, name=pt.name, active=pt.active, owns_gil=pt.owns_gil,
                          frames=pt.frames, state=task[2] if task else None,
                          wchan=task[3] if task and task[3] != "0" else None))
    return out


def validation_main(case: str, kind: str = "native") -> Thread:
    threads = [classify_thread(t) for t in validation_threads(case, kind)]
    return next(t for t in threads if t.name == "MainThread")


@pytest.mark.parametrize(
    ("case", "kind", "category", "op", "site_function", "context"),
    [
        # pynccl: NCCLLibrary.ncclCommInitRank via ctypes -> ncclCommInitRank -> bootstrapInit
        ("pynccl", "native", Category.COMM_INIT, None, "pynccl", None),
        ("pynccl", "py", Category.COMM_INIT, None, "pynccl", None),
        # torch eager init: ncclCommInitRankConfig <- c10d::NCCLComm::create
        ("nccl_comm", "native", Category.COMM_INIT, None, "nccl_comm", None),
        ("nccl_comm", "py", Category.COMM_INIT, None, "nccl_comm", None),
        ("nccl_init", "native", Category.COMM_INIT, None, "nccl_init", None),
        # custom all-reduce: cuLaunchKernel under CustomAllreduce.all_reduce, GPU at 100%
        ("custom_ar", "native", Category.COLLECTIVE, "custom_all_reduce", "custom_ar", None),
        ("custom_ar", "py", Category.COLLECTIVE, "custom_all_reduce", "custom_ar", None),
        ("sync", "native", Category.CUDA_SYNC, None, "wait_for_gpu", None),
        ("launch", "native", Category.CUDA_LAUNCH, None, "read_result", None),
        # An SGLang-shaped CudaGraphRunner in the demo's own file (demo/gpu/cuda_graph_runner.py),
        # not SGLang's package: names copied into user code are not evidence of capture.
        ("capture", "native", Category.LOCK, None, "capture_blocked.<locals>.forward", None),
        ("capture_jit", "native", Category.JIT_COMPILE, None, "capture_jit.<locals>.forward",
         None),
        ("triton", "native", Category.JIT_COMPILE, None, "triton_loop", None),
        # Inductor compiling in the rank: the site is the user's call, not generated code
        ("inductor", "native", Category.JIT_COMPILE, None, "inductor", None),
        ("inductor", "py", Category.JIT_COMPILE, None, "inductor", None),
    ],
)
def test_given_validation_capture_when_classified_then_true_category(
        case: str, kind: str, category: Category, op: str | None, site_function: str,
        context: str | None) -> None:
    thread = validation_main(case, kind)
    assert thread.category is category
    assert thread.op == op
    assert thread.site is not None and thread.site.startswith(f"{site_function} ("), thread.site
    assert "hangs.py:" in thread.site
    assert thread.context == context


def test_given_pynccl_without_qualnames_then_still_comm_init() -> None:
    # py-spy on Python < 3.11 prints bare function names: "__init__ (pynccl.py)" and
    # "ncclCommInitRank (pynccl_wrapper.py)". The real capture with its qualnames stripped.
    main = validation_threads("pynccl", "py")[0]
    bare = tuple(replace(f, name=f.name.rsplit(".", 1)[-1]) for f in main.frames)
    assert [f.name for f in bare[:2]] == ["ncclCommInitRank", "__init__"]
    assert classify_thread(replace(main, frames=bare)).category is Category.COMM_INIT
    only_init = tuple(f for f in bare if f.name != "ncclCommInitRank")
    assert classify_thread(replace(main, frames=only_init)).category is Category.COMM_INIT


def test_given_inductor_helper_threads_then_main_thread_is_working_thread() -> None:
    # subproc_worker_timer (clock_nanosleep), tqdm_monitor and InductorSubproc are always
    # there once torch.compile has run: helpers, never the blocker.
    threads = [classify_thread(t) for t in validation_threads("inductor", "native")]
    names = {t.name: t for t in threads}
    assert {"subproc_worker_timer", "tqdm_monitor", "InductorSubproc"} <= set(names)
    assert all(names[n].helper for n in ("subproc_worker_timer", "tqdm_monitor",
                                         "InductorSubproc"))
    assert pick_working_thread(threads) is names["MainThread"]


def test_given_real_block_inside_make_graphed_callables_then_capture_label() -> None:
    # H200 capture (tests/targets/gpu_graph_capture.py): the module's forward blocks while
    # torch.cuda.make_graphed_callables captures it; the torch/cuda/graphs.py frame is the
    # library evidence of capture, whatever the user's own functions are called.
    # graphed.tasks.txt: "tid comm state wchan" per thread, the main thread first.
    first = (FIXTURES / "graphed.tasks.txt").read_text().splitlines()[0].split()
    state, wchan = first[2], first[3]
    dump = parse_dump(1, (FIXTURES / "graphed.native.json").read_text(), native=True)
    main = next(t for t in dump.threads if t.name == "MainThread")
    thread = classify_thread(Thread(tid=main.tid, name=main.name, active=main.active,
                                    owns_gil=main.owns_gil, frames=main.frames,
                                    wchan=wchan or None, state=state))
    assert any(f.file and f.file.endswith("torch/cuda/graphs.py") for f in thread.frames)
    assert thread.context == "cuda_graph_capture"
    assert thread.site is not None and thread.site.startswith("target.<locals>.Blocked.forward")
