"""Stacks for reading: C++ template arguments folded, dispatch noise and raw addresses collapsed.

Only for display: the JSON keeps every frame with its full name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangscope.model import Frame

_NOISE = re.compile(
    r"^(?:pybind11::|pybind11_meta_call|c10::impl::wrap_kernel_functor|c10::impl::make_boxed|"
    r"c10::impl::BoxedKernelWrapper|c10::Dispatcher::|c10::KernelFunction::|"
    r"at::_ops::\w+::(?:redispatch|call)|torch::autograd::VariableType::|"
    r"torch::autograd::TypeError_to_NotImplemented_|_PyEval_|_PyObject_|PyObject_Call|"
    r"_PyFunction_|method_vectorcall|cfunction_call|slot_tp_call|_Py_|Py_RunMain|Py_BytesMain|"
    r"pymain_|__libc_start|_start$|start_thread|clone3?$)"
)
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")


def fold_name(name: str, limit: int = 90) -> str:
    """Fold C++ template arguments and lambda bodies: ``f<A<B>, C>::g`` -> ``f<…>::g``."""
    out = []
    depth = 0
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out).replace("(anonymous namespace)::", "")
    text = re.sub(r"\{lambda\([^{}]*\)#\d+\}", "{lambda}", text)
    if "::" in text:  # drop argument lists of C++ functions, keep the qualified name
        text = re.sub(r"\((?:[^()]|\([^()]*\))*\)(?=(?:::|$| const))", "", text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


@dataclass(frozen=True)
class Line:
    """One displayed line of a stack: a frame, or a note for folded frames."""

    text: str
    location: str
    native: bool
    folded: int = 0  # how many frames this line stands for when it is a fold note


def display_lines(frames: Sequence[Frame], native: bool = True, full_paths: bool = False,
                  outermost_first: bool = False) -> list[Line]:
    """Frames ready to print, innermost first (or outermost first for a tree reading)."""
    lines: list[Line] = []
    pending_noise = 0
    pending_addr: tuple[str, int] | None = None

    def flush() -> None:
        nonlocal pending_noise, pending_addr
        if pending_addr:
            lib, count = pending_addr
            lines.append(Line(f"… {count} frame{'s' if count > 1 else ''} without symbols",
                              lib, True, count))
            pending_addr = None
        if pending_noise:
            lines.append(Line(f"… {pending_noise} dispatch frame{'s' if pending_noise > 1 else ''}",
                              "", True, pending_noise))
            pending_noise = 0

    for frame in frames:
        if frame.native and not native:
            continue
        if frame.native and _ADDRESS.match(frame.name):
            lib = frame.short_file or "?"
            if pending_addr and pending_addr[0] == lib:
                pending_addr = (lib, pending_addr[1] + 1)
            else:
                flush()
                pending_addr = (lib, 1)
            continue
        if frame.native and _NOISE.match(frame.name):
            if pending_addr:
                flush()
            pending_noise += 1
            continue
        flush()
        location = (frame.file or "") if full_paths else frame.location
        if not frame.native and full_paths and frame.line:
            location = f"{frame.file}:{frame.line}"
        name = fold_name(frame.name) if frame.native else frame.name
        lines.append(Line(name, location, frame.native))
    flush()
    return list(reversed(lines)) if outermost_first else lines
