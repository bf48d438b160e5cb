"""A gRPC service (grpcio, generic handlers with JSON messages) whose handler calls a method of
the same server over its own channel:

    python grpc_jobs.py MODE READY_FILE WORKDIR

- ``self_call``: a translation gateway serves ``Translate`` and ``Detect`` on one server
  built on ``ThreadPoolExecutor(max_workers=2)``; ``Translate`` asks ``Detect`` for the
  language through a channel to its own port. A client child sends 4 ``Translate`` calls at
  once: both workers take one and block in the nested call, whose ``Detect`` requests wait
  in the pool's queue behind them for ever (grpc/grpc#8603, "bounded server thread pools
  considered harmful"; #7052).
- ``two_servers``: the twin: ``Detect`` is served by a second server of the same process, on
  its own pool, and computes a little; the client asks again and again (progressing).
- ``pool_cycle``: ``Detect`` is served by a detector service in a process of its own (two
  workers), whose ``Detect`` asks the gateway back for its ``Glossary``: 4 ``Translate`` calls
  take both gateway workers, which wait on the detector, whose two workers wait on the
  gateway's full pool (grpc/grpc#8603 across services; blind round 26's 04).
- ``stream_window``: a bidi ``Transcribe`` stream: the client's request iterator keeps at most
  4 chunks unanswered (a ``threading.Semaphore`` its response loop releases), the server's
  handler answers only once 1,024 frames are buffered; 4 chunks of 100 frames fill the window
  short of a batch: the handler waits for more requests, the iterator for responses
  (grpc/grpc#21737's windowing on a micro-batching server; blind round 30's 01).
- ``stream_flush``: the twin: the handler answers every chunk; the stream goes on.
- ``idle``: the gateway translates without a nested call, and its client probes it once
  every 30 s, sleeping in between: the server waits in ``wait_for_termination``, its poller
  and workers wait for the next call (grpc#40138; blind round 29's 06 read "unknown").

The server appends ``"<pid> server"`` to READY_FILE once it serves, the client ``"<pid>
client"`` once its calls are sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent import futures


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _json(fn):  # type: ignore[no-untyped-def]
    import grpc

    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=lambda b: json.loads(b), response_serializer=lambda o:
        json.dumps(o).encode())


def _stub(channel, method: str):  # type: ignore[no-untyped-def]
    return channel.unary_unary(method, request_serializer=lambda o: json.dumps(o).encode(),
                               response_deserializer=lambda b: json.loads(b))


def detect(request, context):  # type: ignore[no-untyped-def]
    end = time.monotonic() + 0.02  # a small model's forward pass
    while time.monotonic() < end:
        pass
    return {"lang": "de" if "ß" in request["text"] else "en"}


def glossary(request, context):  # type: ignore[no-untyped-def]
    return {"terms": ["Straße"]}


def detector(ready_file: str, gateway_port: str) -> None:
    """The detector service of ``pool_cycle``: its Detect asks the gateway for its glossary."""
    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="detect"))
    terms = _stub(grpc.insecure_channel(f"127.0.0.1:{gateway_port}"), "/lang.Gateway/Glossary")

    def detect_with_terms(request, context):  # type: ignore[no-untyped-def]
        known = terms({})["terms"]  # the call back into the gateway
        return {"lang": "de" if any(t in request["text"] for t in known) else "en"}

    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "lang.Detector", {"Detect": _json(detect_with_terms)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(f"{ready_file}.port.tmp", "w") as f:
        f.write(str(port))
    os.replace(f"{ready_file}.port.tmp", f"{ready_file}.port")  # whole, or not there
    ready(ready_file, "detector")
    server.wait_for_termination()


def transcribe(mode: str):  # type: ignore[no-untyped-def]
    def handler(requests, context):  # type: ignore[no-untyped-def]
        frames = 0
        for chunk in requests:
            frames += chunk["frames"]
            if mode == "stream_flush" or frames >= 1024:  # a full batch (flush: every chunk)
                yield {"seq": chunk["seq"], "frames": frames}
                frames = 0
    return handler


def serve(mode: str, ready_file: str) -> None:
    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="rpc"))
    port = server.add_insecure_port("127.0.0.1:0")
    detector_port = port
    if mode == "pool_cycle":
        subprocess.Popen([sys.executable, __file__, "detector", ready_file, str(port)])
        while not os.path.exists(f"{ready_file}.port"):  # the detector's port, once it serves
            time.sleep(0.05)  # (the polling interval of that readiness wait)
        with open(f"{ready_file}.port") as f:
            detector_port = int(f.read())
    if mode == "two_servers":
        detector = grpc.server(futures.ThreadPoolExecutor(max_workers=2,
                                                          thread_name_prefix="detect"))
        detector.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "lang.Detector", {"Detect": _json(detect)}),))
        detector_port = detector.add_insecure_port("127.0.0.1:0")
        detector.start()
    lookup = _stub(grpc.insecure_channel(f"127.0.0.1:{detector_port}"), "/lang.Detector/Detect")

    def translate(request, context):  # type: ignore[no-untyped-def]
        # the nested call (idle: none, the gateway knows the language)
        lang = "en" if mode == "idle" else lookup({"text": request["text"]})["lang"]
        return {"text": request["text"][::-1], "from": lang}

    handlers = [grpc.method_handlers_generic_handler(
        "lang.Gateway", {"Translate": _json(translate), "Glossary": _json(glossary)})]
    if mode.startswith("stream"):
        handlers.append(grpc.method_handlers_generic_handler("asr.Recognizer", {
            "Transcribe": grpc.stream_stream_rpc_method_handler(
                transcribe(mode), request_deserializer=lambda b: json.loads(b),
                response_serializer=lambda o: json.dumps(o).encode())}))
    if mode == "self_call":
        handlers.append(grpc.method_handlers_generic_handler(
            "lang.Detector", {"Detect": _json(detect)}))
    server.add_generic_rpc_handlers(tuple(handlers))
    server.start()
    ready(ready_file, "server")
    subprocess.Popen([sys.executable, __file__, "client", ready_file, str(port), mode])
    server.wait_for_termination()


def stream_client(ready_file: str, port: str) -> None:
    import threading

    import grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.stream_stream("/asr.Recognizer/Transcribe",
                                 request_serializer=lambda o: json.dumps(o).encode(),
                                 response_deserializer=lambda b: json.loads(b))
    window = threading.Semaphore(4)  # chunks sent and not answered yet

    def chunks():  # type: ignore[no-untyped-def]
        seq, said = 0, False
        while True:
            if not window.acquire(blocking=False):
                if not said:  # the window is full: the next chunk waits for a response
                    ready(ready_file, "client")
                    said = True
                window.acquire()
            yield {"seq": seq, "frames": 100}
            seq += 1

    for _result in call(chunks()):
        window.release()


def client(ready_file: str, port: str, mode: str) -> None:
    import grpc

    if mode.startswith("stream"):
        stream_client(ready_file, port)
        return
    translate = _stub(grpc.insecure_channel(f"127.0.0.1:{port}"), "/lang.Gateway/Translate")
    if mode == "idle":  # a health probe: one call, answered, then the next in 30 s
        translate({"text": "probe"})
        ready(ready_file, "client")
        while True:
            time.sleep(30)
            translate({"text": "probe"})
    with futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="client") as pool:
        calls = [pool.submit(translate, {"text": f"sentence {i}"}) for i in range(4)]
        ready(ready_file, "client")
        while True:
            for call in calls:
                call.result()
            if mode != "two_servers":
                return
            calls = [pool.submit(translate, {"text": f"sentence {i}"}) for i in range(4)]


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(*sys.argv[2:5])
    elif sys.argv[1] == "detector":
        detector(*sys.argv[2:4])
    else:
        serve(sys.argv[1], sys.argv[2])
