"""Which submitted methods a program line's get waits for one result of (``Frame.gets_one``,
collect/framework_lines.py): in a loop over a group's members such a get asks them one at a
time (tests/frameworks/test_ray.py ``setup_serial`` has the real job); a get of a list asks
them together."""

from __future__ import annotations

from pathlib import Path

from hangscope.collect.framework_lines import got_alone_at

SOURCE = '''\
import ray

def wire(workers, port):
    for w in workers:
        ray.get(w.setup.remote(port))
    ray.get([w.train.remote() for w in workers])
    ray.get(workers[0].ping.remote(), timeout=5)
    refs = ray.get(workers[0].shard.remote())
'''


def test_a_get_of_one_submitted_call_names_its_method(tmp_path: Path) -> None:
    path = tmp_path / "driver.py"
    path.write_text(SOURCE)
    assert got_alone_at(str(path), 5) == ("setup",)
    assert got_alone_at(str(path), 8) == ("shard",)


def test_a_get_of_a_list_or_with_a_timeout_names_none(tmp_path: Path) -> None:
    path = tmp_path / "driver.py"
    path.write_text(SOURCE)
    assert got_alone_at(str(path), 6) == ()  # together: every member asked
    assert got_alone_at(str(path), 7) == ()  # a timeout: it returns by itself
