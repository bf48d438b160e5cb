"""Why no RAS answers, told from what a real process maps: NCCL too old, or RAS not listening.

A child process loads a real shared library under NCCL's file names (a system library copied
as ``libnccl.so.2.18.3``, or laid out as pip's nvidia-nccl wheel does), so /proc/PID/maps shows
exactly what a rank's would; no connection is attempted in either case.
"""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import poll

from hangscope.collect import ras
from hangscope.model import Process
from hangscope.model import nccl as ev

_LIBM = ctypes.util.find_library("m")


def _loader(lib: Path, ready: Path) -> subprocess.Popen:
    code = (f"import ctypes, pathlib, time; ctypes.CDLL({str(lib)!r}); "
            f"pathlib.Path({str(ready)!r}).write_text('ok'); time.sleep(120)")
    return subprocess.Popen([sys.executable, "-c", code])


def _system_lib() -> Path:
    for folder in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                   "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"):
        candidate = Path(folder) / (_LIBM or "libm.so.6")
        if candidate.exists():
            return candidate
    pytest.skip("no libm to stand in for libnccl")


@pytest.mark.parametrize("layout,version,status", [
    ("versioned", "2.18.3", ev.TOO_OLD), ("pip", "2.27.3", ev.NO_LISTENER)])
def test_version_from_maps(tmp_path: Path, layout: str, version: str, status: str) -> None:
    if layout == "versioned":
        lib = tmp_path / f"libnccl.so.{version}"
    else:
        site = tmp_path / "site-packages"
        (site / f"nvidia_nccl_cu12-{version}.dist-info").mkdir(parents=True)
        lib = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
        lib.parent.mkdir(parents=True)
    shutil.copy(_system_lib(), lib)
    ready = tmp_path / "ready"
    child = _loader(lib, ready)
    try:
        poll(ready.exists, "the child to map the library")
        assert ras.nccl_version(child.pid) == tuple(int(x) for x in version.split("."))
        reading = ras.read([Process(pid=child.pid, python=True)])
    finally:
        child.kill()
        child.wait()
    assert reading.status == status
    assert f"NCCL {version}" in reading.note


def test_no_nccl_mapped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert ras.nccl_version(child.pid) is False
    finally:
        child.kill()
        child.wait()
