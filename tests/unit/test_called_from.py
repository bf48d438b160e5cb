"""The user's own frame beside a library's site (analyze/graph/sites.py ``called_from``):
issue 35, "the site must be the innermost frame of the user's code on the blocked thread (and
above the fork point for a forked child)"."""

from __future__ import annotations

from hangscope.analyze.graph.sites import called_from
from hangscope.analyze.graph.waitwalk import site_words
from hangscope.model import Frame, Thread

LIB = "/usr/lib/python3.11/"


def _thread(*frames: tuple[str, str, int], site: str) -> Thread:
    return Thread(tid=1, frames=tuple(Frame(name, path, line) for name, path, line in frames),
                  site=site)


def test_a_librarys_site_says_the_users_function_that_called_it() -> None:
    thread = _thread(("Handler.acquire", LIB + "logging/__init__.py", 927),
                     ("Handler.handle", LIB + "logging/__init__.py", 1000),
                     ("record_progress", "/srv/app/worker.py", 17),
                     ("main", "/srv/app/worker.py", 30),
                     site="Handler.acquire (logging/__init__.py:927)")
    assert site_words(thread) == (" at Handler.acquire (logging/__init__.py:927) "
                                  "(called from record_progress (worker.py:17))")


def test_a_users_site_needs_nothing_more() -> None:
    thread = _thread(("record_progress", "/srv/app/worker.py", 17),
                     site="record_progress (worker.py:17)")
    assert called_from(thread) == ""


def test_a_forked_childs_parent_frames_below_its_fork_point_are_not_its_own() -> None:
    thread = _thread(("_exit_function", LIB + "multiprocessing/util.py", 360),
                     ("BaseProcess._bootstrap", LIB + "multiprocessing/process.py", 317),
                     ("Popen._launch", LIB + "multiprocessing/popen_fork.py", 71),
                     ("collect_results", "/srv/app/jobs.py", 101),
                     site="_exit_function (multiprocessing/util.py:360)")
    assert called_from(thread) == ""
