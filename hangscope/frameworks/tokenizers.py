"""Hugging Face tokenizers: its Rust core runs batch encodes on a rayon thread pool, started on
first use. A process forked after that (a DataLoader worker under the fork start method)
inherits the pool's state without its threads, and its first ``encode_batch`` waits forever
on the pool's latch. The library guards against it by turning parallelism off in a forked child
and warning, unless ``TOKENIZERS_PARALLELISM`` was set true (huggingface/tokenizers#187, #258;
NVIDIA-NeMo/Megatron-Bridge#5328)."""

from __future__ import annotations

from hangscope.frameworks import ForkPool, Framework

FRAMEWORK = Framework(name="tokenizers", fork_pools=(ForkPool(
    path="tokenizers/tokenizers",
    name="Hugging Face tokenizers' rayon thread pool",
    fix="set TOKENIZERS_PARALLELISM=false in the parent (or leave it unset: the library then "
        "turns it off in a forked child), use the tokenizer only in the workers, or start "
        "them with 'spawn' (DataLoader(multiprocessing_context='spawn'))"),))
