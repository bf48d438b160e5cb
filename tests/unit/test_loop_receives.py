"""Which lines of the loops holding a frame's line receive a message (``Frame.loop_receives``,
collect/framework_lines.py): a stage in a ring of full sends whose loops read drains what
comes to it; one whose loops never read sends all its work first (tests/frameworks/
test_zmq_ring.py has the real ring)."""

from __future__ import annotations

from pathlib import Path

from hangscope.collect.framework_lines import receives_in
from hangscope.collect.loops import loop_facts

SOURCE = '''\
def scheduler(requests, outputs):
    while True:
        rid = requests.recv_pyobj()
        for step in range(3):
            outputs.send_pyobj((rid, step))


def front(requests, texts):
    for rid in range(100):
        requests.send_pyobj(rid)
    while True:
        texts.recv_pyobj()


def engine(self):
    while True:
        batch = self.recv_requests()
        self.out.send_pyobj(batch)
'''


def _at(path: Path, needle: str, after: int = 0) -> tuple[int, ...]:
    lines = path.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if n > after and needle in text)
    loops, _ = loop_facts(str(path), line)
    return receives_in(str(path), loops)


def test_a_send_inside_a_loop_that_reads_names_the_read(tmp_path: Path) -> None:
    path = tmp_path / "stages.py"
    path.write_text(SOURCE)
    assert _at(path, "outputs.send_pyobj") == (3,)  # the outer loop's receive, not the inner's
    assert _at(path, "self.out.send_pyobj") == (17,)  # a wrapper named recv_*: SGLang's


def test_a_send_loop_that_never_reads_has_none(tmp_path: Path) -> None:
    path = tmp_path / "stages.py"
    path.write_text(SOURCE)
    assert _at(path, "requests.send_pyobj(rid)") == ()  # the reading loop comes after it


def test_a_library_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "site-packages" / "stages.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    assert _at(path, "outputs.send_pyobj") == ()
