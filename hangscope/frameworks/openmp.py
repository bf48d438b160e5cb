"""GNU OpenMP (libgomp), the thread pool under PyTorch's CPU operators (its wheels ship their
own ``torch/lib/libgomp.so.1``). libgomp is not fork-safe: a process that ran a parallel
region keeps a team of threads; a child forked after it inherits the team's state without
its threads, and its first parallel region waits at the team's barrier forever
(pytorch/pytorch#17199, #2245: a ``multiprocessing.Pool`` or DataLoader worker forked after
the parent ran a torch op)."""

from __future__ import annotations

from hangscope.frameworks import ForkPool, Framework

FRAMEWORK = Framework(name="openmp", fork_pools=(ForkPool(
    path="libgomp",
    name="GNU OpenMP's thread pool (libgomp, under torch's CPU operators)",
    fix="start the workers with 'spawn' or 'forkserver' (multiprocessing.get_context('spawn'), "
        "DataLoader(multiprocessing_context='spawn')), or call torch.set_num_threads(1) in the "
        "workers and run no parallel torch op in the parent before it forks"),))
