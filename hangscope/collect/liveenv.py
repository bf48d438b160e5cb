"""The live environment of a process whose /proc/PID/environ a process title overwrote.

``setproctitle`` (SGLang, vLLM, Ray and many trainers call it) makes room for a long title by
moving the environment to the heap and writing the title, padded with NULs, over the memory
where argv and the environment were: the kernel's /proc/PID/environ reads that old region, so
it holds no ``KEY=value`` any more, and a rank's RANK, WORLD_SIZE and MASTER_PORT are gone
from it. The C library's ``__environ`` still points at the moved copy: find that symbol in the
process's libc (its ELF dynamic symbol table, loaded where /proc/PID/maps says), read the
pointer and the strings it points to through /proc/PID/mem (as py-spy reads memory: root, or
ptrace rights over the process). Nothing is stopped; a refusal or an unknown layout is None.
The ELF and memory reading is here; collect/procfs.py opens the process's files.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO

#: At most this many variables and bytes per variable are read (a runaway pointer array).
_MAX_VARS = 4096
_MAX_VALUE = 32 * 1024
#: The file names of the C libraries that hold ``__environ``.
LIBC_NAMES = ("libc.so.6", "libc.so", "ld-musl")
_symbols: dict[tuple[str, int, int], int | None] = {}


def environ_offset(path: str) -> int | None:
    """``__environ``'s value in the ELF64 file's dynamic symbol table (an offset from the
    object's load base for a shared library); None when absent or not ELF64 little-endian."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _symbols:
        _symbols[key] = _scan(path)
    return _symbols[key]


def _scan(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize)
                for k in range(shnum)]
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 11 or not entsize:  # SHT_DYNSYM
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, at)
            end = data.find(b"\0", strtab + name)
            if data[strtab + name:end] in (b"__environ", b"environ") and value:
                return value
    return None


def _string(mem: BinaryIO, address: int) -> bytes:
    """The NUL-terminated string at ``address``, read a page at a time: a read past the end
    of its mapping fails, so never ask beyond the page the string may end in."""
    chunks: list[bytes] = []
    size = 0
    while size < _MAX_VALUE:
        span = 4096 - (address % 4096)
        mem.seek(address)
        chunk = mem.read(span)
        end = chunk.find(b"\0")
        if end >= 0 or not chunk:
            chunks.append(chunk[:end] if end >= 0 else chunk)
            break
        chunks.append(chunk)
        size += len(chunk)
        address += len(chunk)
    return b"".join(chunks)


def environ_at(mem: BinaryIO, address: int) -> bytes | None:
    """The environment whose ``char **`` is stored at ``address`` of the memory file ``mem``
    (``KEY=value`` joined by NULs, as /proc/PID/environ gives it); None when unreadable."""
    try:
        mem.seek(address)
        pointer, = struct.unpack("<Q", mem.read(8))
        if not pointer:
            return None
        mem.seek(pointer)
        raw = mem.read(8 * _MAX_VARS)
        out = []
        for (at,) in struct.iter_unpack("<Q", raw[:len(raw) // 8 * 8]):
            if not at:
                break
            out.append(_string(mem, at))
    except (OSError, ValueError, OverflowError, struct.error):
        return None
    return b"\0".join(out)
