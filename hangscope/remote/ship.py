"""Ship hangscope to a node that lacks it: a zipapp plus the py-spy binary, as one tar stream.

Like ``python -m zipapp`` + ``tar -c | ssh node 'tar -x -C $(mktemp -d)'``: the remote side
(``REMOTE_SCRIPT``) unpacks into a private ``mktemp -d`` directory (0700), runs
``python3 hangscope.pyz dump ...`` from there and removes the directory when it exits, also
when the transport hangs up. Nothing is installed and nothing stays behind.

psutil is the one binary dependency: its abi3 extension cannot load from inside a zip, so it
travels beside the zipapp in ``lib/`` and serves any CPython >= 3.6 of the same architecture
(the remote's own psutil wins when it has one).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import marshal
import os
import sys
import tarfile
import zipfile
from functools import lru_cache
from pathlib import Path

from hangscope.diskcache import cache_root

#: Pure-Python packages the one-node dump imports (``textual`` is for the TUI only: left out).
PURE_DEPS = ("rich", "markdown_it", "mdurl", "pygments", "pynvml")
BINARY_DEPS = ("psutil",)
NO_PYTHON = 98

#: The zipapp runs this module as ``__main__`` (``python -m hangscope``), named as a string:
#: remote/ ships the command line, it never imports it.
ENTRY_MODULE = "hangscope"
_MAIN = f"""\
import os, runpy, sys
lib = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "lib")
try:
    import psutil  # noqa: F401  the remote's own, when it has one
except ImportError:
    sys.path.append(lib)
sys.argv[0] = "hangscope"
runpy.run_module({ENTRY_MODULE!r}, run_name="__main__")
"""

# One connection: the remote says on its first stdout line whether it needs the bundle
# ("HANGSCOPE:send"), and only then does the client write the tar stream to its stdin.
# $1: auto | always | never (--ship); $2: the Python for the zipapp; $3: the command (dump,
# or watch for a multi-node watch's watcher on the node); the rest: its arguments.
HELLO_INSTALLED = "HANGSCOPE:installed"
HELLO_SEND = "HANGSCOPE:send"
REMOTE_SCRIPT = r"""
mode=$1; py=$2; cmd=$3; shift 3
if [ "$mode" != always ] && command -v hangscope >/dev/null 2>&1; then
  echo HANGSCOPE:installed; exec hangscope "$cmd" "$@" </dev/null
fi
if [ "$mode" = never ]; then
  echo "hangscope: error: hangscope is not installed on $(hostname) (and --ship never)" >&2
  exit 97
fi
command -v "$py" >/dev/null 2>&1 || {
  echo "hangscope: error: no $py on $(hostname) to run hangscope with" >&2; exit 98; }
d=$(mktemp -d "${TMPDIR:-/tmp}/hangscope.XXXXXX") || exit 98
trap 'rm -rf "$d"' EXIT
trap 'exit 129' HUP INT TERM PIPE
echo HANGSCOPE:send
tar -x -C "$d" || exit 98
HANGSCOPE_PYSPY="$d/py-spy" "$py" "$d/hangscope.pyz" "$cmd" "$@" </dev/null
"""


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sources() -> list[tuple[Path, str]]:
    """(file, name in the zip) of hangscope and its pure-Python dependencies."""
    out = []
    for name in ("hangscope", *PURE_DEPS):
        root = _package_dir(name)
        if root is not None:
            out.extend((path, f"{name}/{path.relative_to(root).as_posix()}")
                       for path in sorted(root.rglob("*"))
                       if path.is_file() and "__pycache__" not in path.parts
                       and path.suffix != ".pyc")
        else:  # a single-file module (nvidia-ml-py installs pynvml.py)
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                out.append((Path(spec.origin), f"{name}.py"))
    return out


def _pyc(source: bytes, arcname: str) -> bytes | None:
    """Bytecode that needs no timestamp check: a remote of this Python version imports it
    without compiling (0.7 s of every run otherwise); any other version ignores it (bad
    magic number) and compiles the .py beside it."""
    try:
        code = compile(source, arcname, "exec", dont_inherit=True)
    except SyntaxError:
        return None
    flags = 0b01  # hash-based, unchecked (PEP 552)
    return (importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def build_zipapp() -> bytes:
    """``hangscope.pyz``: hangscope and its pure-Python dependencies, compressed."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("__main__.py", _MAIN)
        for path, arcname in _sources():
            data = path.read_bytes()
            zf.writestr(arcname, data)
            if arcname.endswith(".py"):
                pyc = _pyc(data, arcname)
                if pyc is not None:
                    zf.writestr(arcname + "c", pyc)
    return buf.getvalue()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _cache_key(pyspy: Path) -> str:
    """Changes when any shipped file, py-spy or this Python changes."""
    digest = hashlib.sha256(sys.version.encode())
    for path in [pyspy, *(p for p, _ in _sources())]:
        st = path.stat()
        digest.update(f"{path}\0{st.st_mtime_ns}\0{st.st_size}\n".encode())
    return digest.hexdigest()[:24]


@lru_cache(maxsize=1)
def bundle() -> bytes:
    """The tar stream sent on stdin: ``hangscope.pyz``, ``py-spy``, ``lib/psutil/...``.

    Built once per version and kept in ``$XDG_CACHE_HOME/hangscope`` (0700): compiling the
    bytecode takes a second or two.

    Raises:
        ToolMissing: no py-spy here to send.
    """
    from hangscope.collect.pyspy import find_pyspy

    pyspy = Path(find_pyspy())
    cache_dir = cache_root()
    cached = cache_dir / f"bundle-{_cache_key(pyspy)}.tar"
    with contextlib.suppress(OSError):
        return cached.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_bytes(tar, "hangscope.pyz", build_zipapp(), 0o600)
        _add_bytes(tar, "py-spy", pyspy.read_bytes(), 0o700)
        for name in BINARY_DEPS:
            root = _package_dir(name)
            if root is None:
                continue
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    rel = f"lib/{name}/{path.relative_to(root).as_posix()}"
                    _add_bytes(tar, rel, path.read_bytes(), 0o600)
    data = buf.getvalue()
    with contextlib.suppress(OSError):  # no cache is only slower
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for old in cache_dir.glob("bundle-*.tar"):
            old.unlink()
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.chmod(0o600)
        tmp.replace(cached)
    return data
