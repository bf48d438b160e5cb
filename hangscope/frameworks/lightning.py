"""PyTorch Lightning: its own launcher (``strategy="ddp"``, subprocess script launcher) runs
rank 0 in the script's own process and starts ranks 1..N-1 as its children with
``LOCAL_RANK`` set; rank 0 sets its own coordinates after start. The script's process is
rank 0 and a launcher at once, never only a launcher."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(name="lightning", launchers=("lightning",))
