"""Findings about the job's processes as the kernel sees them: states, memory, kernel messages.

Zombies and their exit codes, stopped and uninterruptible processes; resident and virtual
memory against RAM and the cgroup limit, swap, paging; OOM kills, GPU Xids, segfaults and
hung tasks from ``dmesg`` since the job started. Pure checks over a Snapshot, listed in
``findings.CHECKS`` (split from analyze/findings/checks.py to keep each module readable).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from hangscope.analyze.findings.census import census_of
from hangscope.model import (
    Finding,
    Host,
    Process,
    Role,
    Severity,
    Snapshot,
)
from hangscope.model.evolve import evolve
from hangscope.words import exit_text, size, who

#: Resident memory against RAM (or the cgroup limit): warning, then critical.
MEM_WARN_FRACTION = 0.75
MEM_CRIT_FRACTION = 0.90
#: Virtual size this many times RAM is worth saying out loud (and explaining).
OVERCOMMIT_FACTOR = 2.0
#: Major page faults in the window that mean a process is paging.
MAJOR_FAULTS_PAGING = 50
#: Swap held by the job that is worth a warning.
SWAP_WARN_BYTES = 16 << 20
#: Lines of evidence shown under a finding (the JSON keeps the rest).
SHOWN_LINES = 6





# -- dead, zombie, stopped, uninterruptible ------------------------------------------

def check_process_states(snap: Snapshot) -> Iterable[Finding]:
    """Zombies, processes that exited while sampled, stopped and uninterruptible ones."""
    for proc in census_of(snap).notable:  # (a notable state, or a thread in D)
        name = who(proc)
        if proc.is_zombie:
            parent = snap.process(proc.ppid) if proc.ppid is not None else None
            how = exit_text(proc.exit_code) if proc.exit_code is not None else "has exited"
            if proc.role is Role.OTHER and parent is not None:
                name = f"PID {proc.pid}, a child of {who(parent)},"
            reaper = who(parent) if parent is not None else f"PID {proc.ppid}"
            evidence = {"pid": proc.pid, "ppid": proc.ppid, "exit_code": proc.exit_code}
            if proc.exit_code == 0 and proc.ended_while_read:
                # It was alive when a round read it: its parent reaps it when it next waits.
                yield Finding("proc.zombie", Severity.INFO,
                              f"{name} {how} during the dump and is a zombie (<defunct>) "
                              f"until {reaper} reaps it.", evidence)
                continue
            if proc.exit_code == 0 and proc.role is Role.OTHER and proc.rank is None:
                # A child that succeeded and is not a rank leaves no one waiting for it: its
                # parent is still inside a call that waits for something else (the EOF of
                # the child's output pipe, which a process it started may hold open).
                yield Finding("proc.zombie", Severity.WARNING,
                              f"{name} {how} and is a zombie (<defunct>): {reaper} has not "
                              "reaped it yet, because it is still inside a call that waits "
                              "for something else (the EOF of the child's output, which a "
                              "process the child started may keep open).", evidence)
                continue
            yield Finding("proc.zombie", Severity.CRITICAL,
                          f"{name} {how} and is a zombie (<defunct>): {reaper} has not reaped "
                          "it, so whatever waits for it (a collective, a pipe) waits forever.",
                          evidence)
        elif proc.vanished and proc.role is Role.COMPILER:
            # A JIT build runs gcc, cc1, as, ld one after another: each one leaving is normal.
            yield Finding("proc.exited", Severity.INFO,
                          f"{name} finished while hangscope was sampling it (a compiler pass "
                          "ends on its own during a build).", {"pid": proc.pid, "ppid": proc.ppid})
        elif proc.vanished:
            yield Finding("proc.exited", Severity.CRITICAL,
                          f"{name} exited while hangscope was sampling it.",
                          {"pid": proc.pid, "ppid": proc.ppid})
        elif proc.is_stopped:
            how = ("held stopped by a debugger or tracer (state t)" if proc.state == "t"
                   else "stopped (state T: SIGSTOP, Ctrl-Z or a debugger)")
            yield Finding("proc.stopped", Severity.CRITICAL,
                          f"{name} is {how}: it runs no code, and every rank that waits for it "
                          f"waits forever. `kill -CONT {proc.pid}` resumes it; hangscope "
                          "leaves it as it is.", {"pid": proc.pid, "state": proc.state})
        else:
            stuck = [t for t in proc.threads if t.state == "D"]
            if proc.state != "D" and not stuck:
                continue
            main = next((t for t in proc.threads if t.tid == proc.pid), None)
            where = sorted({t.wchan for t in stuck if t.wchan}) or (
                [main.wchan] if main is not None and main.wchan else [])
            place = f" in {', '.join(where)}" if where else ""
            count = (f"has {len(stuck)} threads" if len(stuck) > 1 else "is")
            # /proc/PID/stack is the main thread's: it only explains a main thread in D.
            kstack = list(proc.kernel_stack) if proc.state == "D" else []
            yield Finding("proc.uninterruptible", Severity.WARNING,
                          f"{name} {count} in uninterruptible sleep (state D){place}: the "
                          "kernel waits on storage, a driver or the GPU, and no signal reaches "
                          "the process until that returns.",
                          {"pid": proc.pid, "tids": [t.tid for t in stuck],
                           "wchan": where, "kernel_stack": kstack, "lines": kstack[:8]})


# -- memory ----------------------------------------------------------------------------

#: Nodes up to which each node says its memory in use; beyond, one finding says it for the
#: job (a 1,000-node job's findings were 1,000 look-alike lines; warnings stay per node).
USAGE_PER_NODE_MAX = 16


def check_memory(snap: Snapshot) -> Iterable[Finding]:
    """RSS and virtual size against RAM and the cgroup limit; swap; paging; overcommit."""
    by_host = census_of(snap).memory  # live processes with an RSS, by host
    several = len(snap.hosts) > 1  # a merged multi-node job: say which node each is about
    tally: list[tuple[Host, int, int, Process]] | None = (
        [] if len(snap.hosts) > USAGE_PER_NODE_MAX else None)
    for host in snap.hosts:
        procs = by_host.get(host.name, []) + by_host.get(None, [])
        for finding in _memory_of(snap, host, procs, tally):
            if several:
                text = finding.message
                finding = evolve(finding, {
                    "message": f"On {host.name}: {text[:1].lower()}{text[1:]}"})
            yield finding
    if tally:
        yield _job_usage(tally)


def _job_usage(tally: list[tuple[Host, int, int, Process]]) -> Finding:
    """The memory in use of a job of many nodes: (node, processes, resident, its largest)."""
    rss = sum(used for _, _, used, _ in tally)
    count = sum(n for _, n, _, _ in tally)
    host, n, most, _ = max(tally, key=lambda row: row[2])  # the first of the largest
    top_host, _, _, top = max(tally, key=lambda row: row[3].rss or 0)
    return Finding("mem.usage", Severity.INFO,
                   f"The job's {count:,} processes hold {size(rss)} resident on "
                   f"{len(tally):,} nodes; {host.name} holds the most, {size(most)} "
                   f"({n} process{'es' if n != 1 else ''}); the largest is {who(top)} on "
                   f"{top_host.name} with {size(top.rss)}.",
                   {"rss": rss, "nodes": {h.name: used for h, _, used, _ in tally}})


def _memory_of(snap: Snapshot, host: Host, procs: list[Process],
               tally: list[tuple[Host, int, int, Process]] | None = None
               ) -> Iterable[Finding]:
    """check_memory for one host's live processes that have an RSS; ``tally``: where a job
    of many nodes collects each node's memory in use instead of a finding for it."""
    if not procs:
        return
    # One pass over the host's processes (once per host: 16,384 hosts at 131,072 ranks).
    rss = vms = 0
    biggest, most = procs[0], -1
    swapped: list[Process] = []
    paging: list[Process] = []
    for p in procs:
        resident = p.rss or 0
        rss += resident
        vms += p.vms or 0
        if resident > most:  # the first of the largest, as max() picks
            biggest, most = p, resident
        if (p.swap or 0) > 0:
            swapped.append(p)
        if (p.major_faults_window or 0) >= MAJOR_FAULTS_PAGING:
            paging.append(p)
    ram = host.mem_total
    cgroup = host.cgroup_memory_limit
    limit, limit_name = ram, "RAM"
    if cgroup is not None and (ram is None or cgroup < ram):
        limit, limit_name = cgroup, "the cgroup memory limit"

    def facts() -> dict[str, object]:
        """The evidence, built only for a finding that carries it (not for every node of a
        job of many nodes)."""
        return {"rss": rss, "vms": vms, "mem_total": ram, "cgroup_limit": cgroup,
                "mem_available": host.mem_available, "processes": _sizes(procs)}

    share = ""
    if ram:
        share = f" ({100 * rss / ram:.0f}% of the {size(ram)} of RAM"
        if cgroup is not None and cgroup < ram:
            share += f", {100 * rss / cgroup:.0f}% of the {size(cgroup)} cgroup limit"
        share += ")"
    if limit and rss >= MEM_WARN_FRACTION * limit:
        crit = rss >= MEM_CRIT_FRACTION * limit
        yield Finding("mem.pressure", Severity.CRITICAL if crit else Severity.WARNING,
                      f"The job holds {size(rss)} resident, {100 * rss / limit:.0f}% of "
                      f"{limit_name} ({size(limit)}): the kernel's OOM killer "
                      f"{'is about to' if crit else 'may soon'} kill a rank.", facts())
    elif ram and host.mem_available is not None and host.mem_available < 0.05 * ram:
        yield Finding("mem.pressure", Severity.WARNING,
                      f"The machine is nearly out of memory: {size(host.mem_available)} "
                      f"of {size(ram)} available (the job itself holds {size(rss)}).",
                      facts())
    swap = sum(p.swap or 0 for p in swapped)
    if swap >= SWAP_WARN_BYTES:
        top = max(swapped, key=lambda p: p.swap or 0)
        yield Finding("mem.swap", Severity.WARNING,
                      f"{size(swap)} of the job is swapped out ({who(top)} alone has "
                      f"{size(top.swap)}): a rank that touches it crawls, and can look "
                      "hung.", {"swap": swap, "pids": {p.pid: p.swap for p in swapped}})
    elif host.swap_used and host.swap_used >= SWAP_WARN_BYTES:
        yield Finding("mem.swap", Severity.INFO,
                      f"The machine has {size(host.swap_used)} in swap, none of it the "
                      "job's.", {"swap_used": host.swap_used})
    no_swap = host.swap_total == 0
    if paging and snap.window_s > 0:
        paging.sort(key=lambda p: -(p.major_faults_window or 0))
        top = paging[0]
        yield Finding("mem.paging", Severity.WARNING,
                      f"{who(top)} took {top.major_faults_window:,} major page faults "
                      f"in the {snap.window_s:.1f} s window"
                      + (f" ({len(paging) - 1} more processes too)" if len(paging) > 1
                         else "")
                      + (": it is reading memory back from swap or disk, which makes it "
                         "crawl." if not no_swap else ": the machine has no swap, so it "
                         "re-reads mapped files (libraries, a memory-mapped dataset or "
                         "checkpoint) from disk, which makes it crawl."),
                      {"major_faults": {p.pid: p.major_faults_window for p in paging}})
    if ram and vms >= OVERCOMMIT_FACTOR * ram and tally is None:  # (CUDA's, on every node)
        top = max(procs, key=lambda p: p.vms or 0)
        alone = (f"; {who(top)} alone reserves {size(top.vms)}"
                 if (top.vms or 0) >= ram else "")
        yield Finding("mem.overcommit", Severity.INFO,
                      f"The job has reserved {size(vms)} of virtual memory, "
                      f"{vms / ram:.1f}x the {size(ram)} of RAM{alone}. That is address "
                      f"space, not use: only {size(rss)} is resident. CUDA and PyTorch "
                      "reserve large ranges, so this alone is not a problem.",
                      {**facts(), "factor": round(vms / ram, 2)})
    if tally is not None:
        tally.append((host, len(procs), rss, biggest))
        return
    yield Finding("mem.usage", Severity.INFO,
                  f"The job's {len(procs)} process{'es hold' if len(procs) != 1 else ' holds'} "
                  f"{size(rss)} resident{share}; the largest is {who(biggest)} with "
                  f"{size(biggest.rss)}.", facts())


