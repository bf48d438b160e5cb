"""DDP's backward and Lightning's launcher, on real captures and real command lines.

GIVEN a DDP rank's main thread captured (py-spy --native) waiting in the reducer at the end of
backward, THEN it waits in all_reduce at the user's ``loss.backward()`` line. GIVEN the
process tree of ``python script.py`` with Lightning's own launcher (rank 1 its child, the same
script, LOCAL_RANK=1), THEN the script's process is rank 0, not a launcher.
"""

from __future__ import annotations

from support import FIXTURES

from hangscope.analyze.evidence.classify import classify_thread
from hangscope.analyze.evidence.roles import refine_roles, role_and_rank
from hangscope.collect.pyspy import parse_dump
from hangscope.frameworks import does_work
from hangscope.model import Category, Process, Role, Thread

CAPTURE = FIXTURES / "frameworks" / "ddp_backward.native.json"


def test_a_thread_waiting_in_ddps_reducer_waits_in_all_reduce_at_the_users_backward() -> None:
    dump = parse_dump(1, CAPTURE.read_text(), native=True)
    captured = next(t for t in dump.threads if t.name == "MainThread")
    main = classify_thread(Thread(tid=captured.tid, name=captured.name, frames=captured.frames,
                                  state="S", wchan="futex_do_wait", python=True))
    assert (main.category, main.op) == (Category.COLLECTIVE, "all_reduce")
    assert main.site is not None and main.site.startswith("ddp (ddp_jobs.py:")


def _proc(pid: int, ppid: int, cmdline: tuple[str, ...], env: dict[str, str],
          children: tuple[int, ...] = ()) -> Process:
    role, rank = role_and_rank(cmdline, env, pid == 10, bool(children))
    return Process(pid=pid, ppid=ppid, role=role, rank=rank, cmdline=cmdline, environ=env,
                   children=children, python=True)


