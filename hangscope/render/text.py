"""Rich renderables from a Snapshot: shared by ``hangscope dump`` and the TUI widgets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.console import Group as RichGroup
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hangscope.model import (
    Finding,
    Process,
    Role,
    Severity,
    Snapshot,
    Thread,
    rank_id,
)
from hangscope.model.categories import CATEGORIES
from hangscope.render import collectives
from hangscope.render.fold import fold_rows, pid_host, pid_label, rank_label
from hangscope.render.stack import display_lines
from hangscope.words import (
    at_least,
    fit_site,
    fold_threads,
    group_names,
    ranks_found,
    size,
    threads_line,
    who,
    who_on,
)

SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow",
                  Severity.INFO: "cyan"}
SEVERITY_MARK = {Severity.CRITICAL: "✖", Severity.WARNING: "⚠", Severity.INFO: "•"}
CATEGORY_STYLE = {category: row.style for category, row in CATEGORIES.items() if row.style}


def header(snap: Snapshot) -> Text:
    """One line: job kind, launcher, ranks found vs expected, sampling."""
    job = snap.job
    ranks = snap.rank_processes
    text = Text()
    text.append("hangscope ", style="bold")
    text.append(f"{job.kind} job", style="bold cyan")
    if job.launcher:
        text.append(f" · launcher PID {job.launcher}")
    found = f"{len(ranks)}"
    if job.expected_ranks is not None:
        style = "bold red" if len(ranks) < job.expected_ranks else "green"
        text.append(" · ranks ")
        text.append(ranks_found(len(ranks), job.expected_ranks), style=style)
    elif ranks:
        text.append(f" · {found} rank{'s' if len(ranks) != 1 else ''}")
    count = len(snap.processes)
    text.append(f" · {count} process{'es' if count != 1 else ''}")
    text.append(f" · {snap.samples} sample{'s' if snap.samples != 1 else ''} over "
                f"{snap.window_s:.1f} s")
    if snap.hosts:
        text.append(f" · {snap.hosts[0].name}")
    return text


def verdict_panel(snap: Snapshot, evidence_lines: int = 8) -> RenderableType:
    verdict = snap.verdict
    if verdict is None:
        return Text("No verdict.")
    style = SEVERITY_STYLE[verdict.severity]
    body: RenderableType = Text(verdict.summary)
    if verdict.evidence:
        # A bullet that wraps keeps its indent (at 80 columns most do): a grid, not "\n  · ".
        bullets = Table.grid(padding=0)
        bullets.add_column(width=4, no_wrap=True)
        bullets.add_column(ratio=1)
        lines = list(verdict.evidence[:evidence_lines])
        if len(verdict.evidence) > evidence_lines:
            lines.append(f"… {len(verdict.evidence) - evidence_lines} more")
        for line in lines:
            bullets.add_row(Text("  · ", style="dim"), Text(line, style="dim"))
        body = RichGroup(body, Text(""), bullets)
    title = verdict.kind.value.replace("_", " ").upper()
    return Panel(body, title=f"[{style}]VERDICT: {title}[/]", title_align="left",
                 border_style=style)


def findings_table(snap: Snapshot) -> RenderableType:
    table = Table(show_header=False, box=None, pad_edge=False, expand=False)
    table.add_column(width=1)
    table.add_column()
    for finding in snap.findings:
        style = SEVERITY_STYLE[finding.severity]
        body = Text(finding.message)
        for line in finding_lines(finding):
            body.append("\n  │ " + line, style="dim")
        table.add_row(Text(SEVERITY_MARK[finding.severity], style=style), body)
    return table


def finding_lines(finding: Finding, limit: int = 6) -> list[str]:
    """The evidence lines shown under a finding: log lines, a kernel stack (``lines``)."""
    lines = finding.evidence.get("lines")
    if not isinstance(lines, list):
        return []
    return [str(line) for line in lines[-limit:]]


def stack_text(thread: Thread, native: bool = True, full_paths: bool = False,
               limit: int | None = 40) -> Text:
    """A thread's stack, innermost first, Python and native interleaved."""
    lines = display_lines(thread.frames, native=native, full_paths=full_paths)
    text = Text()
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        if line.folded:
            text.append(f"    {line.text}", style="dim italic")
            if line.location:
                text.append(f" [{line.location}]", style="dim")
        elif line.native:
            text.append(f"    {line.text}", style="dim")
            text.append(f" [{line.location}]", style="dim")
        else:
            text.append(f"    {line.text}", style="bold")
            text.append(f" ({line.location})")
        text.append("\n")
    if limit is not None and len(lines) > limit:
        text.append(f"    … {len(lines) - limit} more frames\n", style="dim")
    if not lines:
        text.append("    (no stack: " + (thread.wchan or "not sampled") + ")\n", style="dim")
    return text