def _sizes(procs: list[Process]) -> dict[int, dict[str, int | None]]:
    """PID -> its RSS, VMS and swap. Each distinct (RSS, VMS, swap) worded once and shared:
    the ranks of a job mostly hold the same (one dict a rank was 131,072 new objects, most of
    them equal)."""
    sizes: dict[tuple[int | None, int | None, int | None], dict[str, int | None]] = {}
    per: dict[int, dict[str, int | None]] = {}
    for p in procs:
        three = (p.rss, p.vms, p.swap)
        said = sizes.get(three)
        if said is None:
            said = sizes[three] = {"rss": three[0], "vms": three[1], "swap": three[2]}
        per[p.pid] = said
    return per


# -- kernel messages ---------------------------------------------------------------------

# NVIDIA's Xid catalogue, the ones seen in hung jobs.
XID_MEANING = {
    13: "graphics engine exception (a bad kernel: out-of-range access or illegal instruction)",
    31: "GPU memory page fault (a kernel touched an invalid address)",
    43: "the GPU stopped processing (the context was reset)",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error: the GPU's memory is corrupt",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping event",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "the GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error: the GPU needs a reset",
    109: "context switch timeout",
    119: "GSP RPC timeout: the GPU firmware stopped answering",
    120: "GSP error",
}
_FATAL_XIDS = frozenset({43, 48, 62, 74, 79, 95, 109, 119, 120})
_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)(?:, pid=([^,]+))?(?:, name=([^,]+))?,?\s*(.*)")
_OOM_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_SEGFAULT = re.compile(r"(\S+?)\[(\d+)\]: (segfault at|general protection fault)")
_HUNG = re.compile(r"task (\S+?):(\d+) blocked for more than (\d+) seconds")


