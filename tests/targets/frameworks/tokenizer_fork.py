"""A training loop whose DataLoader workers encode with a Hugging Face tokenizer:

    python tokenizer_fork.py MODE READY_FILE WORKDIR

The main process trains a small BPE tokenizer and encodes a validation batch with
``encode_batch`` (the library's rayon thread pool starts), then iterates a
``DataLoader(num_workers=2)`` (fork) whose ``collate_fn`` calls ``encode_batch`` again.

- ``forced``: ``TOKENIZERS_PARALLELISM=true`` (set before the tokenizer is used), which turns
  off the library's fork guard: each forked worker inherits the pool without its threads and
  its first batch encode waits forever (huggingface/tokenizers#187, NVIDIA-NeMo/
  Megatron-Bridge#5328). Hung.
- ``guarded``: the variable unset: the library turns parallelism off in a forked child (and
  warns); the workers encode on one thread and the loop goes on. Progressing.

READY_FILE gets ``"<pid> main"`` once the loop is about to ask for its first batch (forced) or
has had one (guarded).
"""

from __future__ import annotations

import os
import sys


def ready(path: str, tag: str = "main") -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class Collate:
    def __init__(self, tok) -> None:  # type: ignore[no-untyped-def]
        self.tok = tok

    def __call__(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(texts)]


def main() -> None:
    mode, ready_file, _workdir = sys.argv[1:4]
    if mode == "forced":
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
    else:
        os.environ.pop("TOKENIZERS_PARALLELISM", None)
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from torch.utils.data import DataLoader

    texts = [f"sample {i}: the quick brown fox jumps over the lazy dog {i % 7}"
             for i in range(4000)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    tok.encode_batch(texts[:512])  # the validation split: the rayon pool runs here
    loader = DataLoader(texts, batch_size=64, num_workers=2, collate_fn=Collate(tok),
                        multiprocessing_context="fork")
    told = False
    while True:
        if mode == "forced" and not told:
            ready(ready_file)
            told = True
        for _batch in loader:
            if not told:
                ready(ready_file)
                told = True


if __name__ == "__main__":
    main()