def groups_view(snap: Snapshot, native: bool = True, stack_limit: int = 25) -> RenderableType:
    """Each group: its rank set, signature, and a representative stack."""
    parts: list[RenderableType] = []
    is_rank = any(p.rank is not None for p in snap.processes if p.role is Role.RANK)
    for group in snap.groups:
        title = Text()
        odd = snap.verdict is not None and snap.verdict.holds_suspect(group)
        title.append(f"{group_names(group, is_rank):<14}", style="bold red" if odd else "bold")
        title.append(f" {group.category}", style=CATEGORY_STYLE.get(group.category, ""))
        if group.op:
            title.append(f" {group.op}", style="bold")
        if group.site:
            title.append(f"  at {group.site}")
        if group.context:
            title.append(f"  [{group.context}]", style="yellow")
        if odd:
            title.append("  ← suspect", style="bold red")
        parts.append(title)
        rep = snap.find(group.first_key) if group.pids else None  # a hand-edited dump
        working = rep.working_thread if rep else None
        if working is not None:
            label = Text(f"  stack of {who_on(rep, len(snap.host_names) > 1)}, thread "
                         f"{working.name or working.tid}:", style="dim")
            parts.append(label)
            parts.append(stack_text(working, native=native, limit=stack_limit))
        else:
            parts.append(Text(""))
    return RichGroup(*parts)


def suspect_threads_view(snap: Snapshot, native: bool = True) -> RenderableType | None:
    """For a local deadlock: every non-helper thread of the suspect process, with its stack."""
    verdict = snap.verdict
    if verdict is None or verdict.kind.value != "local_deadlock" or not verdict.suspects:
        return None
    proc = next(iter(snap.suspect_processes), None)
    if proc is None:
        return None
    parts: list[RenderableType] = []
    # Threads with one stack are one entry (a 1,000-thread process reads in a page).
    for thread, members in fold_threads(t for t in proc.threads if not t.helper and t.python):
        title = Text(threads_line(members), style="bold")
        parts += [title, stack_text(thread, native=native, limit=20)]
    return RichGroup(*parts)


def gpu_cell(proc: Process, snap: Snapshot, memory: bool = True, sep: str = " ") -> str:
    """The GPUs a process holds for a table cell: ``0 97% 612M,1 0%`` (``-``: none)."""
    gpus = snap.gpus
    cells = []
    for use in proc.gpus:
        gpu = gpus.get(use.gpu_index)
        util = f"{sep}{gpu.utilization:.0f}%" if gpu and gpu.utilization is not None else ""
        mem = f" {size(use.used_memory)}" if memory and use.used_memory is not None else ""
        cells.append(f"{use.gpu_index}{util}{mem}")
    text = ",".join(cells) or "-"
    read = proc.kernels  # dump --kernels: the kernel cuda-gdb saw, shortened as stacks are
    kernel = read.main if read is not None else None
    return f"{text} {kernel.short[:40]}" if kernel is not None else text


def measured_moving(snap: Snapshot) -> frozenset[int]:
    """PIDs whose lines the progress watcher saw move over the window (py-spy record at
    100 Hz), where that PID names one process: a spin whose few stack samples all landed on
    one line still moved. Computed once per table (131,072 rows)."""
    if snap.progress is None:
        return frozenset()
    pids = Counter(p.pid for p in snap.processes)
    return frozenset(r.pid for r in snap.progress.ranks
                     if r.decision == "progressing" and pids[r.pid] == 1)


def stuck_seconds(thread: Thread, window_s: float) -> float:
    """How long a thread whose stack stayed put over the window has not moved, at least: the
    window, or longer when the kernel says it has been off CPU longer (a thread that does not
    run cannot change its stack)."""
    return max(window_s, thread.off_cpu_s or 0.0)


def stuck_cell(proc: Process, snap: Snapshot, moving: frozenset[int] = frozenset()) -> str:
    """How long the working stack has not changed, as far as this dump saw: ``≥ 5 min`` (the
    window, or how long the thread has been off CPU when that is longer), ``moving`` (the
    samples differ, or the progress watcher saw its lines move: ``moving`` from
    :func:`measured_moving`), ``-`` (one sample, none)."""
    working = proc.working_thread
    if working is None or proc.is_exited or working.samples < 2:
        return "-"
    if not working.stuck or proc.pid in moving:
        return at_least(None)
    return at_least(stuck_seconds(working, snap.window_s))


