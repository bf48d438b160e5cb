"""vLLM: the API server (``vllm serve`` or ``python -m vllm.entrypoints.openai.api_server``),
``VLLM::EngineCore`` (the scheduler loop, fed over ZMQ) and ``VLLM::Worker`` /
``VLLM::Worker_TP0`` (the model; ranks), plus multiprocessing's resource tracker. Older
releases named workers ``VllmWorkerProcess``."""

from __future__ import annotations

import re

from hangscope.frameworks import Framework

#: ``<PREFIX>::Worker_TP0``, ``VLLM::EngineCore_DP0``, ``VLLM::APIServer``: the name and the
#: coordinates after it (the prefix is configurable: VLLM_PROCESS_NAME_PREFIX). Never a
#: ``.method`` after it: ``ray::Worker.train`` is a Ray actor of a class named Worker.
TITLE = re.compile(r"^(?P<prefix>[A-Za-z0-9_]+)::(?P<name>Worker|EngineCore|APIServer)"
                   r"(?P<rest>[_A-Za-z0-9]*)(?![.\w])")
#: Older releases: ``VllmWorkerProcess`` with its rank.
OLD_WORKER = re.compile(r"VllmWorker(?:Process)?[-_ ]?(?:rank=)?(\d+)")

FRAMEWORK = Framework(
    name="vllm",
    launches_ranks=True,
    # Its titles and entry points, never the bare name: a venv at /work/vllm-venv runs
    # other jobs too.
    job_words=("VLLM::", "vllm.entrypoints", "vllm serve", "vllm.v1."),
    launchers=("vllm",),
    title_prefixes=("VLLM::",),
    # The EngineCore -> Worker broadcast (and the Workers' replies): a MessageQueue in shared
    # memory whose reader spins, then polls a zmq SUB socket for the writer's notification.
    zmq_waits=("vllm/distributed/device_communicators/shm_broadcast.py",),
    # Monitors of its processes' lives (a death pipe, the workers' sentinels), the thread
    # that runs a signal's callback, and EngineCore's I/O threads between its ZMQ sockets and
    # its busy loop's queues: each waits by design; the busy loop (MainThread) says where the
    # engine is.
    helper_threads=("signal-callback", "MPClientEngineMonitor", "MultiprocWorkerMonitor",
                    "DeathPipeMonitor"),
    helper_targets=("process_input_sockets", "process_output_sockets"),
    reply_waits=(("get_response", "vllm/v1/executor/multiproc_executor.py"),),
    # The scheduler's own line on each change (Scheduler.set_pause_state): /pause and
    # pause_generation() for an RL loop's weight update, /resume to go on.
    pause_lines=(re.compile(r"setting pause state to PAUSED_\w+"),
                 re.compile(r"setting pause state to UNPAUSED")),
)
