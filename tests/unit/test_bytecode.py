"""hangscope keeps its compiled modules in its own cache where PYTHONDONTWRITEBYTECODE forbids
``__pycache__`` (hangscope/bytecode.py): each case runs a fresh interpreter on a copy of the
package without bytecode, so what the checkout holds cannot decide it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import hangscope

PROBE = ("import sys\n"
         "from hangscope.bytecode import keep_bytecode\n"
         "print(keep_bytecode(), sys.modules['hangscope.bytecode'].__file__)\n"
         "import hangscope.analyze.verdict\n")


def _package(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    shutil.copytree(Path(hangscope.__file__).parent, root / "hangscope",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _probe(root: Path, cache: Path, **env: str) -> str:
    full = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH")}
    full.update(PYTHONPATH=str(root), XDG_CACHE_HOME=str(cache), **env)
    # (run from the copy's folder: ``-c`` puts the working directory first on sys.path)
    done = subprocess.run([sys.executable, "-c", PROBE], env=full, cwd=root,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout.split()
    assert out[1] == str(root / "hangscope" / "bytecode.py")  # the copy, not the checkout
    return out[0]


def test_bytecode_goes_to_its_own_cache_not_the_tree(tmp_path: Path) -> None:
    root = _package(tmp_path)
    cache = tmp_path / "cache"
    assert _probe(root, cache, PYTHONDONTWRITEBYTECODE="1") == "True"
    kept = cache / "hangscope" / "bytecode"
    compiled = [p.name for p in kept.rglob("*.pyc")]
    assert any(name.startswith("verdict.") for name in compiled), compiled
    assert not list(root.rglob("__pycache__"))  # the user's wish: nothing beside the source
    # the next run loads it from there (still True: it looks there, and compiles nothing)
    before = {p: p.stat().st_mtime_ns for p in kept.rglob("*.pyc")}
    assert _probe(root, cache, PYTHONDONTWRITEBYTECODE="1") == "True"
    assert {p: p.stat().st_mtime_ns for p in kept.rglob("*.pyc")} == before


def test_nothing_changes_where_python_writes_bytecode_itself(tmp_path: Path) -> None:
    root = _package(tmp_path)
    cache = tmp_path / "cache"
    assert _probe(root, cache) == "False"
    assert not (cache / "hangscope").exists()


def test_a_prefix_the_user_chose_is_kept(tmp_path: Path) -> None:
    root = _package(tmp_path)
    cache = tmp_path / "cache"
    assert _probe(root, cache, PYTHONDONTWRITEBYTECODE="1",
                  PYTHONPYCACHEPREFIX=str(tmp_path / "mine")) == "False"
    assert not (cache / "hangscope").exists()


def test_installed_bytecode_is_used_as_it_is(tmp_path: Path) -> None:
    root = _package(tmp_path)
    import compileall

    assert compileall.compile_dir(str(root / "hangscope"), quiet=1)
    assert _probe(root, tmp_path / "cache", PYTHONDONTWRITEBYTECODE="1") == "False"


def test_an_unwritable_cache_is_only_slower(tmp_path: Path) -> None:
    root = _package(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert _probe(root, blocker, PYTHONDONTWRITEBYTECODE="1") == "False"
