"""Real DDP and FSDP2 (``fully_shard``) training over gloo on CPU, 2 ranks, launched by torchrun
or ``accelerate launch``.

    python -m torch.distributed.run --nproc-per-node 2 ddp_jobs.py MODE READY_FILE WORKDIR
    accelerate launch --cpu --num_processes 2 ddp_jobs.py MODE READY_FILE WORKDIR

Each rank appends ``"<pid> rank<N>"`` to READY_FILE once it is in its final state. Modes, each
the mechanism of a real report:

- ``ddp_progress``     DDP trains forever; ready after a few steps (the healthy twin).
- ``ddp_stalled_rank`` rank 1 blocks on a pipe nobody writes before its 4th step (a shard
                       fetch that never returns); rank 0 waits in backward's all_reduce, which
                       DDP's reducer runs on gloo's threads while the main thread waits in
                       autograd's engine. pytorch/pytorch#150206 ("DDP hangs at
                       loss.backward() when one rank ..."), huggingface/accelerate#2149.
- ``ddp_slow_loader``  DDP trains forever, rank 1's batches from a DataLoader worker that
                       computes each one's features for seconds (pure Python); rank 0 waits
                       in the step's all_reduce meanwhile, rank 1 for its worker: slow, not
                       hung (blind round 22's 06: a Lightning straggler whose DataLoader
                       worker does the work, read as a straggler "blocked elsewhere").
- ``ddp_raise_monitor`` rank 1 raises (a bad label) at its 4th step, but a non-daemon monitor
                       thread keeps its process alive: Python joins it at exit, so the
                       launcher never sees rank 1 fail, and rank 0 waits in the step's
                       all_reduce (blind round 27's 02, on DeepSpeed).
- ``ddp_eval_rank0``   after a few steps rank 0 evaluates through the DDP wrapper under
                       ``if rank == 0:`` while rank 1 goes on to a barrier; the model has
                       BatchNorm buffers, so DDP's forward first broadcasts them from rank 0
                       (pytorch#54059, blind round 30's 08): rank 0 waits in that broadcast.
- ``ddp_finish``       DDP trains until WORKDIR/stop appears, then every rank leaves its
                       loop, destroys its process group and exits 0: a job that ends while
                       it is read (it read "missing rank", ranks gone, launcher waiting).
- ``accel_progress``   Accelerate trains forever (the healthy twin).
- ``accel_gather_mismatch`` rank 1 leaves training for an evaluation-only
                       ``accelerator.gather_for_metrics`` (an all_gather) while rank 0 is in
                       ``accelerator.backward``'s all_reduce: mismatched collectives.
                       huggingface/accelerate#2110 ("gather_for_metrics hangs when ...").
- ``accel_pad_branch`` evaluation: each rank decodes its share of prompts and pads a batch
                       shorter than the longest answer with ``pad_across_processes`` (an
                       all_gather of sizes) only ``if`` it is short; rank 0's batches are all
                       full length, so rank 0 finishes its loop and waits in
                       ``wait_for_everyone``'s barrier while rank 1 waits in the all_gather of
                       its first padding (huggingface/accelerate#1110, blind round 28's 04).
- ``tp_decode_stop`` greedy decoding over a tensor-parallel model (DTensor's
                    ``parallelize_module``): each rank decides alone when its sequence ended,
                    so rank 1 leaves the loop for the results' barrier while rank 0 waits for
                    its next token's all_reduce (a functional collective, waited for in
                    ``wait_tensor`` where the output is read). microsoft/Tutel#182 ("one GPU
                    performs 5 forwards and another 6"), meta-pytorch/gpt-fast#55.
- ``fsdp_skip_module`` FSDP2 on a small vision-language model whose rank 1 gets text-only
                    batches from step 2 and skips the fully_shard-ed vision tower: in backward
                    rank 0 waits in an all_gather, rank 1 in a reduce_scatter
                    (pytorch/pytorch#152964, #148334; blind round 26's 05).
- ``fsdp_progress`` trains forever, one optimizer step per batch of micro-batches; ready after
                    a few steps (the healthy twin).
- ``fsdp_uneven``   each rank packs its mini-batch into micro-batches by its own token count
                    (dynamic batch size), so rank 0 runs 3 micro-batches and rank 1 only 2;
                    rank 1, its loop done, enters the step's checkpoint ``dist.barrier()``
                    while rank 0's third forward waits in FSDP's parameter all_gather.
                    verl-project/verl#6176 ("dynamic_bsz micro-batch count mismatch causes
                    FSDP deadlock"); deepspeedai/DeepSpeed#2223.
"""

from __future__ import annotations

import os
import sys
import threading

