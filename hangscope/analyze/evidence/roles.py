"""Pure rules that name a process's role, its rank coordinates and the job's expected size.

Sources, strongest first: the process title (``sglang::scheduler_TP3``, ``VLLM::Worker_TP0``),
the environment at exec time (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``), the launcher's flags
(``--tp-size``, ``--tensor-parallel-size``, ``--nproc-per-node``), and spawn order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from hangscope.frameworks import distributed_thread, helper_role, job_kind_of, title_role
from hangscope.frameworks.dataloader import WORKER_COMM, WORKER_FILE
from hangscope.frameworks.lightning import global_rank as _script_global_rank
from hangscope.frameworks.lightning import reruns_script
from hangscope.frameworks.sglang import DP_RANK_ENV
from hangscope.frameworks.sglang import SCHEDULER_TITLE as _SGLANG_SCHED
from hangscope.frameworks.torch_distributed import SOURCE as _DISTRIBUTED_SOURCE
from hangscope.frameworks.vllm import OLD_WORKER as _VLLM_OLD
from hangscope.frameworks.vllm import TITLE as _VLLM_TITLE
from hangscope.model import Process, RankInfo, Role
from hangscope.titles import title_coordinates, title_of

COMPILER_NAMES = ("ptxas", "nvcc", "cicc", "ninja", "nvlink", "fatbinary", "cc1plus", "gcc", "g++",
                  "clang", "cc1", "cc", "c++", "clang++", "as", "ld", "collect2", "lto1",
                  "lto-wrapper", "ld.lld", "ld.gold", "make", "cmake")


def _coords(rest: str) -> dict[str, int]:
    """The RankInfo axes of a title's coordinates (titles.title_coordinates reads them all:
    MOE_DP/MOE_EP are axes inside a TP group, not the replica's DP or the EP rank)."""
    return {k: v for k, v in title_coordinates(rest).items() if k in ("dp", "pp", "tp", "ep")}


def int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def role_and_rank(cmdline: Sequence[str], environ: Mapping[str, str] | None,
                  is_root: bool, has_children: bool) -> tuple[Role, RankInfo | None]:
    """Name a process's role and rank from its title and environment (spawn order is later)."""
    title = title_of(cmdline)
    env = environ or {}
    head = cmdline[0].rsplit("/", 1)[-1] if cmdline else ""
    sched = _SGLANG_SCHED.match(title)
    if sched:
        c = _coords(title)
        tp = c.get("tp", 0)
        dp = c.get("dp", int_or_none(env.get(DP_RANK_ENV)))
        return Role.RANK, RankInfo(tp=tp, pp=c.get("pp"), dp=dp, ep=c.get("ep"),
                                   global_rank=int_or_none(env.get("RANK")), source="title")
    named = title_role(title)
    if named is not None:
        return named, None
    vllm = _VLLM_TITLE.match(title)
    if vllm:
        c = _coords(title)
        name = vllm.group("name")
        if name == "Worker":
            return Role.RANK, RankInfo(tp=c.get("tp"), pp=c.get("pp"), dp=c.get("dp"),
                                       ep=c.get("ep"), global_rank=int_or_none(env.get("RANK")),
                                       source="title")
        if name == "EngineCore":
            return Role.ENGINE_CORE, (RankInfo(dp=c["dp"], source="title") if "dp" in c else None)
        return Role.OTHER, None
    old = _VLLM_OLD.search(title)
    if old:
        return Role.RANK, RankInfo(global_rank=int(old.group(1)), source="title")
    if head in COMPILER_NAMES:
        return Role.COMPILER, None
    if "compile_worker" in title or "_inductor/compile_worker" in title:
        return Role.COMPILE_WORKER, None
    helper = helper_role(title)
    if helper is not None:
        return helper, None
    rank = int_or_none(env.get("RANK")) if "RANK" in env \
        else int_or_none(env.get("OMPI_COMM_WORLD_RANK"))
    if rank is None:
        rank = int_or_none(env.get("SLURM_PROCID")) if "SLURM_PROCID" in env else None
    if rank is not None or "LOCAL_RANK" in env:
        world = int_or_none(env.get("WORLD_SIZE") or env.get("OMPI_COMM_WORLD_SIZE"))
        return Role.RANK, RankInfo(global_rank=rank, local_rank=int_or_none(env.get("LOCAL_RANK")),
                                   world_size=world, source="env")
    if is_root and has_children:
        return Role.LAUNCHER, None
    return Role.OTHER, None