def _kernel_line(line: str) -> tuple[str, str]:
    """(``HH:MM:SS`` or ``?``, message) of a stored ``ISO-TIME message`` line."""
    stamp, _, message = line.partition(" ")
    try:
        when = datetime.fromisoformat(stamp).strftime("%H:%M:%S UTC")
    except ValueError:
        return "?", line
    return when, message


def _pid_words(snap: Snapshot, pid: int, comm: str) -> str:
    proc = snap.process(pid)
    if proc is not None:
        return who(proc)
    return f"PID {pid} ({comm})"


def check_kernel_messages(snap: Snapshot) -> Iterable[Finding]:
    """OOM kills, GPU Xids, segfaults and hung tasks the kernel logged about the job."""
    for host in snap.hosts:
        oom: dict[int, tuple[str, str]] = {}
        for line in host.kernel_messages:
            when, message = _kernel_line(line)
            m = _OOM_KILLED.search(message)
            if m:
                oom[int(m.group(1))] = (when, m.group(2))
                continue
            m = _XID.search(message)
            if m:
                xid = int(m.group(2))
                pid_text = (m.group(3) or "").strip("'<> ")
                by = (f", for {_pid_words(snap, int(pid_text), m.group(4) or '?')}"
                      if pid_text.isdigit() else "")
                meaning = XID_MEANING.get(xid, m.group(5).strip() or "see NVIDIA's Xid catalogue")
                yield Finding("kernel.xid", Severity.CRITICAL if xid in _FATAL_XIDS
                              else Severity.WARNING,
                              f"The GPU driver reported Xid {xid} on {m.group(1)} at {when}"
                              f"{by}: {meaning}.", {"xid": xid, "pci": m.group(1),
                                                    "lines": [line]})
                continue
            m = _SEGFAULT.search(message)
            if m:
                fault = ("a segmentation fault" if m.group(3) == "segfault at"
                         else "a general protection fault")
                yield Finding("kernel.segfault", Severity.CRITICAL,
                              f"{_pid_words(snap, int(m.group(2)), m.group(1))} crashed with "
                              f"{fault} at {when}, says the kernel log.",
                              {"pid": int(m.group(2)), "lines": [line]})
                continue
            m = _HUNG.search(message)
            if m:
                yield Finding("kernel.hung_task", Severity.WARNING,
                              f"The kernel saw {_pid_words(snap, int(m.group(2)), m.group(1))} "
                              f"blocked in uninterruptible sleep for over {m.group(3)} s "
                              f"at {when}.", {"pid": int(m.group(2)), "lines": [line]})
        for pid, (when, comm) in oom.items():
            lines = [x for x in host.kernel_messages if str(pid) in x][:SHOWN_LINES]
            yield Finding("kernel.oom", Severity.CRITICAL,
                          f"The kernel's OOM killer killed {_pid_words(snap, pid, comm)} at "
                          f"{when}, after the job started: the machine ran out of memory, and "
                          "the ranks that wait for the killed one wait forever.",
                          {"pid": pid, "comm": comm, "lines": lines})
