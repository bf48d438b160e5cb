"""Every key of the live view, and what the rank table's marks mean: for ``?``, ``attach
--help`` and docs/tui.md (plain data, so ``--help`` does not import Textual)."""

from __future__ import annotations

#: Every key of the main screen.
KEYS: tuple[tuple[str, str], ...] = (
    ("space", "pause / resume sampling"),
    ("r", "sample now"),
    ("n", "show / hide native (C/C++) frames"),
    ("p", "full file paths / short ones"),
    ("d", "diff the selected rank's stack with another rank's"),
    ("a", "diff: show every frame the two stacks share / only the two nearest the fork"),
    ("c", "collectives: each rank's position per NCCL communicator (RAS, Flight Recorder)"),
    ("k", "kernels: name the CUDA kernel on each stuck rank whose GPU spins (cuda-gdb; pauses "
          "each such rank for seconds)"),
    ("s", "save a report: Markdown and JSON, like `hangscope dump`"),
    ("/", "filter the ranks by group, node, category, op or text"),
    ("escape", "clear the filter"),
    ("1 2 3 4", "stack / call tree / diff / findings tab (from anywhere on the screen)"),
    ("up down j k", "select a rank (in the table) or a thread (in the list), scroll a stack"),
    ("pgup pgdn", "a page up / down"),
    ("home end", "the first / last rank, thread or frame"),
    ("tab shift+tab", "move between the table, the tabs and the thread list"),
    ("enter", "rank table: show the selected rank's stack"),
    ("? h f1", "this help"),
    ("q ctrl+c", "quit (the job keeps running, untouched)"),
)

#: The marks of the rank table and the stack pane.
LEGEND: tuple[tuple[str, str], ...] = (
    ("st", "the kernel's process state: R running, S sleeping, D uninterruptible (I/O), "
           "T stopped, Z zombie, X gone"),
    ("same", "how long the rank's stack has stayed the same, at least (≥): from the first "
              "sample that saw it, or from when its thread last ran if earlier; `moving` "
              "when it changed"),
    ("★", "the suspect: the verdict names this rank"),
    ("·n", "n threads of the process share this name"),
    ("red", "the suspect's row; dim: exited or not a rank"),
)