# Flags that state the job's size. Each value multiplies (tp x pp x dp), per node.
_SIZE_FLAGS = {
    "--tp-size": "tp", "--tp": "tp", "--tensor-parallel-size": "tp", "-tp": "tp",
    "--tensor-model-parallel-size": "tp",
    "--pp-size": "pp", "--pp": "pp", "--pipeline-parallel-size": "pp", "-pp": "pp",
    "--pipeline-model-parallel-size": "pp",
    "--dp-size": "dp", "--dp": "dp", "--data-parallel-size": "dp", "-dp": "dp",
    "--nproc-per-node": "nproc", "--nproc_per_node": "nproc", "--num-gpus": "nproc",
    "--num_gpus": "nproc", "--nnodes": "nnodes",
}


def launcher_args(cmdline: Sequence[str]) -> dict[str, str]:
    """The flags of a launcher that matter to a diagnosis: sizes and the port."""
    wanted = set(_SIZE_FLAGS) | {"--port", "--host", "--model-path", "--model", "--master-port",
                                 "--master_port", "--standalone", "--node-rank",
                                 "--enable-dp-attention"}
    out: dict[str, str] = {}
    args = list(cmdline)
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in wanted:
            if eq:
                out[name] = value
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out[name] = args[i + 1]
            else:
                out[name] = "true"
    return out


def expected_ranks(args: Mapping[str, str], rank_envs: Sequence[Mapping[str, str]],
                   job_kind: str) -> tuple[int | None, str | None]:
    """How many ranks this node should run, and what says so."""
    sizes: dict[str, int] = {}
    said: list[str] = []
    for flag, value in args.items():
        key = _SIZE_FLAGS.get(flag)
        number = int_or_none(value)
        if key and number is not None and key not in sizes:
            sizes[key] = number
            said.append(f"{flag} {value}")
    if "nproc" in sizes:
        return sizes["nproc"], " ".join(s for s in said if "nproc" in s or "gpus" in s)
    product = 1
    found = False
    for key in ("tp", "pp"):
        if key in sizes:
            product *= sizes[key]
            found = True
    # DP replicas are separate schedulers only when the launcher runs them in-process
    # (SGLang with --dp-size); vLLM's DP engines are counted per engine.
    # With --enable-dp-attention the DP ranks partition the TP ranks: no extra schedulers.
    if "dp" in sizes and job_kind == "sglang" and "--enable-dp-attention" not in args:
        product *= sizes["dp"]
        found = True
    if found:
        nnodes = sizes.get("nnodes", 1)
        total = product // nnodes if nnodes > 1 and product % nnodes == 0 else product
        return total, " ".join(said)
    for env in rank_envs:
        local = int_or_none(env.get("LOCAL_WORLD_SIZE"))
        if local:
            return local, f"LOCAL_WORLD_SIZE={local}"
    for env in rank_envs:
        world = int_or_none(env.get("WORLD_SIZE"))
        if world:
            return world, f"WORLD_SIZE={world}"
    return None, None


def job_kind(cmdlines: Sequence[Sequence[str]]) -> str:
    """The launcher family, from every command line of the job."""
    text = "\n".join(title_of(c) for c in cmdlines)
    kind = job_kind_of(text)
    if kind is not None:
        return kind
    if "python" in text:
        return "python"
    return "unknown"


# -- helpers and the main process --------------------------------------------------------

#: Processes that serve the job's work and are never where it is stuck: grouped, not suspects.
HELPER_ROLES = frozenset({Role.COMPILE_WORKER, Role.COMPILER, Role.RESOURCE_TRACKER,
                          Role.TOKENIZER, Role.DETOKENIZER, Role.DATA_WORKER, Role.HELPER})


def is_helper_role(role: Role) -> bool:
    """Whether a role is a helper (compile worker, compiler, tracker, tokenizer, data worker)."""
    return role in HELPER_ROLES


def _data_worker(proc: Process, parent: Process | None, comm: str | None) -> bool:
    """A DataLoader worker: its comm (torch names it pt_data_worker), its stack, or a forked
    copy of a rank that carries the rank's own RANK (two processes must not be one rank)."""
    if comm == WORKER_COMM:
        return True
    if any(not f.native and f.file and WORKER_FILE in f.file
           for t in proc.threads for f in t.frames):
        return True
    return (parent is not None and parent.role is Role.RANK and proc.role is Role.RANK
            and bool(proc.cmdline) and proc.cmdline == parent.cmdline
            and proc.rank == parent.rank)


