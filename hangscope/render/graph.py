"""The merged call tree as a picture: a Mermaid flowchart (GitHub draws it) and an SVG file.

LLNL STAT's view: one box per frame with the set of ranks that pass through it; a chain of
frames every rank of the box shares is collapsed into one box; at each fork the branches with
fewer ranks than the largest are "odd" and drawn in red, so the odd ranks show at a glance.
Readable at 8 ranks and at 1,000: rank sets are compact (``0-998``), forks wider than
``MAX_BRANCHES`` fold their smallest branches into one box. Pure functions over a Snapshot.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from hangscope.model import Snapshot, TreeNode
from hangscope.words import compact_ranks

#: Branches shown per fork; the smallest of the rest are folded into one "... more" box.
MAX_BRANCHES = 8
#: Frames shown in a collapsed chain (outermost ones, "...", the innermost one).
CHAIN_SHOWN = 3


@dataclass
class Box:
    """One drawn box: a chain of frames shared by the same ranks."""

    frames: list[str]
    ranks: tuple[int, ...]
    odd: bool = False
    children: list[Box] = field(default_factory=list)
    hidden: int = 0  # frames of the chain not shown


def _chain(node: TreeNode, odd: bool) -> Box:
    frames = [node.frame]
    while len(node.children) == 1 and node.children[0].ranks == node.ranks:
        node = node.children[0]
        frames.append(node.frame)
    hidden = 0
    if len(frames) > CHAIN_SHOWN + 1:
        hidden = len(frames) - CHAIN_SHOWN
        frames = [*frames[:CHAIN_SHOWN - 1], f"… {hidden} more frames", frames[-1]]
    box = Box(frames, node.ranks, odd, hidden=hidden)
    box.children = _branches(node.children)
    return box


def _branches(children: Sequence[TreeNode]) -> list[Box]:
    if not children:
        return []
    ordered = sorted(children, key=lambda c: (-len(c.ranks), c.frame))
    top = len(ordered[0].ranks)
    forked = len(ordered) > 1
    shown = ordered[:MAX_BRANCHES]
    boxes = [_chain(c, forked and len(c.ranks) < top) for c in shown]
    rest = ordered[MAX_BRANCHES:]
    if rest:
        ranks = tuple(sorted({r for c in rest for r in c.ranks}))
        boxes.append(Box([f"… {len(rest)} more branches"], ranks, odd=True))
    return boxes


def boxes_of(snap: Snapshot) -> Box:
    """The root box (the job) with the collapsed, odd-marked tree below it."""
    ranks = tuple(sorted({r for n in snap.call_tree for r in n.ranks}))
    hosts = sorted({p.host for p in snap.processes if p.host})
    where = f" on {len(hosts)} nodes" if len(hosts) > 1 else ""
    root = Box([f"{snap.job.kind} job{where}"], ranks)
    root.children = _branches(snap.call_tree)
    return root


def _rank_line(box: Box, host_of: dict[int, str]) -> str:
    n = len(box.ranks)
    text = f"rank {box.ranks[0]}" if n == 1 else f"ranks {compact_ranks(box.ranks)} ({n})"
    hosts = list(dict.fromkeys(host_of[r] for r in box.ranks if r in host_of))
    if hosts and len(hosts) <= 3:
        text += f" on {', '.join(hosts)}"
    elif hosts:
        text += f" on {len(hosts)} nodes"
    return text


def _host_of(snap: Snapshot) -> dict[int, str]:
    if len({p.host for p in snap.processes}) < 2:
        return {}
    return {p.rank.key: p.host for p in snap.processes
            if p.host and p.rank is not None and p.rank.key is not None}


def _walk(box: Box) -> list[tuple[Box, Box | None]]:
    out: list[tuple[Box, Box | None]] = []
    todo: list[tuple[Box, Box | None]] = [(box, None)]
    while todo:
        current, parent = todo.pop(0)
        out.append((current, parent))
        todo.extend((c, current) for c in current.children)
    return out


# -- Mermaid ----------------------------------------------------------------------------------

def _mermaid_text(text: str) -> str:
    # Mermaid's own entity codes: a quote or bracket inside a label would end it.
    return (text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;")
            .replace(">", "#gt;"))


def mermaid(snap: Snapshot) -> str:
    """A ``flowchart TD`` of the merged call tree (paste inside a ```mermaid fence)."""
    host_of = _host_of(snap)
    ids: dict[int, str] = {}
    lines = ["flowchart TD"]
    odd_ids = []
    for box, parent in _walk(boxes_of(snap)):
        ident = ids[id(box)] = f"f{len(ids)}"
        label = "<br/>".join(_mermaid_text(f) for f in box.frames)
        label += f"<br/><b>{_mermaid_text(_rank_line(box, host_of))}</b>"
        lines.append(f'  {ident}["{label}"]')
        if parent is not None:
            lines.append(f"  {ids[id(parent)]} --> {ident}")
        if box.odd:
            odd_ids.append(ident)
    lines.append("  classDef odd fill:#ffebe9,stroke:#cf222e,stroke-width:3px,color:#000")
    lines.append("  classDef shared fill:#ddf4ff,stroke:#0969da,color:#000")
    if odd_ids:
        lines.append(f"  class {','.join(odd_ids)} odd")
    others = [i for i in ids.values() if i not in odd_ids]
    lines.append(f"  class {','.join(others)} shared")
    return "\n".join(lines) + "\n"


def markdown_section(snap: Snapshot) -> str:
    """The call tree as a Markdown section with a Mermaid block (GitHub draws it)."""
    return ("\n### Call tree (ranks per frame; odd branches in red)\n\n```mermaid\n"
            + mermaid(snap) + "```\n")


