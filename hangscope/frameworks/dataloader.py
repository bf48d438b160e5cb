"""torch DataLoader workers: forked (or spawned) by a rank, comm ``pt_data_worker``, running
``_worker_loop``; helpers of their rank, never ranks."""

from __future__ import annotations

from hangscope.frameworks import Framework

#: The worker loop's source file.
WORKER_FILE = "torch/utils/data/_utils/worker.py"
#: The comm torch gives a worker.
WORKER_COMM = "pt_data_worker"

FRAMEWORK = Framework(name="dataloader")