def stack_roles(procs: Sequence[Process]) -> tuple[Process, ...]:
    """A process whose own stack runs torch's DataLoader worker loop is a DataLoader worker,
    whatever discovery called it from its title (a worker that set its own with
    setproctitle in ``worker_init_fn`` has lost the ``pt_data_worker`` comm)."""
    return tuple(replace(p, role=Role.DATA_WORKER, rank=None)
                 if p.role is Role.OTHER and any(
                     not f.native and f.file and WORKER_FILE in f.file
                     and f.name == "_worker_loop" for t in p.threads for f in t.frames)
                 else p for p in procs)


def _rank_helper(proc: Process, by_pid: Mapping[int, Process],
                 out: Mapping[int, Process]) -> Process | None:
    """A process below a rank that reads as a rank only by the environment it inherited (gcc's
    cc1 keeps RANK=0): a compiler's descendant is a compiler; a non-Python descendant of a rank,
    or one that carries its ancestor rank's own RANK, is that rank's helper, not a rank."""
    if proc.role is not Role.RANK or proc.rank is None or proc.rank.source != "env":
        return None
    seen: set[int] = set()
    parent = by_pid.get(proc.ppid) if proc.ppid is not None else None
    while parent is not None and parent.pid not in seen:
        seen.add(parent.pid)
        parent = out.get(parent.pid, parent)
        if parent.role is Role.COMPILER:
            return replace(proc, role=Role.COMPILER, rank=None)
        if parent.role is Role.RANK and parent.rank is not None and (
                proc.python is False or (parent.rank.global_rank is not None
                                         and parent.rank.global_rank == proc.rank.global_rank)):
            return replace(proc, role=Role.OTHER, rank=None)
        parent = by_pid.get(parent.ppid) if parent.ppid is not None else None
    return None


def _script_ranks(procs: Sequence[Process],
                  by_pid: Mapping[int, Process]) -> dict[int, Process]:
    """A launcher that re-ran its own script as its rank children (Lightning's script
    launcher) is local rank 0 itself: it trains in its own process. Its children and it get
    their global ranks from the node's coordinates (``NODE_RANK``, ``WORLD_SIZE``)."""
    out: dict[int, Process] = {}
    for proc in procs:
        # (the script's own process may read LOCAL_RANK=0 already: Lightning sets it in
        # os.environ, which hangscope reads live where the start environment names no rank)
        if proc.role is not Role.LAUNCHER and not (
                proc.role is Role.RANK and proc.rank is not None
                and proc.rank.global_rank is None and proc.rank.local_rank in (None, 0)):
            continue
        kids = [by_pid[pid] for pid in proc.children if pid in by_pid]
        ranks = [k for k in kids if k.role is Role.RANK and k.rank is not None
                 and reruns_script(proc.cmdline, k.cmdline, k.environ)]
        if not ranks:
            continue
        per_node = len(ranks) + 1
        env = ranks[0].environ
        world = ranks[0].rank.world_size if ranks[0].rank else None
        out[proc.pid] = replace(proc, role=Role.RANK, rank=RankInfo(
            global_rank=_script_global_rank(env, 0, per_node), local_rank=0,
            world_size=world, source="env"))
        for kid in ranks:
            local = kid.rank.local_rank if kid.rank and kid.rank.local_rank is not None else 0
            out[kid.pid] = replace(kid, rank=replace(
                kid.rank, global_rank=_script_global_rank(kid.environ, local, per_node)))
    return out