# -- SVG --------------------------------------------------------------------------------------

_CHAR_W, _LINE_H, _PAD, _GAP_X, _GAP_Y, _MAX_CHARS = 7.2, 16, 8, 18, 36, 56


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_CHARS else text[:_MAX_CHARS - 1] + "…"


@dataclass
class _Placed:
    box: Box
    lines: list[str]
    w: float
    h: float
    x: float = 0.0  # left edge
    y: float = 0.0
    span: float = 0.0  # width of the subtree
    kids: list[_Placed] = field(default_factory=list)


def _measure(box: Box, host_of: dict[int, str]) -> _Placed:
    lines = [_clip(f) for f in box.frames] + [_clip(_rank_line(box, host_of))]
    w = max(len(s) for s in lines) * _CHAR_W + 2 * _PAD
    placed = _Placed(box, lines, w, len(lines) * _LINE_H + 2 * _PAD)
    placed.kids = [_measure(c, host_of) for c in box.children]
    kids_span = sum(k.span for k in placed.kids) + _GAP_X * max(0, len(placed.kids) - 1)
    placed.span = max(w, kids_span)
    return placed


def _place(p: _Placed, left: float, top: float) -> float:
    """Lay out the subtree in [left, left + span); returns the bottom edge."""
    p.x, p.y = left + (p.span - p.w) / 2, top
    bottom = top + p.h
    kids_span = sum(k.span for k in p.kids) + _GAP_X * max(0, len(p.kids) - 1)
    cursor = left + (p.span - kids_span) / 2
    for kid in p.kids:
        bottom = max(bottom, _place(kid, cursor, top + p.h + _GAP_Y))
        cursor += kid.span + _GAP_X
    return bottom


def svg(snap: Snapshot) -> str:
    """A standalone SVG picture of the merged call tree, with the verdict as its title."""
    host_of = _host_of(snap)
    root = _measure(boxes_of(snap), host_of)
    title = snap.verdict.summary if snap.verdict else "hangscope call tree"
    title_lines = textwrap.wrap(title, 110, max_lines=4, placeholder=" …")
    top = 20 + _LINE_H * len(title_lines) + 24
    bottom = _place(root, 20, top)
    width = max(root.span + 40, 800)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{bottom + 60:.0f}" font-family="DejaVu Sans Mono, monospace" '
           'font-size="12">',
           '<rect width="100%" height="100%" fill="#ffffff"/>']
    for i, line in enumerate(title_lines):
        out.append(f'<text x="20" y="{28 + i * _LINE_H}" font-weight="bold" font-size="13">'
                   f"{escape(line)}</text>")
    nodes: list[_Placed] = []
    todo = [root]
    while todo:
        p = todo.pop()
        nodes.append(p)
        todo.extend(p.kids)
        for kid in p.kids:
            stroke = "#cf222e" if kid.box.odd else "#57606a"
            width_px = 1 + min(6, len(kid.box.ranks) ** 0.5 / 2)
            out.append(f'<line x1="{p.x + p.w / 2:.1f}" y1="{p.y + p.h:.1f}" '
                       f'x2="{kid.x + kid.w / 2:.1f}" y2="{kid.y:.1f}" stroke="{stroke}" '
                       f'stroke-width="{width_px:.1f}"/>')
    for p in nodes:
        fill, stroke = ("#ffebe9", "#cf222e") if p.box.odd else ("#ddf4ff", "#0969da")
        out.append(f'<rect x="{p.x:.1f}" y="{p.y:.1f}" width="{p.w:.1f}" height="{p.h:.1f}" '
                   f'rx="6" fill="{fill}" stroke="{stroke}" '
                   f'stroke-width="{3 if p.box.odd else 1.2}"/>')
        for i, line in enumerate(p.lines):
            last = i == len(p.lines) - 1
            weight = ' font-weight="bold"' if last else ""
            out.append(f'<text x="{p.x + _PAD:.1f}" y="{p.y + _PAD + 12 + i * _LINE_H:.1f}"'
                       f'{weight}>{escape(line)}</text>')
    legend_y = bottom + 30
    out.append(f'<rect x="20" y="{legend_y - 11}" width="14" height="14" fill="#ffebe9" '
               'stroke="#cf222e" stroke-width="2"/>')
    out.append(f'<text x="40" y="{legend_y}">odd branch: fewer ranks than its siblings</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
