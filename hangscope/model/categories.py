"""The category table: one row per way a thread can be blocked (``model.Category``).

A new category is its ``Category`` member plus one row here: how a sentence says it (``verb``,
one and many), how specific it is when picking a process's working thread (``specificity``:
higher wins), whether the host thread waits, works or neither (``activity``), its style in
tables and the TUI (``style``, a Rich style; "" for none) and what it means (``doc``, and its
value in docs/json-schema.md). ``tests/unit/test_categories.py`` fails until every category
has a complete row. Pure data: words.py, the analysis and the renderers read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangscope.model import Category

#: ``CategoryRow.activity``: the host thread waits (on the GPU, a peer, a lock, a queue...).
WAITS = "waits"
#: It works (runs Python or C on a CPU, compiles).
WORKS = "works"
#: Neither: the process stopped or exited, or nothing is known.
NEITHER = "neither"


@dataclass(frozen=True)
class CategoryRow:
    verb: tuple[str, str]  # (one, many); ``{op}`` is the collective's name
    specificity: int
    activity: str  # WAITS | WORKS | NEITHER
    style: str
    doc: str


C = Category
CATEGORIES: dict[Category, CategoryRow] = {
    C.COLLECTIVE: CategoryRow(("waits in {op}", "wait in {op}"), 9, WAITS, "magenta",
                              "inside a collective (all_reduce, barrier, ...) or p2p op"),
    C.COMM_INIT: CategoryRow(("waits in communicator init / rendezvous",
                              "wait in communicator init / rendezvous"), 9, WAITS, "magenta",
                             "creating a communicator or in the rendezvous store"),
    C.CUDA_SYNC: CategoryRow(("waits for the GPU (CUDA sync)", "wait for the GPU (CUDA sync)"),
                             8, WAITS, "green", "waiting for the GPU to finish (a CUDA sync)"),
    C.CUDA_LAUNCH: CategoryRow(("is blocked launching a CUDA kernel",
                                "are blocked launching a CUDA kernel"), 8, WAITS, "green",
                               "blocked launching a kernel (the GPU's queue is full)"),
    C.JIT_COMPILE: CategoryRow(("compiles a kernel (JIT)", "compile a kernel (JIT)"), 8, WORKS,
                               "blue", "compiling (Dynamo, Inductor, Triton, nvcc, ptxas)"),
    C.GIL_WAIT: CategoryRow(("waits for the GIL", "wait for the GIL"), 7, WAITS, "yellow",
                            "waiting to take the GIL"),
    C.LOCK: CategoryRow(("waits on a lock", "wait on a lock"), 4, WAITS, "yellow",
                        "acquiring a lock (threading, a futex, a file lock)"),
    C.IPC_WAIT: CategoryRow(("waits on another process (IPC)", "wait on another process (IPC)"),
                            3, WAITS, "cyan", "waiting on a pipe, socket, queue or child"),
    C.SLEEP: CategoryRow(("sleeps", "sleep"), 2, WAITS, "", "sleeping (time.sleep, a timer)"),
    C.IO: CategoryRow(("waits on I/O", "wait on I/O"), 5, WAITS, "",
                      "in the kernel for disk or network file I/O (state D)"),
    C.RUNNING: CategoryRow(("runs on CPU", "run on CPU"), 6, WORKS, "bold yellow",
                           "running on a CPU, no wait at the leaf"),
    C.SPIN: CategoryRow(("spin-waits on CPU (yields in a loop)",
                         "spin-wait on CPU (yield in a loop)"), 6, WORKS, "bold yellow",
                        "on a CPU in a loop that yields it (sched_yield): waiting for memory "
                        "another thread or process changes"),
    C.IDLE: CategoryRow(("is idle", "are idle"), 1, WAITS, "",
                        "an idle thread (no Python frame, waiting for work)"),
    C.STOPPED: CategoryRow(("is stopped (state T)", "are stopped (state T)"), 10, NEITHER,
                           "bold red", "stopped by a signal or a debugger (state T)"),
    C.ZOMBIE: CategoryRow(("has exited (zombie)", "have exited (zombies)"), 10, NEITHER,
                          "bold red", "exited, not reaped by its parent (state Z)"),
    C.DEAD: CategoryRow(("has exited", "have exited"), 10, NEITHER, "bold red",
                        "exited (gone from /proc)"),
    C.UNKNOWN: CategoryRow(("is somewhere unknown", "are somewhere unknown"), 0, NEITHER, "",
                           "no stack and no kernel wait said where"),
}
del C

#: The categories in which the host thread waits.
WAITING = frozenset(c for c, row in CATEGORIES.items() if row.activity == WAITS)
