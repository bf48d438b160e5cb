"""GPU validation: start real GPU hangs, read each with ``hangscope dump --format json``, check it.

Runs on a machine with an NVIDIA GPU, torch and Triton (the device machine; docs/gpu.md)::

    python demo/gpu/validate.py --out DIR [--only sync,triton] [--budget 330]

For each scenario of ``demo/gpu/hangs.py`` it starts a torchrun-like launcher, waits until the
rank says it is about to hang (a ready file, polled with a deadline), runs ``hangscope dump
PID --format json``, and checks the rank's category, op and context, its GPU (index,
utilisation, memory) and the GPU evidence line in the verdict. It also takes raw py-spy
captures and a /proc listing of each hung rank (new test fixtures), and kills every process it
started. Results: ``DIR/summary.json``, ``DIR/captures.tar.gz`` and a table on stdout.
Exit code 0 when every required scenario passed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HANGS = HERE / "hangs.py"
PTXAS_WRAPPER = HERE / "ptxas_wrapper.sh"
READY_ENV = "HANGSCOPE_DEMO_READY"
# Keep NVLink multicast off wherever NCCL runs (a shared host's GPUs can go out of service).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class Expect:
    """What hangscope must say about rank 0 of a scenario."""

    category: str
    op: str | None = None
    context: str | None = None
    activity: str | None = None  # "spinning" | "upstream" | "compiling": the GPU evidence line
    compiler_child: bool = False
    verdict: str | None = None  # informative: recorded, not required
    gpu: bool = True  # the rank holds a GPU (False only for the CPU self-test scenario)


@dataclass(frozen=True)
class Scenario:
    name: str
    mode: str
    expect: Expect
    description: str
    world: int = 1
    ranks: int = 1
    required: bool = True
    gpu_busy: bool = False  # runs alone: it keeps the GPU at 100%
    jit: bool = False  # needs the slow ptxas
    ready_lines: int = 1
    settle_s: float = 1.0  # after the ready line, before the dump
    ready_timeout_s: float = 90.0


SPIN = "a kernel is spinning"
UPSTREAM = "the block is upstream"
COMPILING = "compiles a kernel"
_ACTIVITY_TEXT = {"spinning": SPIN, "upstream": UPSTREAM, "compiling": COMPILING}

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("capture", "capture",
             # No capture label: the runner's frames are the demo's copy of SGLang's names,
             # and a copy outside SGLang's package is not evidence (issue 11 item 7).
             Expect("lock", activity="upstream"),
             "SGLang-shaped CudaGraphRunner.capture_one_batch_size blocked on a peer inside "
             "torch.cuda.graph()"),
    Scenario("capture_jit", "capture_jit",
             Expect("jit_compile", activity="compiling",
                    compiler_child=True),
             "the same runner compiling a Triton kernel inside capture (FlashInfer/Triton JIT "
             "during 'Capturing batches', sglang #7324)", jit=True),
    Scenario("nccl_init", "nccl_init",
             Expect("comm_init", activity="upstream", verdict="missing_rank"),
             "NCCL rendezvous, 2-rank job whose rank 1 never started: init_process_group -> "
             "TCPStore", world=2),
    Scenario("nccl_comm", "nccl_comm",
             Expect("comm_init", activity="upstream"),
             "NCCL communicator creation (init_process_group(device_id=...)), rank 1 joined "
             "the store but never creates its communicator", world=2, ranks=2, ready_lines=2,
             settle_s=4.0, required=False),
    Scenario("pynccl", "pynccl",
             Expect("comm_init", activity="upstream", verdict="missing_rank"),
             "vLLM-style PyNcclCommunicator: ncclCommInitRank for 2 ranks through ctypes, "
             "rank 1 missing", world=2, settle_s=3.0),
    Scenario("triton", "triton",
             Expect("jit_compile", activity="compiling", compiler_child=True),
             "Triton JIT compile in progress: make_cubin waits on a slow ptxas child",
             jit=True),
    Scenario("inductor", "inductor",
             Expect("jit_compile", activity="compiling"),
             "torch.compile (Inductor) compiling its Triton kernels; ptxas is slow",
             jit=True, required=False, ready_timeout_s=150.0, settle_s=2.0),
    Scenario("sync", "sync",
             Expect("cuda_sync", activity="spinning"),
             "torch.cuda.synchronize() behind a kernel that spins (libcuda spin-wait)",
             gpu_busy=True),
    Scenario("launch", "launch",
             Expect("cuda_launch", activity="spinning"),
             "a kernel launch blocked behind a spinning kernel ((x * 2).item())",
             gpu_busy=True),
    Scenario("custom_ar", "custom_ar",
             Expect("collective", op="custom_all_reduce", activity="spinning"),
             "vLLM-style custom all-reduce: its kernel spins, the next launch blocks",
             gpu_busy=True, settle_s=1.5),
)
# Runs anywhere (no GPU, no torch): checks this harness itself (tests/test_gpu.py).
SELF_TEST = Scenario("cpu_lock", "cpu_lock", Expect("lock", gpu=False),
                     "a rank blocked on a threading.Event, no GPU: the harness's self-test",
                     settle_s=0.5, ready_timeout_s=30.0)


@dataclass
class Result:
    name: str
    description: str
    required: bool
    expect: dict
    ok: bool = False
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    rank_pid: int | None = None
    launcher_pid: int | None = None
    ready_s: float | None = None
    dump_s: float | None = None
    category: str | None = None
    op: str | None = None
    context: str | None = None
    site: str | None = None
    wait_point: str | None = None
    gpu: dict | None = None
    verdict_kind: str | None = None
    verdict_summary: str | None = None
    gpu_evidence: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    roles: dict[str, int] = field(default_factory=dict)
    error: str | None = None


# --- processes --------------------------------------------------------------------------------


class Running:
    """One started scenario: its launcher, ready file and log."""

    def __init__(self, scenario: Scenario, work: Path, env: dict[str, str], port: int) -> None:
        self.scenario = scenario
        self.dir = work / scenario.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ready_file = self.dir / "ready"
        self.ready_file.write_text("")
        self.log_path = self.dir / "log.txt"
        child_env = dict(env)
        child_env.update({
            READY_ENV: str(self.ready_file),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TRITON_CACHE_DIR": str(self.dir / "triton-cache"),
            "TORCHINDUCTOR_CACHE_DIR": str(self.dir / "inductor-cache"),
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
            "TMPDIR": str(self.dir),
            "PYTHONUNBUFFERED": "1",
        })
        if not scenario.jit:
            child_env.pop("TRITON_PTXAS_PATH", None)
        argv = [sys.executable, str(HANGS), "launch", scenario.mode,
                "--world", str(scenario.world), "--ranks", str(scenario.ranks)]
        self.log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, env=child_env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=str(self.dir))
        self.ready_at: float | None = None

    def ready_pids(self) -> list[tuple[int, str]]:
        out = []
        for line in self.ready_file.read_text().splitlines():
            pid, _, what = line.partition(" ")
            if pid.isdigit():
                out.append((int(pid), what))
        return out

    def is_ready(self) -> bool:
        if self.ready_at is None and len(self.ready_pids()) >= self.scenario.ready_lines:
            self.ready_at = time.monotonic()
        return self.ready_at is not None

    def rank0_pid(self) -> int | None:
        """The rank-0 process: the launcher's child whose environment says RANK=0."""
        for pid in _children(self.proc.pid):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"RANK=0" in env:
                return pid
        return None

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Kill the launcher's process group and every descendant (even one that left it)."""
        pids = [self.proc.pid, *_descendants(self.proc.pid)]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        self.log.close()


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_ready(running: list[Running], deadline_s: float) -> None:
    """Poll every ready file until each scenario is ready, exited, or past its deadline."""
    while True:
        now = time.monotonic()
        pending = [r for r in running if not r.is_ready() and r.proc.poll() is None
                   and now - r.started < min(r.scenario.ready_timeout_s, deadline_s)]
        if not pending:
            return
        time.sleep(0.1)


