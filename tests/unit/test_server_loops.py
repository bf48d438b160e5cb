"""A server's request loop, by the frames py-spy labels ``func (file)``: every framework's
``server_loop_files`` entry, a directory (``uvicorn/``) standing for any file under it.

GIVEN frame labels of the loops uvicorn, gunicorn, aiohttp and tornado run while they wait for
the next request (their real files, as py-spy prints them from site-packages), THEN calm reads
each as a server loop; GIVEN a zmq receive or the user's own file, THEN not: a zmq receive
waits for work or for an answer as the wait-for graph says, not as its file does.
"""

from __future__ import annotations

import pytest

from hangscope.analyze.patterns.calm.calm import _SERVER_LOOP

SITE = "/opt/venv/lib/python3.11/site-packages"


@pytest.mark.parametrize("label", [
    "serve (uvicorn/server.py)",
    "run (uvicorn/supervisors/multiprocess.py)",
    f"run_for_one ({SITE}/gunicorn/workers/sync.py)",
    f"sleep ({SITE}/gunicorn/arbiter.py)",
    f"_run_app ({SITE}/aiohttp/web.py)",
    f"start ({SITE}/tornado/platform/asyncio.py)",
    "serve_forever (/usr/lib/python3.11/socketserver.py)",
    "serve_forever (/usr/lib/python3.11/wsgiref/simple_server.py)",
])
def test_a_frame_in_a_servers_own_loop_is_a_server_loop(label: str) -> None:
    assert _SERVER_LOOP.search(label), label


@pytest.mark.parametrize("label", [
    f"recv_pyobj ({SITE}/zmq/sugar/socket.py)",
    "event_loop (/srv/app/myuvicorn/loop.py)",
    "main (train.py)",
])
def test_a_zmq_receive_or_the_programs_own_file_is_no_server_loop(label: str) -> None:
    assert not _SERVER_LOOP.search(label), label
