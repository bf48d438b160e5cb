"""Native libraries under a Python call: which library a thread waits in, its function named
readably, and the thread pools that do not survive ``fork``.

py-spy names a native frame by its symbol and the shared object it lies in; Rust's v0 symbols
(``_RNvMs3_NtCs..._10rayon_core5latchNtB5_9LockLatch14wait_and_reset``) and C++'s Itanium ones
(``_ZN3foo3barEv``) come through mangled. A library whose thread pool ran in a process before
it forked leaves the child the pool's bookkeeping but none of its threads: the child's first
call that hands work to the pool waits forever (tokenizers#187, #258; libgomp's team barrier).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangscope.frameworks import FORK_POOLS, ForkPool
from hangscope.model import Frame

#: Shared objects of the C library and the interpreter: where every wait ends, naming nothing.
_SYSTEM = re.compile(r"(?:^|/)(?:libc|libpthread|ld-linux[^/]*|libpython[\d.]+|python[\d.]*)"
                     r"(?:[.-][^/]*)?$")
#: One length-prefixed identifier of a mangled name (``10rayon_core``).
_IDENT = re.compile(r"(\d+)")
#: Rust v0's crate hash (``Cs<base 62>_``), whose digits would read as lengths; its other tags
#: (``s3_``, ``B5_``) are skipped by the parse itself: what follows their digits is no name.
_NOISE = re.compile(r"Cs[0-9A-Za-z]*_")


@dataclass(frozen=True)
class NativeCall:
    """The library a Python call waits in, and the outermost of its functions there."""

    library: str  # the shared object's file name (tokenizers.abi3.so)
    path: str  # its path, as py-spy gave it
    function: str  # readable: rayon_core::latch::LockLatch::wait_and_reset


def native_call(frames: Sequence[Frame], system: bool = False) -> NativeCall | None:
    """Where a Python call waits in native code (frames innermost first, below the innermost
    Python frame): the innermost library other than the C library and the interpreter, named
    by its outermost function in the run of its frames there (rayon's latch in tokenizers, not
    the futex under it; libgomp's barrier, not the torch binding that called it). With
    ``system``, where a call computes: the outermost native frame of any library (the
    interpreter's own ``re``, a regex module's search)."""
    native = [f for f in _until_python(frames) if f.file]
    if system:
        found = native[-1] if native else None
    else:
        mine = [f for f in native if not _SYSTEM.search(f.file or "")]
        found = mine[0] if mine else None
        for frame in mine[1:]:
            if frame.file != found.file:
                break
            found = frame
    if found is None or not found.file:
        return None
    return NativeCall(found.file.rsplit("/", 1)[-1], found.file, readable(found.name))


def _until_python(frames: Sequence[Frame]) -> list[Frame]:
    out = []
    for frame in frames:
        if not frame.native:
            break
        out.append(frame)
    return out


def readable(symbol: str) -> str:
    """A mangled Rust (v0 or legacy) or C++ symbol as ``a::b::c``; any other as given."""
    if symbol.startswith("_R"):
        body = _NOISE.sub("", symbol[2:])
    elif symbol.startswith("_ZN"):
        body = symbol[3:]
    else:
        return symbol
    parts: list[str] = []
    k = 0
    while k < len(body):
        m = _IDENT.match(body, k)
        if m is None:
            k += 1
            continue
        n, start = int(m.group(1)), m.end()
        word = body[start:start + n]
        if len(word) == n and word[:1].isalpha():
            parts.append(word)
            k = start + n
        else:
            k = m.end()
    # (a legacy Rust symbol ends with its hash, h + 16 hex digits)
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    return "::".join(parts) if parts else symbol


def fork_pool(call: NativeCall | None) -> ForkPool | None:
    """The frameworks' fork-unsafe pool the call waits in, if any."""
    if call is None:
        return None
    return next((p for p in FORK_POOLS if p.path in call.path), None)


def native_words(call: NativeCall | None) -> str:
    """`` in native code, rayon_core::latch::LockLatch::wait_and_reset (tokenizers.abi3.so)``:
    what a Python line alone hides."""
    if call is None:
        return ""
    if call.function.startswith("0x"):  # (a stripped library: its address names nothing)
        return f" in native code of {call.library}"
    return f" in native code, {call.function} ({call.library})"


def pool_words(pool: ForkPool, parents: str, forked: int, one: bool) -> str:
    """Why a forked child waits forever in ``pool``, and what to do."""
    have = "the child has" if one else "the children have"
    return (f"a lock of {pool.name}, which ran in {parents} before "
            f"{'it' if forked == 1 else 'they'} forked: {have} its state but none of its "
            f"threads, so nothing will do the work {'it hands' if one else 'they hand'} it; "
            f"{pool.fix}")
