"""A Markdown report that pastes into a GitHub issue: long stacks folded in ``<details>``."""

from __future__ import annotations

import re

from hangscope.model import Snapshot, Thread
from hangscope.render import collectives
from hangscope.render.fold import pid_host
from hangscope.render.stack import display_lines
from hangscope.render.text import measured_moving, stuck_cell
from hangscope.words import (
    fold_threads,
    group_names,
    rank_label,
    ranks_found,
    threads_line,
    who_on,
)

_MARK = {"critical": "🔴", "warning": "🟡", "info": "🔵"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _line(text: object) -> str:
    """One list item: a ``|`` needs no escape outside a table (in a code span it would show)."""
    return str(text).replace("\n", " ")


# What reads as code in a sentence: a frame ``name (file.py:12)``, a path, ``NAME=value``, an
# identifier with an underscore. Outside a code span CommonMark eats ``_`` and ``*`` in them
# (``/tmp/frpipe_`` opens italics that a later ``_`` closes) and ``<module>`` is an HTML tag.
_CODE = re.compile(
    r"[\w.<>\[\]-]+ \([^()\s]+:\d+\)"  # a frame and its place
    r"|(?<![\w`])[A-Z][A-Z0-9_]*=[^\s,;()`]*[^\s,;()`.]"  # an environment setting
    r"|(?<![\w`])(?:~|\.{1,2})?/[^\s,;()`]*[^\s,;()`.]"  # a path
    r"|(?<![\w`/])[\w.<>-]*(?:_[\w.<>-]*|<\w+>)[\w.<>-]*[\w>](?:\(\))?"  # snake_case, <module>
)


def code_spans(text: str) -> str:
    """``text`` with the frames, paths, settings and identifiers in it as code spans; what is
    already a code span stays as it is."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        out.append(part if i % 2 else _CODE.sub(lambda m: f"`{m.group()}`", part))
    return "".join(out)


def _stack_block(thread: Thread) -> str:
    rows = []
    for line in display_lines(thread.frames):
        if line.folded:
            rows.append(f"    {line.text}" + (f" [{line.location}]" if line.location else ""))
        elif line.native:  # the same indent as Python frames: a deeper one reads as nesting
            rows.append(f"    {line.text} [{line.location}]")
        else:
            rows.append(f"    {line.text} ({line.location})")
    return "```\n" + "\n".join(rows or ["(no stack)"]) + "\n```"


def render_markdown(snap: Snapshot) -> str:
    job = snap.job
    ranks = snap.rank_processes
    out: list[str] = ["## hangscope report", ""]
    # Ranks as the text header says them: none said for a job without any (a server's
    # "ranks 0" read as ranks gone missing).
    said = (f" · ranks {ranks_found(len(ranks), job.expected_ranks)}"
            if job.expected_ranks is not None or ranks else "")
    out.append(f"**Job**: {job.kind} · launcher PID {job.launcher or '-'}{said} · "
               f"{len(snap.processes)} processes · {snap.samples} samples over "
               f"{snap.window_s:.1f} s · hangscope {snap.hangscope} · {snap.created}")
    out.append("")
    if snap.verdict:
        v = snap.verdict
        out.append(f"### {_MARK[v.severity.value]} Verdict: "
                   f"{v.kind.value.replace('_', ' ')}")
        out.append("")
        out.append(code_spans(v.summary))
        if v.evidence:
            out.append("")
            out.extend(f"- {code_spans(_line(e))}" for e in v.evidence)
        out.append("")
    if snap.findings:
        out.append("### Findings")
        out.append("")
        for f in snap.findings:
            out.append(f"- {_MARK[f.severity.value]} **{f.severity.value}** {f.message}")
            lines = f.evidence.get("lines")
            if isinstance(lines, list) and lines:
                out.append("")
                out.append("  ```")
                out.extend("  " + str(line).replace("```", "'''") for line in lines)
                out.append("  ```")
        out.append("")
    deadlocked = (next(iter(snap.suspect_processes), None)
                  if snap.verdict and snap.verdict.kind.value == "local_deadlock" else None)
    several = len(snap.host_names) > 1  # PIDs repeat across nodes: say whose
    if deadlocked is not None:
        out.append("### Threads of the deadlocked process")
        out.append("")
        for thread, members in fold_threads(
                t for t in deadlocked.threads if not t.helper and t.python):
            out.append(f"- **{_cell(threads_line(members))}**")
            out.append("")
            out.append(_stack_block(thread))
            out.append("")
    if snap.groups and deadlocked is None:
        out.append("### Where the ranks are")
        out.append("")
        for group in snap.groups:
            odd = (" ⬅ **suspect**" if snap.verdict is not None
                   and snap.verdict.holds_suspect(group) else "")
            site = f" at `{group.site}`" if group.site else ""
            op = f" `{group.op}`" if group.op else ""
            ctx = f" _{group.context}_" if group.context else ""
            out.append(f"- **{group_names(group, True)}**: {group.category}{op}"
                       f"{site}{ctx}{odd}")
            rep = snap.find(group.first_key) if group.pids else None  # a hand-edited dump
            working = rep.working_thread if rep else None
            if working is not None:
                out.append("")
                out.append(f"<details><summary>stack of {who_on(rep, several)}, "
                           "thread "
                           f"{_cell(working.name or working.tid)}</summary>")
                out.append("")
                out.append(_stack_block(working))
                out.append("")
                out.append("</details>")
            out.append("")
    out += collectives.markdown(snap)
    out.append("### Processes")
    out.append("")
    out.append("| rank | pid | " + ("host | " if several else "")
               + "role | state | cpu% | category | op | same | site |")
    out.append("|---:|---:|" + ("---|" if several else "") + "---|---|---:|---|---|---:|---|")
    moving = measured_moving(snap)
    for proc in snap.processes:
        working = proc.working_thread
        out.append("| " + " | ".join(_cell(x) for x in (
            rank_label(proc.rank), proc.pid,
            *((proc.host or "?",) if several else ()), proc.role, proc.state or "?",
            f"{proc.cpu_percent:.0f}" if proc.cpu_percent is not None else "?",
            proc.category, (working.op if working else None) or "-", stuck_cell(proc, snap, moving),
            f"`{working.site}`" if working and working.site else "-")) + " |")
    errors = [(p, e) for p in snap.processes for e in p.errors]
    if errors:
        out.append("")
        out.append("<details><summary>Could not read everything</summary>")
        out.append("")
        out.extend(f"- {pid_host(p, several)} ({p.name}): {_cell(e)}" for p, e in errors)
        out.append("")
        out.append("</details>")
    if snap.notes:
        # A list, not italics: a note quotes paths and settings whose ``_`` would end them.
        out += ["", "### Notes", ""]
        out.extend(f"- {code_spans(_line(note))}" for note in snap.notes)
    out.append("")
    return "\n".join(out)
