"""Ray: ``ray.init()`` starts its own system processes (the GCS server, the raylet, the
dashboard and runtime-env agents, the log monitor) beside the driver; actors and tasks run in
workers titled ``ray::Actor.method`` (``ray::IDLE`` between tasks). Its system processes are
helpers: they serve the job and are never suspects."""

from __future__ import annotations

import re

from hangscope.frameworks import Framework
from hangscope.model import Role

#: ``ray::Trainer.train``: the actor (and method) a worker runs.
TITLE = re.compile(r"^ray::(?P<actor>[A-Za-z_][\w]*)(?:\.(?P<method>[A-Za-z_]\w*))?")
#: Worker titles that run no actor.
NO_ACTOR = ("IDLE", "core_worker")

FRAMEWORK = Framework(
    name="ray",
    job_words=("ray::",),
    launchers=("ray",),
    title_prefixes=("ray::",),
    # The driver's own threads (ray/_private/worker.py): they relay the cluster's errors and
    # the workers' logs, and wait for them as they always do.
    helper_threads=("ray_listen_error_messages", "ray_print_logs"),
    helper_processes=(
        # The agents retitle themselves (ray_constants.AGENT_PROCESS_TYPE_*): by the title,
        # which reads like an actor's, they are its system processes all the same.
        ("ray::DashboardAgent", Role.HELPER),
        ("ray::RuntimeEnvAgent", Role.HELPER),
        ("raylet", Role.HELPER),
        ("gcs_server", Role.HELPER),
        ("ray/dashboard/agent.py", Role.HELPER),
        ("ray/dashboard/dashboard.py", Role.HELPER),
        ("runtime_env/agent/main.py", Role.HELPER),
        ("ray/_private/log_monitor.py", Role.HELPER),
        ("ray/_private/monitor.py", Role.HELPER),
        ("ray/autoscaler/_private/monitor.py", Role.HELPER),
    ),
)