STALL_STEP = 3
READY_STEP = 5


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def model_and_data(norm: bool = False):  # torch, imported late (a slow import)
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(32, 64), *([torch.nn.BatchNorm1d(64)] if norm else []),
              torch.nn.ReLU(), torch.nn.Linear(64, 1)]
    return torch.nn.Sequential(*layers), torch.randn(16, 32), torch.randn(16, 1)


def evaluate(model, x):  # type: ignore[no-untyped-def]
    import torch

    with torch.no_grad():
        return model(x)  # the DDP wrapper: its forward syncs the buffers first


def fetch_shard() -> None:
    """A data shard that never arrives: a read of a pipe nobody writes."""
    r, _w = os.pipe()
    os.read(r, 1)


def _features(seed: int) -> float:
    """One item's features, computed for seconds in pure Python (a tokenizer, then the
    statistics of its tokens, chunk by chunk)."""
    total = 0.0
    for chunk in range(3600):
        tokens = _tokenize(seed, chunk)
        total += _statistics(tokens)
    return total


def _tokenize(seed: int, chunk: int) -> list[int]:
    return [(seed * 31 + chunk * 7 + i) % 97 for i in range(20_000)]


def _statistics(tokens: list[int]) -> float:
    return sum(t * t for t in tokens) / 1e9


def slow_batches():  # rank 1's loader: its one worker computes each batch for seconds
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self) -> int:
            return 1 << 20

        def __getitem__(self, index: int):
            return torch.full((16, 32), _features(index) % 1.0)

    return iter(DataLoader(Slow(), batch_size=None, num_workers=1))


def stop_asked(ready_file: str) -> bool:
    """Whether any rank saw the stop file: agreed by an all_reduce, so every rank leaves the
    loop after the same step (one that left alone would leave the other in its next step's
    all_reduce, whose gloo pair then closes under it)."""
    import torch
    import torch.distributed as dist

    seen = torch.tensor([float(os.path.exists(os.path.join(os.path.dirname(ready_file),
                                                           "stop")))])
    dist.all_reduce(seen, op=dist.ReduceOp.MAX)
    return bool(seen.item())


