"""HuggingFace Accelerate: ``accelerate launch`` runs torch.distributed.run underneath (an
elastic agent, ranks with RANK/LOCAL_RANK); ``Accelerator.backward`` runs DDP's reducer, whose
collectives run on autograd's threads; ``gather_for_metrics`` is an all_gather."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(name="accelerate", launchers=("accelerate",), library_files=("accelerate/",),
                      rank_tests=("is_main_process", "is_local_main_process",
                                  "is_last_process", "process_index"),
                      # Accelerator.on_main_process and its kin (PartialState's decorators)
                      rank_decorators=("on_main_process", "on_local_main_process",
                                       "on_last_process", "on_process", "on_local_process"))