def test_the_script_that_reran_itself_as_its_rank_children_is_rank_0() -> None:
    script = ("python", "train.py", "--epochs", "3")
    child_env = {"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2",
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    procs = [_proc(10, 1, script, {}, (11,)),
             _proc(11, 10, ("/venv/bin/python", "/home/u/train.py", "--epochs", "3"),
                   child_env)]
    assert procs[0].role is Role.LAUNCHER  # what the tree alone says
    rank0, rank1 = refine_roles(procs)
    assert rank0.role is Role.RANK and rank0.rank is not None
    assert (rank0.rank.global_rank, rank0.rank.local_rank, rank0.rank.world_size) == (0, 0, 2)
    assert rank1.rank is not None and rank1.rank.global_rank == 1


def test_the_script_whose_live_environment_says_local_rank_0_is_still_rank_0() -> None:
    """Lightning sets LOCAL_RANK=0 (and WORLD_SIZE, NODE_RANK) in the script's own
    os.environ, which hangscope reads live where the start environment names no rank: the
    script reads as a rank without a global rank, and its child, which carries no RANK either,
    is still rank 1, not a helper of it."""
    script = ("python", "train.py")
    live = {"LOCAL_RANK": "0", "NODE_RANK": "0", "WORLD_SIZE": "2"}
    procs = [_proc(10, 1, script, live, (11,)),
             _proc(11, 10, ("/venv/bin/python", "/home/u/train.py"), {**live, "LOCAL_RANK": "1"})]
    rank0, rank1 = refine_roles(procs)
    assert rank0.role is Role.RANK and rank0.rank is not None and rank0.rank.global_rank == 0
    assert rank1.role is Role.RANK and rank1.rank is not None and rank1.rank.global_rank == 1


def test_a_launcher_whose_children_run_another_program_stays_a_launcher() -> None:
    procs = [_proc(10, 1, ("python", "launch.py"), {}, (11,)),
             _proc(11, 10, ("python", "train.py"), {"LOCAL_RANK": "1", "WORLD_SIZE": "2"})]
    assert refine_roles(procs)[0].role is Role.LAUNCHER


def test_rays_agents_retitled_as_ray_processes_are_helpers_and_its_actors_are_not() -> None:
    """Ray's dashboard and runtime-env agents set their titles (``ray::DashboardAgent``,
    ``ray::RuntimeEnvAgent``, ray/_private/ray_constants.py), which read like an actor's
    ``ray::Actor.method``: by the title they are its system processes all the same."""
    for title in ("ray::DashboardAgent", "ray::RuntimeEnvAgent"):
        assert role_and_rank((title,), {}, False, False)[0] is Role.HELPER, title
    assert role_and_rank(("ray::Trainer.train",), {}, False, False)[0] is not Role.HELPER


def test_ray_datas_stats_actor_is_a_helper() -> None:
    """Ray Data's executor calls its stats actor with metrics on each turn of its loop: a few
    samples of work in the window read "progressing" while the pipeline stood behind a dead
    map actor (the dead-actor test, 2 runs in 6 under load). Bookkeeping, never the work."""
    assert role_and_rank(("ray::_StatsActor",), {}, False, False)[0] is Role.HELPER
    assert role_and_rank(("ray::MapWorker(MapBatches(Embedder))",), {}, False, False)[0] \
        is not Role.HELPER


def test_a_ray_worker_not_yet_retitled_is_a_worker_not_the_raylet() -> None:
    """A worker the raylet started, until ``connect`` retitles it ``ray::IDLE``: its options
    name the raylet's socket (``--raylet-name``). It read as the raylet, a helper never
    watched: a Ray Data pool whose next map actor imported in its start-up read "hung" (CI,
    2026-12-07). A program's name is never an option's value."""
    worker = (
        "/venv/bin/python", "/venv/lib/python3.11/site-packages/ray/_private/workers/"
        "default_worker.py", "--node-ip-address=192.0.2.2", "--node-manager-port=38871",
        "--object-store-name=/tmp/ray/session_1/sockets/plasma_store",
        "--raylet-name=/tmp/ray/session_1/sockets/raylet", "--gcs-address=192.0.2.2:42397")
    assert role_and_rank(worker, {}, False, False)[0] is Role.OTHER
    assert does_work(" ".join(worker))
    raylet = ("/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet",
              "--raylet_socket_name=/tmp/ray/session_1/sockets/raylet")
    assert role_and_rank(raylet, {}, False, False)[0] is Role.HELPER
    assert not does_work(" ".join(raylet))
    monitor = ("/venv/bin/python", "-u", "/venv/lib/python3.11/site-packages/ray/_private/"
               "log_monitor.py", "--logs-dir=/tmp/ray/session_1/logs")
    assert role_and_rank(monitor, {}, False, False)[0] is Role.HELPER


def test_a_ray_actor_of_a_class_named_like_a_vllm_process_is_no_vllm_rank() -> None:
    """Blind round 19's 04: ``ray::Worker.train`` (a Ray actor of a class named Worker) read
    as a vLLM Worker, a rank ("the rank (PID 18422)"). vLLM's titles never carry a
    ``.method``: ``<PREFIX>::Worker_TP0``, ``VLLM::EngineCore_DP0``."""
    for title in ("ray::Worker.train", "ray::EngineCore.step", "ray::Workers.run"):
        assert role_and_rank((title,), {}, False, False)[0] is not Role.RANK, title
    assert role_and_rank(("VLLM::Worker_TP1",), {}, False, False)[0] is Role.RANK
    assert role_and_rank(("VLLM::EngineCore",), {}, False, False)[0] is Role.ENGINE_CORE


def test_a_job_run_from_a_venv_named_after_an_engine_is_not_that_engine() -> None:
    """The job's kind comes from the engine's own titles and entry points, never a bare name
    in a path (a pyzmq server started from /work/vllm-venv is a python job: blind round 14)."""
    from hangscope.analyze.evidence.roles import job_kind

    venv = "/work/vllm-venv/bin/python"
    assert job_kind([(venv, "server.py")]) == "python"
    assert job_kind([("/opt/sglang-env/bin/python", "-u", "engine.py")]) == "python"
    assert job_kind([(venv, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"),
                     ("VLLM::EngineCore",)]) == "vllm"
    assert job_kind([("/usr/bin/python", "/usr/local/bin/vllm", "serve", "m")]) == "vllm"
    assert job_kind([("python", "-m", "sglang.launch_server", "--tp", "2"),
                     ("sglang::scheduler_TP0",)]) == "sglang"


def test_rays_own_processes_and_threads_never_make_the_story_of_a_ray_job() -> None:
    """A real Ray job (blind round 13's 06: two actors each ray.get on the other, the driver
    behind them), dumped: Ray's agents watch their parent through a pipe on stdin (a "prompt"
    among helpers), and the driver's ray_listen_error_messages thread waits in C++ beside its
    main thread's ray.get (a "lock-order inversion"). Neither is the job's story: no pattern
    among helpers alone, no helper suspect, no local deadlock."""
    from hangscope.analyze import analyze
    from hangscope.analyze.evidence.roles import HELPER_ROLES
    from hangscope.model.serialize import load

    snap = analyze(load(FIXTURES / "frameworks" / "ray_actor_cycle.dump.json"))
    helpers = {p.pid for p in snap.processes if p.role in HELPER_ROLES}
    assert len(helpers) >= 5  # raylet, GCS, the agents, the dashboard
    assert snap.verdict is not None
    assert not set(snap.verdict.suspects) & helpers, snap.verdict
    assert str(snap.verdict.kind) != "local_deadlock", snap.verdict.summary
    assert snap.wait_graph is not None
    assert all(not set(p.members) <= helpers for p in snap.wait_graph.patterns)
