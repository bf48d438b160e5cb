"""gRPC's Python server (grpcio): ``server.start()`` serves on gRPC's own threads (its
completion-queue poller, ``Thread-N (_serve)``, and the handler pool's workers, idle in their
executor's queue between calls), and the main thread blocks in ``wait_for_termination`` until
the server stops (a timed wait it re-checks every few tenths of a second). A main thread there
serves: it waits for no request (grpc#40138: "will not consume computational resources")."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(
    name="grpc",
    serve_waits=(("wait_for_termination", "grpc/_server.py"),),
    # its own Python code: a handler's call site is the user's servicer method under it
    library_files=("grpc/",),
)