# --- evidence ---------------------------------------------------------------------------------


def hangscope_dump(pid: int, out: Path, env: dict[str, str], *extra: str) -> tuple[float, str]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hangscope", "dump", str(pid), "--format",
                           "json", "-o", str(out), *extra], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    return time.monotonic() - start, (done.stderr or "")[-2000:]


def pyspy_capture(pyspy: str, pid: int, out: Path, native: bool) -> None:
    argv = [pyspy, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        out.write_text(done.stdout if done.returncode == 0 else
                       json.dumps({"error": done.stderr[-2000:]}))
    except subprocess.TimeoutExpired:
        out.write_text(json.dumps({"error": "py-spy timed out"}))


def proc_listing(pid: int) -> str:
    """Per thread: tid comm state wchan; then status lines, fd target counts, kernel stack."""
    lines = []
    base = Path(f"/proc/{pid}")
    for task in sorted(base.glob("task/*"), key=lambda p: int(p.name)):
        try:
            comm = (task / "comm").read_text().strip().replace(" ", "_")
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = (task / "wchan").read_text().strip() or "0"
        except OSError:
            continue
        lines.append(f"{task.name} {comm} {state} {wchan}")
    try:
        for line in (base / "status").read_text().splitlines():
            if line.startswith(("State:", "VmSize:", "VmRSS:", "Threads:")):
                lines.append(line)
    except OSError:
        pass
    targets: Counter[str] = Counter()
    for fd in base.glob("fd/*"):
        try:
            targets[re.sub(r"\d+", "N", os.readlink(fd))] += 1
        except OSError:
            continue
    lines += [f"{n:7d} {t}" for t, n in targets.most_common()]
    with contextlib.suppress(OSError):
        lines += ["stack:", *(base / "stack").read_text().splitlines()]
    return "\n".join(lines) + "\n"


def check(result: Result, snap: dict, scenario: Scenario) -> None:
    """Compare the dump of one scenario with what it must say."""
    exp = scenario.expect
    procs = snap.get("processes", [])
    result.roles = dict(Counter(p.get("role") for p in procs))
    rank = next((p for p in procs if p.get("pid") == result.rank_pid), None)
    checks = result.checks

    def ok(name: str, passed: bool, detail: object = "") -> None:
        checks.append((name, bool(passed), str(detail)))

    ok("rank found", rank is not None, result.rank_pid)
    if rank is None:
        return
    ok("role rank", rank.get("role") == "rank", rank.get("role"))
    working = next((t for t in rank.get("threads", []) if t.get("tid") == rank.get("working_tid")),
                   None)
    if working is not None:
        result.category, result.op = working.get("category"), working.get("op")
        result.context, result.site = working.get("context"), working.get("site")
    ok("category", result.category == exp.category, f"{result.category} (want {exp.category})")
    ok("op", result.op == exp.op, f"{result.op} (want {exp.op})")
    ok("context", result.context == exp.context, f"{result.context} (want {exp.context})")
    gpus = {g["index"]: g for h in snap.get("hosts", []) for g in h.get("gpus", [])}
    uses = rank.get("gpus", [])
    if exp.gpu:
        ok("rank holds a GPU", bool(uses), uses)
    if uses:
        use = uses[0]
        gpu = gpus.get(use["gpu_index"], {})
        result.gpu = {"index": use["gpu_index"], "source": use.get("source"),
                      "used_memory": use.get("used_memory"), "name": gpu.get("name"),
                      "utilization": gpu.get("utilization"),
                      "utilization_samples": gpu.get("utilization_samples"),
                      "memory_used": gpu.get("memory_used"),
                      "memory_total": gpu.get("memory_total")}
        ok("GPU utilisation read", gpu.get("utilization") is not None, gpu.get("utilization"))
        ok("GPU memory read", bool(gpu.get("memory_total")) and use.get("used_memory") is not None,
           f"{use.get('used_memory')} of {gpu.get('memory_used')}/{gpu.get('memory_total')}")
    verdict = snap.get("verdict") or {}
    result.verdict_kind, result.verdict_summary = verdict.get("kind"), verdict.get("summary")
    prefix = f"(PID {result.rank_pid}): GPU "
    result.gpu_evidence = [e for e in verdict.get("evidence", []) if prefix in e]
    if exp.gpu:
        ok("GPU evidence line", bool(result.gpu_evidence), len(result.gpu_evidence))
    if exp.activity:
        want = _ACTIVITY_TEXT[exp.activity]
        ok(f"GPU evidence says '{want}'", any(want in e for e in result.gpu_evidence),
           result.gpu_evidence[:1])
    result.findings = [f"{f['id']}: {f['message']}" for f in snap.get("findings", [])]
    if exp.compiler_child:
        kids = [p for p in procs if p.get("role") == "compiler"]
        ok("compiler child shown (role compiler)", bool(kids),
           [" ".join(p.get("cmdline", [])[:1]) + f" PID {p['pid']}" for p in kids])
    if exp.verdict:
        checks.append(("verdict (informative)", True,
                       f"{result.verdict_kind} (expected {exp.verdict})"))
    for t in rank.get("threads", []):
        if t.get("tid") == rank.get("working_tid"):
            frames = t.get("frames", [])
            native = [f["name"] for f in frames if f.get("native")][:40]
            api = [n for n in native if re.match(r"^(cuda|cu|p?nccl)[A-Z]", n)
                   or "TCPStore" in n or "NCCLComm" in n]
            result.wait_point = api[-1] if api else None


def run_one(running: Running, out: Path, dump_env: dict[str, str], pyspy: str | None) -> Result:
    sc = running.scenario
    result = Result(sc.name, sc.description, sc.required, asdict(sc.expect),
                    launcher_pid=running.proc.pid)
    case = out / sc.name
    case.mkdir(parents=True, exist_ok=True)
    if running.ready_at is None:
        result.error = ("not ready: " + ("exited" if running.proc.poll() is not None
                                         else "timed out") + "\n" + running.log_tail())
    else:
        result.ready_s = round(running.ready_at - running.started, 2)
    time.sleep(sc.settle_s)
    result.rank_pid = running.rank0_pid()
    if result.rank_pid is None:
        result.error = (result.error or "") + "\nno rank-0 process"
        result.checks.append(("rank found", False, "no rank-0 process"))
        (case / "log.txt").write_text(running.log_tail(20000))
        return result
    seconds, stderr = hangscope_dump(running.proc.pid, case / "dump.json", dump_env)
    result.dump_s = round(seconds, 2)
    try:
        snap = json.loads((case / "dump.json").read_text())
    except (OSError, ValueError) as exc:
        result.error = (result.error or "") + f"\nno dump: {exc}: {stderr}"
        result.checks.append(("dump", False, stderr[-300:]))
        (case / "log.txt").write_text(running.log_tail(20000))
        return result
    check(result, snap, sc)
    if pyspy is not None:
        pyspy_capture(pyspy, result.rank_pid, case / "native.json", native=True)
        pyspy_capture(pyspy, result.rank_pid, case / "py.json", native=False)
    (case / "proc.txt").write_text(proc_listing(result.rank_pid))
    for pid in _descendants(result.rank_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        with open(case / "children.txt", "a") as f:
            f.write(f"{pid} {cmd[:300]}\n")
    (case / "log.txt").write_text(running.log_tail(20000))
    result.ok = all(passed for _, passed, _ in result.checks) and result.error is None
    return result


# --- the run ------------------------------------------------------------------------------------


def versions(pyspy: str | None) -> dict[str, object]:
    info: dict[str, object] = {"python": platform.python_version(), "kernel": platform.release(),
                               "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                             time.gmtime())}
    code = ("import json, torch, triton\n"
            "v = {'torch': torch.__version__, 'cuda': torch.version.cuda,"
            " 'triton': triton.__version__,"
            " 'nccl': '.'.join(map(str, torch.cuda.nccl.version())),"
            " 'gpu': torch.cuda.get_device_name(0), 'gpus': torch.cuda.device_count()}\n"
            "print(json.dumps(v))")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, check=False)
        info.update(json.loads(done.stdout.strip().splitlines()[-1]))
    except Exception as exc:  # a version is a nicety; the run goes on without it
        info["torch_error"] = repr(exc)
    try:
        import pynvml

        pynvml.nvmlInit()
        info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        pynvml.nvmlShutdown()
    except Exception as exc:
        info["driver_error"] = repr(exc)
    if pyspy:
        done = subprocess.run([pyspy, "--version"], capture_output=True, text=True, check=False)
        info["py-spy"] = done.stdout.strip()
    sys.path.insert(0, str(REPO))
    import hangscope

    info["hangscope"] = hangscope.__version__
    return info


def real_ptxas() -> str | None:
    """The ptxas Triton uses, before TRITON_PTXAS_PATH points it at the wrapper."""
    try:
        from triton import knobs

        path = knobs.nvidia.ptxas.path
        if path and os.path.exists(path):
            return path
    except Exception:
        pass
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
        if bundled.exists():
            return str(bundled)
    except Exception:
        pass
    return shutil.which("ptxas") or (
        "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)


def find_pyspy() -> str | None:
    return os.environ.get("HANGSCOPE_PYSPY") or shutil.which("py-spy") or (
        str(Path(sys.executable).parent / "py-spy")
        if (Path(sys.executable).parent / "py-spy").exists() else None)


def table(results: list[Result]) -> str:
    rows = [("scenario", "ok", "category", "op", "context", "GPU", "util", "mem", "verdict")]
    for r in results:
        gpu = r.gpu or {}
        util = gpu.get("utilization")
        mem = gpu.get("used_memory")
        rows.append((r.name + ("" if r.required else "*"), "PASS" if r.ok else "FAIL",
                     str(r.category), str(r.op or "-"), str(r.context or "-"),
                     str(gpu.get("index", "-")), f"{util:.0f}%" if util is not None else "-",
                     f"{mem / (1 << 20):.0f} MiB" if mem is not None else "-",
                     str(r.verdict_kind)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                     for row in rows)


def _keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """cases/NAME/FILE only: no caches, FIFOs, ready files or compiler temp trees."""
    depth = info.name.count("/")
    if info.isdir():
        return info if depth <= 1 else None
    if not info.isfile() or depth != 2 or info.name.endswith("/ready"):
        return None
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--budget", type=float, default=330.0,
                        help="seconds; optional scenarios are skipped once it is spent")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [s for s in (*SCENARIOS, SELF_TEST)
              if ((s.name in args.only.split(",")) if args.only else s in SCENARIOS)]
    pyspy = find_pyspy()
    work = Path(tempfile.mkdtemp(prefix="hangscope-gpu-"))
    cases = work / "cases"
    env = dict(os.environ, **SAFE_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if pyspy:
        env["HANGSCOPE_PYSPY"] = pyspy
    if any(s.jit for s in wanted):
        real = real_ptxas()
        wrapper = work / "ptxas"
        shutil.copy(PTXAS_WRAPPER, wrapper)
        wrapper.chmod(0o755)
        if real:
            env.update(TRITON_PTXAS_PATH=str(wrapper), HANGSCOPE_REAL_PTXAS=real)
        print(f"real ptxas: {real}", flush=True)
    info: dict[str, object] = {}
    versions_thread = threading.Thread(target=lambda: info.update(versions(pyspy)), daemon=True)
    versions_thread.start()  # imports torch in a child: overlaps with the scenarios' start
    results: list[Result] = []
    port = 29600

    def over_budget() -> bool:
        return time.monotonic() - t0 > args.budget

    # Phase 1: the scenarios that leave the GPU idle run side by side (they do not disturb one
    # another's utilisation). Phase 2: each GPU-busy scenario alone, so its 100% is its own.
    quiet = [s for s in wanted if not s.gpu_busy]
    busy = [s for s in wanted if s.gpu_busy]
    running: list[Running] = []
    try:
        for sc in quiet:
            port += 1
            running.append(Running(sc, cases, env, port))
        wait_ready(running, deadline_s=max(30.0, args.budget - (time.monotonic() - t0) - 120))
        for r in running:
            res = run_one(r, cases, env, pyspy)
            results.append(res)
            print(f"{res.name}: {'PASS' if res.ok else 'FAIL'} {res.category} {res.op} "
                  f"{res.context} ready {res.ready_s}s dump {res.dump_s}s", flush=True)
    finally:
        for r in running:
            r.stop()
    for sc in busy:
        if over_budget() and not sc.required:
            results.append(Result(sc.name, sc.description, sc.required, asdict(sc.expect),
                                  error="skipped: over budget"))
            continue
        port += 1
        r = Running(sc, cases, env, port)
        try:
            wait_ready([r], deadline_s=sc.ready_timeout_s)
            res = run_one(r, cases, env, pyspy)
        finally:
            r.stop()
        results.append(res)
        print(f"{res.name}: {'PASS' if res.ok else 'FAIL'} {res.category} {res.op} "
              f"{res.context} ready {res.ready_s}s dump {res.dump_s}s", flush=True)
        time.sleep(1.0)  # the killed context's kernel is gone before the next one starts
    versions_thread.join(timeout=120)
    print(json.dumps(info), flush=True)
    order = {s.name: i for i, s in enumerate(SCENARIOS)}
    results.sort(key=lambda r: order.get(r.name, 99))
    summary = {"versions": info, "seconds": round(time.monotonic() - t0, 1),
               "passed": all(r.ok for r in results if r.required),
               "results": [asdict(r) for r in results]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    with tarfile.open(args.out / "captures.tar.gz", "w:gz") as tar:
        tar.add(cases, arcname="cases", filter=_keep)
    print(table(results))
    for r in results:
        for name, passed, detail in r.checks:
            if not passed:
                print(f"  {r.name}: FAILED {name}: {detail}")
        if r.error:
            print(f"  {r.name}: error: {r.error[-1500:]}")
    print(f"validation {'PASSED' if summary['passed'] else 'FAILED'} in {summary['seconds']} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