def refine_roles(procs: Sequence[Process], comms: Mapping[int, str] | None = None) -> list[Process]:
    """Second pass over a job's roles, once every process is known (``ps -o pid,comm``).

    DataLoader workers become helpers; a root that was called launcher only because it has
    children, when every child is a helper (Inductor compile workers, g++/ptxas, the resource
    tracker), is the process doing the work: main.
    """
    by_pid = {p.pid: p for p in procs}
    out = _script_ranks(procs, by_pid)
    for proc in procs:
        parent = by_pid.get(proc.ppid) if proc.ppid is not None else None
        comm = (comms or {}).get(proc.pid)
        if proc.role not in HELPER_ROLES and _data_worker(proc, parent, comm):
            out[proc.pid] = replace(proc, role=Role.DATA_WORKER, rank=None)
    for proc in procs:
        # torchrun's agent started by srun carries SLURM_PROCID (its task number) and reads
        # as a rank; a process whose children are ranks with the LOCAL_RANK it lacks
        # launched them.
        if proc.role is Role.RANK and proc.rank is not None and proc.rank.local_rank is None:
            kids = [out.get(pid, by_pid[pid]) for pid in proc.children if pid in by_pid]
            # (a rank's shell child carries the environment the rank's setproctitle wiped:
            # a process that runs no Python launched no rank)
            if any(k.role is Role.RANK and k.rank is not None and k.rank.local_rank is not None
                   and k.python is not False for k in kids):
                out[proc.pid] = replace(proc, role=Role.LAUNCHER, rank=None)
    for proc in procs:
        # a node's own launcher under the job's (DeepSpeed's runner starts
        # deepspeed.launcher.launch, which starts the ranks): no rank, and its children are
        if proc.role is Role.OTHER and proc.python is not False and any(
                (k := out.get(pid, by_pid[pid])).role is Role.RANK and k.rank is not None
                and k.rank.local_rank is not None for pid in proc.children if pid in by_pid):
            out[proc.pid] = replace(proc, role=Role.LAUNCHER)
    for proc in procs:  # parents before children: a helper's own children are seen after it;
        # after the srun agent pass: the agent's SLURM_PROCID is no rank to compare with
        helper = _rank_helper(out.get(proc.pid, proc), by_pid, out)
        if helper is not None:
            out[proc.pid] = helper
    for proc in procs:
        if proc.role is not Role.LAUNCHER:
            continue
        kids = [out.get(pid, by_pid[pid]) for pid in proc.children if pid in by_pid]
        if kids and all(k.role in HELPER_ROLES for k in kids):
            out[proc.pid] = replace(proc, role=Role.MAIN)
    return [out.get(p.pid, p) for p in procs]



def in_distributed(proc: Process) -> bool:
    """Whether the sampled process takes part in torch.distributed: a frame of it on a stack,
    or a thread that only a process group starts."""
    for thread in proc.threads:
        if distributed_thread(thread.name):
            return True
        if any(f.file and _DISTRIBUTED_SOURCE in f.file for f in thread.frames):
            return True
    return False


def renumber_spawn_order(procs: Sequence[Process]) -> tuple[Process, ...]:
    """Spawn-order ranks after sampling: a sibling outside torch.distributed is no rank.

    ``mp.spawn``-style jobs set the rank in the child, not in its environment, so discovery
    numbers unnamed multiprocessing siblings by start time. A feeder or logger the launcher
    started among them would take rank 0 and shift every real rank by one. Once the stacks
    are known: where some siblings are in torch.distributed and others are not, the others
    are helpers (role other) and the ranks are numbered again among themselves; where none
    is (a ``multiprocessing.Pool``), none is a rank.
    """
    by_parent: dict[tuple[str | None, int | None], list[Process]] = {}
    for proc in procs:
        if proc.rank is not None and proc.rank.source == "spawn-order" and proc.threads:
            by_parent.setdefault((proc.host, proc.ppid), []).append(proc)
    changed: dict[tuple[str | None, int], Process] = {}  # by (host, PID)
    for siblings in by_parent.values():
        inside = [p for p in siblings if in_distributed(p)]
        if not inside and all(any(t.frames for t in p.threads) for p in siblings):
            # Plain multiprocessing or pool workers, every stack read and none in
            # torch.distributed: workers, not ranks (a rank has a rank: env, title, a group).
            changed.update({p.key: replace(p, role=Role.OTHER, rank=None) for p in siblings})
            continue
        if not inside or len(inside) == len(siblings):
            continue
        inside.sort(key=lambda p: p.rank.global_rank if p.rank and p.rank.global_rank is not None
                    else 1 << 30)
        for number, proc in enumerate(inside):
            changed[proc.key] = replace(proc, rank=replace(proc.rank, global_rank=number))
        for proc in siblings:
            if proc.key not in changed:
                changed[proc.key] = replace(proc, role=Role.OTHER, rank=None)
    if not changed:
        return tuple(procs)
    return tuple(changed.get(p.key, p) for p in procs)