def ddp(mode: str, ready_file: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net, x, y = model_and_data(norm=mode == "ddp_eval_rank0")
    model = DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    batches = slow_batches() if mode == "ddp_slow_loader" and rank == 1 else None
    if mode == "ddp_raise_monitor":  # a resource monitor: non-daemon, stopped at the end only
        threading.Thread(target=threading.Event().wait, name="ResourceMonitor").start()
    while not (mode == "ddp_finish" and step >= READY_STEP and stop_asked(ready_file)):
        if batches is not None:
            x = next(batches)
        if mode == "ddp_slow_loader" and step == 1:
            ready(ready_file, f"rank{rank}")
        if mode == "ddp_eval_rank0" and step == STALL_STEP:
            ready(ready_file, f"rank{rank}")
            if rank == 0:
                evaluate(model, x)
            dist.barrier()
        if mode == "ddp_stalled_rank" and step == STALL_STEP:
            if rank == 1:
                ready(ready_file, f"rank{rank}")
                fetch_shard()
            else:
                ready(ready_file, f"rank{rank}")
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if mode in ("ddp_progress", "ddp_finish") and step == READY_STEP:
            ready(ready_file, f"rank{rank}")
        if mode == "ddp_raise_monitor" and step == STALL_STEP:
            ready(ready_file, f"rank{rank}")
            if rank == 1:
                raise IndexError(f"Target {step + 9} is out of bounds.")  # a bad label
    dist.barrier()  # every rank out of its last step before the group goes
    dist.destroy_process_group()
    # torch 2.13's CPU build aborts a DDP rank in its C++ teardown about one exit in six
    # ("terminate called without an active exception", with or without a reader attached):
    # leave without it, as the training scripts that meet it do.
    sys.stdout.flush()
    os._exit(0)


def accel(mode: str, ready_file: str) -> None:
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    if mode == "accel_pad_branch":
        evaluate_padded(accelerator, ready_file)
        return
    net, x, y = model_and_data()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    model, opt = accelerator.prepare(net, opt)
    step = 0
    while True:
        if mode == "accel_gather_mismatch" and step == STALL_STEP:
            ready(ready_file, f"rank{rank}")
            if rank == 1:
                with torch.no_grad():
                    preds = model(x)
                accelerator.gather_for_metrics(preds)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
        step += 1
        if mode == "accel_progress" and step == READY_STEP:
            ready(ready_file, f"rank{rank}")


MAX_NEW = 8


def evaluate_padded(accelerator, ready_file: str) -> None:  # type: ignore[no-untyped-def]
    """Greedy answers of each rank's 4 batches, padded to MAX_NEW tokens where short: rank 1's
    budgets are shorter than MAX_NEW, rank 0's are not."""
    import torch

    rank = accelerator.process_index
    answers = []
    for step in range(4):
        budget = MAX_NEW if rank == 0 else 5
        preds = torch.arange(4 * budget).reshape(4, budget) + step
        if preds.shape[1] < MAX_NEW:
            ready(ready_file, f"rank{rank}")
            preds = accelerator.pad_across_processes(preds, dim=1, pad_index=0)
        answers.append(preds)
    ready(ready_file, f"rank{rank}")
    accelerator.wait_for_everyone()
    accelerator.gather_for_metrics(torch.cat(answers))


def sharded_model():  # torch, imported late (a slow import)
    import torch
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    return net


def micro_batches(rank: int, step: int) -> list[int]:
    """Token counts of this rank's samples, packed greedily under a token budget: ranks
    whose samples are longer get more micro-batches (verl's prepare_dynamic_batch without
    its dp_group)."""
    lengths = [300, 280, 290, 310, 270, 295] if rank == 0 else [300, 280, 290, 310]
    budget, packs, used = 700, [0], 0
    for n in lengths:
        if used + n > budget:
            packs.append(0)
            used = 0
        packs[-1] += 1
        used += n
    return packs


def fsdp(mode: str, ready_file: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = sharded_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    uneven = mode == "fsdp_uneven"
    step = 0
    while True:
        packs = micro_batches(rank, step) if uneven else [3, 3]
        for i, samples in enumerate(packs):
            if uneven and rank == 0 and i == 2:
                ready(ready_file, f"rank{rank}")  # its last forward: rank 1 is not there
            loss = model(torch.randn(samples, 32)).pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad()
        if uneven:
            if rank == 1:
                ready(ready_file, f"rank{rank}")
            dist.barrier()  # the checkpoint's barrier
        step += 1
        if not uneven and step == READY_STEP:
            ready(ready_file, f"rank{rank}")


def vision_language(ready_file: str) -> None:
    """A small vision-language model under FSDP2: the vision tower, each text block and the
    root are units of their own. A text-only batch skips the vision tower (HF mllama's ``if
    pixel_values is not None``); rank 1's batches are text-only from step 2 on. Every unit has
    the same shard size, so gloo pairs rank 0's extra all_gather with rank 1's next one and
    the forward goes on; in backward their collectives differ in kind and never meet."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    width = 32

    def block() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.Linear(width, 2 * width),
                                   torch.nn.GELU(), torch.nn.Linear(2 * width, width))

    class VisionLanguage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vision = block()
            self.layers = torch.nn.ModuleList(block() for _ in range(3))
            self.head = torch.nn.Linear(width, 1)

        def forward(self, h, pixels=None):  # type: ignore[no-untyped-def]
            if pixels is not None:  # the batch has images
                h = h + self.vision(pixels)
            for layer in self.layers:
                h = h + layer(h)
            return self.head(h)

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = VisionLanguage()
    fully_shard(model.vision)
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    step = 0
    while True:
        text_only = rank == 1 and step >= 2
        out = model(torch.randn(4, width), None if text_only else torch.randn(4, width))
        loss = out.pow(2).mean()
        if step == 2:
            ready(ready_file, f"rank{rank}")
        loss.backward()
        step += 1


def tensor_parallel(ready_file: str) -> None:
    """Greedy decoding over a tensor-parallel model (DTensor: a column-wise layer, then a
    row-wise one, whose partial outputs are all_reduced by functional collectives: launched
    inside the forward, waited for where the output is first read). Each rank decides alone
    when its sequence ended, so rank 1 stops after 3 tokens and rank 0 decodes a fourth."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    net = parallelize_module(net, init_device_mesh("cpu", (2,)),
                             {"0": ColwiseParallel(), "2": RowwiseParallel()})
    ends_after = 4 if rank == 0 else 3  # each rank's own end-of-sequence token
    tokens: list[int] = []
    x = torch.randn(1, 32)
    with torch.no_grad():
        while len(tokens) < ends_after:
            if len(tokens) == 3:  # the token rank 1 does not decode
                ready(ready_file, f"rank{rank}")
            logits = net(x)
            tokens.append(int(logits.argmax()))
    if rank == 1:
        ready(ready_file, f"rank{rank}")
    dist.barrier()  # every rank's sequence in before rank 0 writes them out


def main() -> None:
    mode, ready_file, _workdir = sys.argv[1:4]
    if mode == "tp_decode_stop":
        tensor_parallel(ready_file)
    elif mode == "fsdp_skip_module":
        vision_language(ready_file)
    elif mode.startswith("accel_"):
        accel(mode, ready_file)
    elif mode.startswith("fsdp_"):
        fsdp(mode, ready_file)
    else:
        ddp(mode, ready_file)


if __name__ == "__main__":
    main()
