"""Keep hangscope's compiled modules between runs where the environment forbids ``.pyc`` files.

Containers and CI images often set ``PYTHONDONTWRITEBYTECODE=1``, and an editable or
source-tree install has no bytecode of its own: every ``hangscope dump`` then compiles its ~200
modules from source before and while it samples, a third of a cold dump of 8 CUDA ranks
(docs/performance-gpu.md) and, on a machine a busy engine holds, CPU the dump cannot get.
The user's wish (no ``__pycache__`` in their trees) is kept: the bytecode goes to hangscope's
own cache (``$XDG_CACHE_HOME/hangscope/bytecode``, as ``PYTHONPYCACHEPREFIX`` would put it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hangscope.diskcache import cache_root


def keep_bytecode() -> bool:
    """Compile into (and load from) hangscope's own cache when this interpreter was told not
    to write bytecode and hangscope has none beside its source; whether it now does. Call it
    before the bulk of hangscope is imported (the command line's entry point)."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return False  # bytecode goes where Python (or the user's prefix) puts it
    here = Path(__file__)
    if not here.is_file() or sys.implementation.cache_tag is None:
        return False  # run from a zip (the remote bundle carries its own), or no bytecode
    if Path(importlib.util.cache_from_source(str(here))).exists():
        return False  # installed with its bytecode (pip compiles it): that is used
    target = cache_root() / "bytecode"
    try:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False  # no cache is only slower
    sys.pycache_prefix = str(target)
    sys.dont_write_bytecode = False
    return True
