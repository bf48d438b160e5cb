"""Demo: an SGLang-style inference server stuck during scheduler warm-up.

Process layout (mirrors ``python -m sglang.launch_server --tp-size N``):

* the launcher (this process) spawns, with ``multiprocessing`` (spawn context),
  N scheduler processes titled ``sglang::scheduler_TP<i>`` and one detokenizer
  titled ``sglang::detokenizer``, then waits on a Pipe per scheduler for its
  "ready" message before it would start the HTTP server on ``--port`` (it never
  gets there, so the port is never bound);
* each scheduler joins a gloo group (``init_method=tcp://127.0.0.1:<port>``)
  and builds its ``ModelRunner``. In ``init_memory_pool`` the TP ranks agree on
  the KV-cache size. Ranks 0..N-2 have ``max_total_tokens`` configured and just
  ``all_reduce`` (MIN) it; the last rank lost that setting (the bug) and goes
  through ``profile_max_num_token``, which ``all_gather``\\s per-rank memory.
  Gloo cannot tell the two apart, so every scheduler blocks forever and none
  ever reports ready;
* the detokenizer blocks in ``Connection.recv`` waiting for output from
  scheduler TP0 (an IPC wait, not a collective).

Run it::

    python -m hangscope.demo.sglang_like [--tp-size 4] [--port 30000] [--ready-file PATH]
    python demo/sglang_like.py

With ``--ready-file`` (or ``$HANGSCOPE_DEMO_READY``) each scheduler appends
``"<pid> scheduler_TP<i> all_reduce|all_gather"`` right before its collective and
the detokenizer appends ``"<pid> detokenizer recv"`` right before its recv.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

if __package__:
    from . import _common
else:  # run as ``python demo/sglang_like.py``: demo/ is sys.path[0]
    import _common  # type: ignore[no-redef]

# Module-level imports stay light (no torch): with the spawn start method every
# child re-imports this module before its target runs, and the process title
# should change as early as possible.


@dataclass(frozen=True)
class ServerArgs:
    tp_size: int = 4
    host: str = "127.0.0.1"
    port: int = 30000
    model_path: str = "demo/tiny-llama"
    #: Port of the gloo rendezvous (SGLang's ``nccl_port``), picked at launch.
    dist_init_port: int = 0


class ModelRunner:
    """Per-TP-rank model state; its constructor is where the warm-up hangs."""

    def __init__(self, server_args: ServerArgs, tp_rank: int) -> None:
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.tp_size = server_args.tp_size
        # The bug: only the last TP rank lost its ``--max-total-tokens`` override.
        self.max_total_tokens: int | None = None if tp_rank == self.tp_size - 1 else 65536
        self.init_torch_distributed()
        self.init_memory_pool()

    def init_torch_distributed(self) -> None:
        import torch.distributed as dist

        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{self.server_args.dist_init_port}",
            rank=self.tp_rank,
            world_size=self.tp_size,
            # One hour: long enough that, for the debugger, the job is hung for good.
            timeout=timedelta(hours=1),
        )

    def init_memory_pool(self) -> None:
        """Agree on the KV-cache size across TP ranks (ranks 0..N-2 hang here)."""
        import torch
        import torch.distributed as dist

        if self.max_total_tokens is None:
            self.max_total_tokens = self.profile_max_num_token()
            return
        budget = torch.tensor([self.max_total_tokens], dtype=torch.int64)
        _common.mark_ready(f"scheduler_TP{self.tp_rank} all_reduce")
        dist.all_reduce(budget, op=dist.ReduceOp.MIN)  # HANG: last rank is in all_gather
        self.max_total_tokens = int(budget.item())

    def profile_max_num_token(self) -> int:
        """Derive the KV-cache size from every rank's free memory (last rank hangs here)."""
        import torch
        import torch.distributed as dist

        free_gib = torch.tensor([80.0 - self.tp_rank], dtype=torch.float32)
        per_rank = [torch.zeros_like(free_gib) for _ in range(self.tp_size)]
        _common.mark_ready(f"scheduler_TP{self.tp_rank} all_gather")
        dist.all_gather(per_rank, free_gib)  # HANG: the other ranks are in all_reduce
        return int(min(t.item() for t in per_rank) * 1024)


class Scheduler:
    def __init__(self, server_args: ServerArgs, tp_rank: int) -> None:
        self.tp_rank = tp_rank
        self.model_runner = ModelRunner(server_args, tp_rank)

    def event_loop(self, send_to_detokenizer: Connection | None) -> None:
        # Never reached in this demo; a real scheduler would serve requests here.
        signal.pause()