def ranks_table(snap: Snapshot, processes: Sequence[Process] | None = None) -> Table:
    """Per process: rank, PID, host (several), role, state, CPU, GPU (where any process has
    one), category, op, how long stuck, call site."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    several = len(snap.host_names) > 1  # PIDs repeat across nodes: say whose
    procs = processes if processes is not None else snap.processes
    # A column of "-" on a CPU job costs the site the room it needs at 80 columns.
    gpu = any(p.gpus or p.kernels is not None for p in snap.processes)
    # Only the site column gives way on a narrow terminal: it is cut to what still says
    # something (``init_memor…:97``), one line per process, as in the TUI.
    for name, kw in (("rank", {"justify": "right"}), ("pid", {"justify": "right"}),
                     *((("host", {"min_width": max(map(len, snap.host_names))}),)
                       if several else ()),
                     ("role", {}), ("st", {}), ("cpu%", {"justify": "right"}),
                     *((("gpu", {}),) if gpu else ()), ("category", {}), ("op", {}),
                     ("same", {"justify": "right"}), ("site", {})):
        table.add_column(name, **kw) if name == "site" else table.add_column(
            name, no_wrap=True, **kw)
    verdict = snap.verdict
    moving = measured_moving(snap)
    rows = []
    for proc in procs:
        working = proc.working_thread
        category = proc.category
        style = "bold red" if verdict is not None and verdict.is_suspect(proc) else ""
        cells: list[RenderableType] = [
            *((proc.host or "?",) if several else ()), str(proc.role), proc.state or "?",
            f"{proc.cpu_percent:.0f}" if proc.cpu_percent is not None else "?",
            *((gpu_cell(proc, snap),) if gpu else ()),
            Text(str(category), style=CATEGORY_STYLE.get(category, "")),
            (working.op if working else None) or "-", stuck_cell(proc, snap, moving),
            _Site((working.site if working else None)
                  or (proc.errors[0] if proc.errors else "-"))]
        key = tuple(str(c) if not isinstance(c, _Site) else c.site for c in cells)
        rows.append((proc, (key, style), (cells, style)))
    # Runs of look-alike ranks are one row (render/fold.py): 1,000 rows cost ~1 s in rich.
    for row in fold_rows(rows):
        cells, style = row.payload
        table.add_row(rank_label(row.members), pid_label(row.members), *cells, style=style)
    return table


class _Site:
    """A call-site cell that fits itself to its column (words.fit_site), never folding."""

    def __init__(self, site: str) -> None:
        self.site = site

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(len(self.site), 12), len(self.site))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(fit_site(self.site, options.max_width), no_wrap=True, overflow="ellipsis")


def native_threads_note(proc: Process) -> str | None:
    """Native-only threads (CUDA driver, NCCL proxy, ...) summarised by wait channel."""
    native = [t for t in proc.threads if not t.python]
    if not native:
        return None
    counts = Counter(t.wchan or t.state or "?" for t in native)
    parts = ", ".join(f"{n} in {w}" for w, n in counts.most_common(4))
    return f"{len(native)} native-only threads ({parts})"


def report(snap: Snapshot, native: bool = True) -> RenderableType:
    """The whole ``hangscope dump`` text report, verdict first."""
    parts: list[RenderableType] = [header(snap), verdict_panel(snap)]
    if snap.findings:
        parts += [Text("Findings", style="bold underline"), findings_table(snap), Text("")]
    threads = suspect_threads_view(snap, native)
    if threads is not None:
        parts += [Text("Threads of the deadlocked process", style="bold underline"), threads]
    elif snap.groups:
        parts += [Text("Where the ranks are", style="bold underline"), groups_view(snap, native)]
    section = collectives.view(snap)
    if section is not None:
        parts += [Text("Collectives", style="bold underline"), section]
    parts += [Text("Processes", style="bold underline"), ranks_table(snap)]
    errors = [(p, e) for p in snap.processes for e in p.errors]
    if errors:
        parts.append(Text(""))
        parts.append(Text("Could not read everything:", style="bold yellow"))
        several = len(snap.host_names) > 1
        for proc, err in errors:
            parts.append(Text(f"  {pid_host(proc, several)} ({proc.name}): {err}",
                              style="yellow"))
    for note in snap.notes:
        parts.append(Text(f"Note: {note}", style="dim"))
    closing = closing_line(snap)
    if closing is not None:
        parts.append(closing)
    return RichGroup(*parts)


def closing_line(snap: Snapshot) -> Text | None:
    """The verdict again on the report's last line (as pytest ends with its summary): after
    a long report the panel has scrolled far up."""
    verdict = snap.verdict
    if verdict is None:
        return None
    style = SEVERITY_STYLE[verdict.severity]
    line = Text("== ", style=style)
    line.append(f"VERDICT: {verdict.kind.value.replace('_', ' ').upper()}", style=f"bold {style}")
    names = [who(p) for p in snap.suspect_processes]
    if names:
        line.append(f" · suspect{'s' if len(names) > 1 else ''}: {', '.join(names[:4])}"
                    + (f" and {len(names) - 4} more" if len(names) > 4 else ""))
    line.append(" ==", style=style)
    return line


__all__ = [
    "gpu_cell",
    "header",
    "native_threads_note",
    "rank_id",
    "ranks_table",
    "report",
    "stack_text",
    "verdict_panel",
]
