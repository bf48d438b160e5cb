"""What hangscope keeps between runs, in ``$XDG_CACHE_HOME/hangscope``: here, what it learnt
from a source file's parse (bytecode.py and remote/ship.py keep theirs beside it).

Every dump reads the frames' source files (collect/source.py: locks held, loop headers,
rank guards, capture blocks), and a cold dump parses each again: threading.py and
subprocess.py for every job, a framework's large modules for an engine. On a machine a busy
engine holds, that CPU is what a dump cannot get (docs/performance.md, a real vLLM server),
and on a GPU node the parse holds the GIL every /proc read of the first round waits for. The
results are plain data (tuples, frozensets, dicts of lines), so they are kept with
``marshal``, which rebuilds data and never runs code, in ``$XDG_CACHE_HOME/hangscope/source``
(0700). An entry is keyed by the file's version (path, mtime, size) and by hangscope's own
code (its modules' mtimes and sizes), so an edited file or a new hangscope never reads an
old answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
import threading
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hangscope``, else ``~/.cache/hangscope``; not created here."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hangscope"


#: Entries kept before the oldest half goes (a job reads tens of files; ~1 KiB each).
MAX_ENTRIES = 8192

Key = tuple[str, int, int]  # path, mtime_ns, size


class SourceCache(dict[Key, Any]):
    """One kind of per-version result (``parsed``, ``loops``...): in memory for this run, on
    disk for the next ones, under its ``name``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


_digest_lock = threading.Lock()
_digest: str | None = None


def _code_digest() -> str:
    """hangscope's own version: what every one of its modules was when this run started;
    "" where its modules are no files (the zipapp a remote node runs): nothing is kept."""
    global _digest
    with _digest_lock:
        if _digest is None:
            root = Path(__file__).resolve().parent  # the hangscope package
            digest = hashlib.sha256(repr(sys.version_info[:2]).encode())
            seen = 0
            for dirpath, _dirs, files in sorted(os.walk(root)):
                for name in sorted(files):
                    if name.endswith(".py"):
                        with contextlib.suppress(OSError):
                            st = os.stat(os.path.join(dirpath, name))
                            digest.update(f"{dirpath}/{name}\0{st.st_mtime_ns}\0"
                                          f"{st.st_size}\n".encode())
                            seen += 1
            _digest = digest.hexdigest()[:16] if seen else ""
        return _digest


def _entry(cache: SourceCache, key: Key) -> Path | None:
    version = _code_digest()
    if not version:
        return None
    what = hashlib.sha256(f"{cache.name}\0{key[0]}\0{key[1]}\0{key[2]}".encode()).hexdigest()
    return cache_root() / "source" / f"{version}-{what[:32]}"


MISSING = object()  # load: nothing kept


def load(cache: SourceCache, key: Key) -> Any:
    """The kept result for ``key``, or :data:`MISSING`."""
    entry = _entry(cache, key)
    if entry is None:
        return MISSING
    try:
        return marshal.loads(entry.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return MISSING


_count_lock = threading.Lock()
_entries: dict[Path, int] = {}  # each folder's entries as this process counts them


def store(cache: SourceCache, key: Key, value: Any) -> None:
    """Keep ``value`` for the next runs; nothing when it cannot be (no cache is only slower)."""
    try:
        data = marshal.dumps(value)
    except ValueError:
        return  # not plain data
    entry = _entry(cache, key)
    if entry is None:
        return
    with contextlib.suppress(OSError):
        if entry.parent not in _entries:
            entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = entry.with_name(f"{entry.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(entry)  # atomic: a reader beside it sees the old entry or the whole new one
        _counted(entry.parent)


def _counted(folder: Path) -> None:
    """One more entry: the folder is listed once per process (then counted), and past
    :data:`MAX_ENTRIES` the older half goes (entries of older hangscope versions, files long
    gone)."""
    with _count_lock:
        count = _entries[folder] = (_entries[folder] + 1 if folder in _entries
                                    else len(os.listdir(folder)))
        if count <= MAX_ENTRIES:
            return
        aged = []
        for name in os.listdir(folder):
            with contextlib.suppress(OSError):
                aged.append((os.stat(folder / name).st_mtime_ns, name))
        for _, name in sorted(aged)[: len(aged) // 2]:
            with contextlib.suppress(OSError):
                os.unlink(folder / name)
        _entries[folder] = len(aged) - len(aged) // 2
