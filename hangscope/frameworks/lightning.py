"""PyTorch Lightning: its own launcher (``strategy="ddp"``, subprocess script launcher) runs
rank 0 in the script's own process and starts ranks 1..N-1 as its children with
``LOCAL_RANK`` set; rank 0 sets its own coordinates after start. The script's process is
rank 0 and a launcher at once, never only a launcher."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hangscope.frameworks import Framework

FRAMEWORK = Framework(name="lightning", launchers=("lightning",),
                      library_files=("lightning/", "pytorch_lightning/", "lightning_fabric/"),
                      rank_tests=("is_global_zero", "global_rank", "local_rank"),
                      # lightning.pytorch.utilities.rank_zero_only (Lightning#18148: a
                      # collective property read inside one)
                      rank_decorators=("rank_zero_only",),
                      # prepare_data runs on local rank 0 only, inside _InfiniteBarrier
                      rank_hooks=(("_DataConnector.prepare_data",
                                   "lightning/pytorch/trainer/connectors/data_connector.py",
                                   "prepare_data, which Lightning runs on local rank 0 only "
                                   "while the other ranks wait in its barrier around it"),),
                      # Fabric.save writes on rank 0 and then runs self.barrier(); Trainer.
                      # save_checkpoint waits in strategy.barrier (Lightning#20027, #19780)
                      collective_methods=(
                          ("save", "lightning/fabric/fabric.py",
                           "Fabric.save ends in a barrier of its own",
                           "it writes the file on rank 0 only"),
                          ("save_checkpoint", "lightning/pytorch/trainer/trainer.py",
                           "Trainer.save_checkpoint waits in a barrier of its own",
                           "the strategy writes the file on rank 0 only")),
                      # The loops over one epoch's batches (fit's and validate's): their
                      # `while not self.done` runs `advance` once per batch.
                      batch_loops=(("run", "lightning/pytorch/loops/training_epoch_loop.py"),
                                   ("run", "lightning/pytorch/loops/evaluation_loop.py")))


def _script(cmdline: Sequence[str]) -> tuple[str, ...]:
    """The script and its arguments after the interpreter, the script by its file name
    (the launcher re-runs ``[sys.executable, abspath(argv[0]), *argv[1:]]``)."""
    rest = list(cmdline[1:])
    if rest and rest[0] != "-m":
        rest[0] = rest[0].rsplit("/", 1)[-1]
    return tuple(rest)


def reruns_script(parent_cmdline: Sequence[str], child_cmdline: Sequence[str],
                  child_env: Mapping[str, str]) -> bool:
    """Whether a child is a rank that Lightning's script launcher started from its parent: the
    parent's own script and arguments again, with ``LOCAL_RANK`` of 1 or more and no
    ``RANK`` (the launcher sets only the node's coordinates; the parent is local rank 0)."""
    local = child_env.get("LOCAL_RANK", "")
    return (local.isdigit() and int(local) >= 1 and "RANK" not in child_env
            and len(parent_cmdline) > 1 and _script(parent_cmdline) == _script(child_cmdline))


def global_rank(env: Mapping[str, str], local_rank: int, per_node: int) -> int | None:
    """A rank's global number from the node's coordinates the launcher set (``NODE_RANK``)."""
    node = env.get("NODE_RANK", "0")
    return int(node) * per_node + local_rank if node.isdigit() else None
