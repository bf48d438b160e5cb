"""Node sets in ClusterShell/Slurm syntax: ``node[01-04,07],gpu-a[1-2]-ib`` <-> host names.

The same syntax as ``scontrol show hostnames`` expands and ``nodeset -f`` folds; a small parser
of our own instead of a dependency, since only expansion and folding are needed.
"""

from __future__ import annotations

import re

from hangscope.errors import UsageError

#: A node set larger than this is surely a typo (node[1-1000000]); Slurm's own cap is similar.
MAX_NODES = 100_000


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"Node set {text!r} nests brackets; write node[01-04] style.")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"Node set {text!r} closes a bracket it never opened.")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise UsageError(f"Node set {text!r} leaves a bracket open.")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _range(spec: str, whole: str) -> list[str]:
    """``01-04`` -> 01 02 03 04 (zero padding kept), ``7`` -> 7."""
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec.strip())
    if not match:
        raise UsageError(f"Node set {whole!r}: {spec!r} is not a number or a range such as 01-04.")
    low, high = match.group(1), match.group(2) or match.group(1)
    if int(high) < int(low):
        raise UsageError(f"Node set {whole!r}: the range {spec!r} runs backwards.")
    if int(high) - int(low) >= MAX_NODES:
        raise UsageError(f"Node set {whole!r} names more than {MAX_NODES} nodes.")
    width = len(low) if low.startswith("0") and len(low) > 1 else 0
    return [str(n).zfill(width) for n in range(int(low), int(high) + 1)]


def expand(text: str) -> list[str]:
    """``node[01-03],login`` -> ``["node01", "node02", "node03", "login"]`` (order kept, no dups).

    Raises:
        UsageError: unbalanced or nested brackets, a bad range, or an empty set.
    """
    names: list[str] = []
    for part in _split_top(text):
        pieces = re.split(r"(\[[^\]]*\])", part)
        expanded = [""]
        for piece in pieces:
            if piece.startswith("["):
                items = [x for spec in piece[1:-1].split(",") for x in _range(spec, text)]
                expanded = [e + x for e in expanded for x in items]
                if len(expanded) > MAX_NODES:
                    raise UsageError(f"Node set {text!r} names more than {MAX_NODES} nodes.")
            else:
                if not re.fullmatch(r"[A-Za-z0-9_.@:-]*", piece):
                    raise UsageError(f"Node set {text!r}: {piece!r} is not a host name.")
                expanded = [e + piece for e in expanded]
        names.extend(expanded)
    if not names:
        raise UsageError(f"Node set {text!r} names no node.")
    return list(dict.fromkeys(names))


def fold(names: list[str]) -> str:
    """The inverse of expand for display: ``node01 node02 node03 node05`` -> ``node[01-03,05]``."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    plain: list[str] = []
    parsed = []
    padded: set[tuple[str, str, int]] = set()
    for name in dict.fromkeys(names):
        match = re.fullmatch(r"(.*?)(\d+)(\D*)", name)
        if not match:
            plain.append(name)
            continue
        prefix, digits, suffix = match.groups()
        if digits.startswith("0") and len(digits) > 1:
            padded.add((prefix, suffix, len(digits)))
        parsed.append((prefix, digits, suffix))
    for prefix, digits, suffix in parsed:
        # node0999 and node1000 are one zero-padded range of width 4.
        width = len(digits) if (prefix, suffix, len(digits)) in padded else 0
        groups.setdefault((prefix, suffix, width), []).append(int(digits))
    out = []
    for (prefix, suffix, width), numbers in groups.items():
        numbers.sort()
        if len(numbers) == 1:
            out.append(f"{prefix}{str(numbers[0]).zfill(width)}{suffix}")
            continue
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            low, high = str(start).zfill(width), str(prev).zfill(width)
            runs.append(low if start == prev else f"{low}-{high}")
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(runs)}]{suffix}")
    return ",".join(out + plain)
