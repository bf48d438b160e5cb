"""``-o FILE`` is safe in a shared directory: no FIFO, device or link is written through, no file
of another user is replaced, and a report appears whole or not at all (a temp file renamed in)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots" / "mismatch.json"


def _show(cli: Any, out: Path, fmt: str = "md") -> Any:
    return cli("show", str(SAVED), "-f", fmt, "-o", str(out), timeout=20)


def _refused(result: Any, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def test_fifo_is_refused_at_once_instead_of_blocking(hangscope_cli: Any, tmp_path: Path) -> None:
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    result = _show(hangscope_cli, fifo)  # the old open() blocked here until a reader came
    _refused(result, str(fifo), "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_directory_and_device_are_refused(hangscope_cli: Any, tmp_path: Path) -> None:
    _refused(_show(hangscope_cli, tmp_path), "not a regular file")
    _refused(_show(hangscope_cli, Path("/dev/null")), "not a regular file")


def test_symlink_is_refused_and_its_target_untouched(hangscope_cli: Any, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("precious")
    link = tmp_path / "report.md"
    link.symlink_to(target)
    _refused(_show(hangscope_cli, link), "symbolic link")
    assert target.read_text() == "precious"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_file_of_another_user_is_not_overwritten(hangscope_cli: Any, tmp_path: Path) -> None:
    other = tmp_path / "report.json"
    other.write_text("theirs")
    os.chown(other, 65534, 65534)  # nobody
    _refused(_show(hangscope_cli, other, "json"), "belongs to another user")
    assert other.read_text() == "theirs"
    assert other.stat().st_uid == 65534


def test_report_replaces_the_name_not_the_inode(hangscope_cli: Any, tmp_path: Path) -> None:
    """A hard link planted at the report's name keeps its content: the report is a new file
    (created O_EXCL, 0600) renamed into place, never the old inode opened and truncated."""
    original = tmp_path / "elsewhere.txt"
    original.write_text("keep me")
    report = tmp_path / "report.md"
    os.link(original, report)
    result = _show(hangscope_cli, report)
    assert result.returncode == 0, result.stderr
    assert original.read_text() == "keep me"
    assert report.read_text().startswith("#")
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.txt", "report.md"]


def test_missing_directory_says_so(hangscope_cli: Any, tmp_path: Path) -> None:
    _refused(_show(hangscope_cli, tmp_path / "no" / "such" / "r.md"), "Cannot write")
