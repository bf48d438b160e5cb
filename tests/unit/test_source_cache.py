"""What a source file's parse taught hangscope is kept on disk for the next run
(collect/diskcache.py): a new run reads it instead of parsing, an edited file or a new
hangscope never gets an old answer, and a cache it cannot use is only slower."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangscope import diskcache
from hangscope.collect import source
from hangscope.collect.source import _per_version
from hangscope.diskcache import SourceCache


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hangscope" / "source"


def _counting(builds: list[bytes], value: object = None):  # type: ignore[no-untyped-def]
    def build(text: bytes) -> object:
        builds.append(text)
        return value if value is not None else (len(text), frozenset({1, 2}), {3: "x"})
    return build


def test_a_new_run_reads_the_kept_result_instead_of_building_it(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("with lock:\n    pass\n")
    builds: list[bytes] = []
    first = _per_version(str(path), SourceCache("test"), _counting(builds), ())
    # a new run: nothing in memory
    again = _per_version(str(path), SourceCache("test"), _counting(builds), ())
    assert again == first == (len(path.read_bytes()), frozenset({1, 2}), {3: "x"})
    assert len(builds) == 1
    # another kind of result of the same file is its own entry
    _per_version(str(path), SourceCache("other"), _counting(builds), ())
    assert len(builds) == 2


def test_an_edited_file_is_built_again(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("a = 1\n")
    builds: list[bytes] = []
    _per_version(str(path), SourceCache("test"), _counting(builds), ())
    path.write_text("a = 22\n")
    assert _per_version(str(path), SourceCache("test"), _counting(builds), ())[0] == 7
    assert builds == [b"a = 1\n", b"a = 22\n"]


def test_a_new_hangscope_never_reads_an_older_ones_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.py"
    path.write_text("a = 1\n")
    builds: list[bytes] = []
    _per_version(str(path), SourceCache("test"), _counting(builds), ())
    monkeypatch.setattr(diskcache, "_digest", "another-version")
    _per_version(str(path), SourceCache("test"), _counting(builds), ())
    assert len(builds) == 2


def test_what_cannot_be_kept_or_read_back_is_only_slower(
        tmp_path: Path, own_cache: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("a = 1\n")
    builds: list[bytes] = []

    class Opaque:  # not plain data: marshal refuses it, nothing is kept
        pass

    opaque = Opaque()
    assert _per_version(str(path), SourceCache("opaque"), _counting(builds, opaque), ()) \
        is opaque
    assert not own_cache.exists() or not list(own_cache.iterdir())
    _per_version(str(path), SourceCache("test"), _counting(builds), ())
    for entry in own_cache.iterdir():
        entry.write_bytes(b"\x00garbage")  # a torn or foreign file
    assert _per_version(str(path), SourceCache("test"), _counting(builds), ())[0] == 6
    assert len(builds) == 3


def test_lock_scope_of_a_new_run_parses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "worker.py"
    path.write_text("import threading\nlock = threading.Lock()\n\ndef f():\n"
                    "    with lock:\n        return 1\n")
    found = source.lock_scope(str(path), 6)
    assert found == (None, ("lock",), False)
    monkeypatch.setattr(source, "_cache", SourceCache("parsed"))  # a new run's memory

    def no_parse(text: bytes) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(source, "_parse", no_parse)
    assert source.lock_scope(str(path), 6) == found


def test_the_cache_holds_a_bounded_number_of_entries(
        tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskcache, "MAX_ENTRIES", 4)
    for i in range(6):
        path = tmp_path / f"m{i}.py"
        path.write_text(f"a = {i}\n")
        _per_version(str(path), SourceCache("test"), _counting([]), ())
    assert 2 <= len(list(own_cache.iterdir())) <= 4


def test_a_hangscope_whose_modules_are_no_files_keeps_nothing(
        tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zipapp a remote node runs: its version cannot be read from its files, so no
    answer of another bundle could be told apart."""
    monkeypatch.setattr(diskcache, "_digest", None)
    monkeypatch.setattr(diskcache, "__file__", str(tmp_path / "hangscope.pyz" / "hangscope"
                                                   / "diskcache.py"))
    path = tmp_path / "train.py"
    path.write_text("a = 1\n")
    builds: list[bytes] = []
    _per_version(str(path), SourceCache("test"), _counting(builds), ())
    _per_version(str(path), SourceCache("test"), _counting(builds), ())
    assert len(builds) == 2
    assert not own_cache.exists()