def run_scheduler_process(
    server_args: ServerArgs,
    tp_rank: int,
    pipe_writer: Connection,
    send_to_detokenizer: Connection | None,
) -> None:
    import setproctitle

    setproctitle.setproctitle(f"sglang::scheduler_TP{tp_rank}")
    _common.default_signals()
    _common.die_with_parent()
    _common.import_torch()
    scheduler = Scheduler(server_args, tp_rank)
    pipe_writer.send({"status": "ready", "max_total_num_tokens": 0})
    scheduler.event_loop(send_to_detokenizer)


class DetokenizerManager:
    def __init__(self, recv_from_scheduler: Connection) -> None:
        self.recv_from_scheduler = recv_from_scheduler

    def event_loop(self) -> None:
        """Turn token ids into text forever (blocks: TP0 never produces output)."""
        _common.mark_ready("detokenizer recv")
        while True:
            recv_obj = self.recv_from_scheduler.recv()  # HANG: IPC wait on TP0
            self.handle_batch_token_id_out(recv_obj)

    def handle_batch_token_id_out(self, recv_obj: Any) -> None:
        # Never reached in this demo.
        pass


def run_detokenizer_process(recv_from_scheduler: Connection) -> None:
    import setproctitle

    setproctitle.setproctitle("sglang::detokenizer")
    _common.default_signals()
    _common.die_with_parent()
    manager = DetokenizerManager(recv_from_scheduler)
    manager.event_loop()


def _raise_system_exit(signum: int, frame: FrameType | None) -> None:
    # SIGTERM -> SystemExit, so multiprocessing's atexit hook terminates the
    # (daemonic) children instead of leaving them hung.
    raise SystemExit(128 + signum)


def _wait_for_scheduler_ready(
    scheduler_pipe_readers: list[Connection], scheduler_procs: list[BaseProcess]
) -> list[dict[str, Any]]:
    """Block until every scheduler reports "ready" (the launcher hangs here)."""
    scheduler_infos: list[dict[str, Any]] = []
    for i, reader in enumerate(scheduler_pipe_readers):
        try:
            data = reader.recv()  # HANG: scheduler_TP<i> is stuck in warm-up
        except EOFError:
            scheduler_procs[i].join()
            raise SystemExit(
                f"scheduler_TP{i} died during initialization "
                f"(exit code {scheduler_procs[i].exitcode})"
            ) from None
        scheduler_infos.append(data)
    return scheduler_infos


def launch_server(server_args: ServerArgs) -> None:
    ctx = mp.get_context("spawn")
    signal.signal(signal.SIGTERM, _raise_system_exit)

    detok_reader, detok_writer = ctx.Pipe(duplex=False)
    scheduler_procs: list[BaseProcess] = []
    scheduler_pipe_readers: list[Connection] = []
    for tp_rank in range(server_args.tp_size):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=run_scheduler_process,
            args=(server_args, tp_rank, writer, detok_writer if tp_rank == 0 else None),
            name=f"scheduler_TP{tp_rank}",
            # Daemonic, so the launcher's exit (Ctrl-C, SIGTERM) takes them along.
            daemon=True,
        )
        proc.start()
        # Close our copy so a dead scheduler shows up as EOF on its pipe.
        writer.close()
        scheduler_procs.append(proc)
        scheduler_pipe_readers.append(reader)

    detokenizer = ctx.Process(
        target=run_detokenizer_process,
        args=(detok_reader,),
        name="detokenizer",
        daemon=True,
    )
    detokenizer.start()
    detok_reader.close()
    detok_writer.close()

    _wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)
    # A real server would now start uvicorn on server_args.host:server_args.port.
    raise SystemExit(f"unreachable in this demo: would serve on port {server_args.port}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hangscope.demo.sglang_like",
        description="SGLang-style server whose TP schedulers hang in warm-up collectives",
    )
    parser.add_argument("--tp-size", type=int, default=4, help="tensor-parallel size (4)")
    parser.add_argument("--port", type=int, default=30000, help="HTTP port (never bound)")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP host (never bound)")
    parser.add_argument("--model-path", default="demo/tiny-llama", help="ignored")
    _common.add_ready_argument(parser)
    args = parser.parse_args(argv)
    if args.tp_size < 2:
        parser.error("--tp-size must be at least 2 for the mismatch to happen")
    _common.export_ready_file(args.ready_file)
    _common.limit_threads()  # inherited by the spawned children
    server_args = ServerArgs(
        tp_size=args.tp_size,
        host=args.host,
        port=args.port,
        model_path=args.model_path,
        dist_init_port=_common.free_port(),
    )
    launch_server(server_args)
    return 0


if __name__ == "__main__":
    _common.run_main(main)
