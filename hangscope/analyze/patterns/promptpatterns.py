"""The wait-for graph's prompts: a read of a terminal, a FIFO or a pipe nobody writes under
``input()``, pdb or cmd, or a Python child reading its stdin pipe whose writers wait for it
(read in analyze/patterns/waitpatterns.py's order; its cycles skip a prompt's parent holding its
stdin).
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import at_loop_head
from hangscope.analyze.graph.waitwalk import Graph, hop, site_words, thread_words
from hangscope.model import Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_FILTERS = ("--local-ranks-filter", "--local_ranks_filter", "--tee", "--redirects")


def prompt_edge(g: Graph, i: int) -> bool:
    """Edge ``i`` is a prompt's read: input(), pdb or cmd reading a terminal, or a FIFO or pipe
    nobody writes; or a Python program reading its stdin (a terminal, a FIFO, or a pipe whose
    writers wait for that very program: the parent of ``Popen(stdin=PIPE)`` that never writes
    it and waits for the child's output or exit)."""
    edge = g.edges[i]
    thread = g.threads.get((edge.pid, edge.tid))
    if thread is None or edge.kind not in ("terminal", "fifo", "pipe") or (
            edge.kind != "terminal" and "(write end)" not in edge.object):
        return False
    proc = g.procs[edge.pid]
    prompt = any(f.name.rsplit(".", 1)[-1] in ("builtin_input", "cmdloop", "interaction")
                 or (f.file or "").endswith(("/pdb.py", "/cmd.py")) for f in thread.frames)
    if edge.kind == "fifo" and prompt:
        # A FIFO standing in for a terminal: whoever holds its write end could answer, but a
        # prompt waits for a person, not for them (they may well wait for the prompt's side).
        return True
    if edge.kind != "terminal" and edge.to_pid is not None:
        # A filter such as `cut`, or a pipeline stage, reads its stdin from a writer that works
        # or waits elsewhere: no prompt. Only writers waiting on the reader itself never write.
        # A worker reading its next request at the head of its loop (``for line in
        # sys.stdin:``) asks nothing: it waits for work. Nor does a thread beside the working
        # one that no thread of its own waits on: it watches for its stdin's end, its
        # parent's death (Ray's agents read the raylet's pipe so in a pool thread,
        # process_watcher._check_parent_via_pipe).
        return bool(proc.python) and edge.fd == 0 and bool(_stdin_writers(g, i)) and not (
            at_loop_head(thread)) and (proc.working_tid in (None, thread.tid) or any(
                e.pid == proc.pid and e.to_tid == thread.tid for e in g.edges))
    # A Python prompt (input(), pdb, cmd), or a Python program reading its stdin from a
    # terminal or a FIFO; a filter such as `cut` reading its stdin pipe is no prompt.
    return prompt or (edge.fd == 0 and edge.kind in ("terminal", "fifo") and bool(proc.python))


def _stdin_writers(g: Graph, i: int) -> list[tuple[int, int]]:
    """(writer PID, the edge it waits on) for every holder of the write end of edge ``i``'s
    pipe, when each waits on the reader (reads its output, waits for it to exit); [] else.

    Any thread of the writer counts, its working thread first: a parent that runs its children
    from a thread pool waits on a future in its main thread, while the pool's threads read the
    children's output or wait for them to exit."""
    edge = g.edges[i]
    writers = [e.to_pid for e in g.edges if (e.pid, e.tid, e.object) == (edge.pid, edge.tid,
               edge.object) and e.to_pid is not None and e.to_pid != edge.pid]
    found = []
    for pid in dict.fromkeys(writers):
        proc = g.procs.get(pid)
        tids = [None, *(t.tid for t in proc.threads)] if proc is not None else [None]
        out = [k for tid in tids for k in g.live_edges(pid, tid)]
        back = next((k for k in out if g.edges[k].to_pid == edge.pid
                     and g.edges[k].kind in ("pipe", "child")), None)
        if back is None:
            return []
        found.append((pid, back))
    return found


def _able_to_answer(g: Graph, i: int) -> list[int]:
    """The processes holding the write end of edge ``i``'s FIFO: able to answer the prompt,
    not what it waits for."""
    edge = g.edges[i]
    return list(dict.fromkeys(e.to_pid for e in g.edges if (e.pid, e.tid, e.object) == (
        edge.pid, edge.tid, edge.object) and e.to_pid is not None and e.to_pid != edge.pid))


def _same_prompts(g: Graph, i: int, writers: list[tuple[int, int]]) -> list[int]:
    """The other processes' stdin reads held the way edge ``i``'s is: the same writers, each
    waiting on its reader (a parent's pool running several such children at once)."""
    if not writers:
        return []
    edge, pids = g.edges[i], {pid for pid, _ in writers}
    found: dict[int, int] = {}
    for j, other in enumerate(g.edges):
        if (other.pid != edge.pid and other.pid not in found and other.kind == "pipe"
                and other.fd == 0 and prompt_edge(g, j)
                and {pid for pid, _ in _stdin_writers(g, j)} == pids):
            found[other.pid] = j
    return list(found.values())


def prompt(g: Graph) -> WaitPattern | None:
    for i, edge in enumerate(g.edges):
        if not prompt_edge(g, i):
            continue
        thread = g.threads.get((edge.pid, edge.tid))
        proc = g.procs[edge.pid]
        writers = _stdin_writers(g, i) if edge.kind == "pipe" else []
        what = edge.object.split(" (")[0]
        if edge.fd == 0 and edge.kind == "pipe":
            what = f"its stdin ({what})"
        chain = (f"{thread_words(proc, thread)} waits for input on {what}"
                 f"{site_words(thread)} ({'a pdb prompt' if _pdb(thread) else 'a prompt'}), "
                 "which nobody answers")
        same = _same_prompts(g, i, writers)
        if same:
            chain += (", and so " + ("does " if len(same) == 1 else "do ")
                      + " and ".join(who(g.procs[g.edges[j].pid]) for j in same)
                      + " on " + ("its" if len(same) == 1 else "theirs"))
        able = _able_to_answer(g, i) if edge.kind == "fifo" else []
        if able:
            chain += (f": {' and '.join(who(g.procs[pid]) for pid in able)} "
                      f"hold{'s' if len(able) == 1 else ''} its write end and could answer, "
                      "but none writes")
        if writers:
            held = "; ".join(hop(g, back) for _, back in writers)
            names = " and ".join(who(g.procs[pid]) for pid, _ in writers)
            chain += (f": only {names} holds its write end, and never writes it nor closes "
                      f"it: {held}; "
                      "start the child with stdin=subprocess.DEVNULL, or answer the prompt "
                      "(a --yes/--force flag)")
        ancestor = g.procs.get(proc.ppid or 0)
        while ancestor is not None:
            argv = ancestor.cmdline
            flags = [" ".join(argv[k:k + 2]) if "=" not in a and k + 1 < len(argv)
                     and not argv[k + 1].startswith("-") else a
                     for k, a in enumerate(argv) if a.split("=", 1)[0] in _FILTERS]
            if flags:
                chain += (f": its launcher {who(ancestor)} runs with {' '.join(flags)}, so "
                          "its output, the prompt included, is not shown")
                break
            ancestor = g.procs.get(ancestor.ppid or 0)
        also = tuple(dict.fromkeys(g.edges[j].pid for j in same))
        ring = {proc.pid, *also, *(pid for pid, _ in writers)}
        before = _chain_to(g, ring)
        if before:
            chain = "; ".join(hop(g, k) for k in before) + "; " + chain
        members = tuple(dict.fromkeys([proc.pid, *also, *(pid for pid, _ in writers),
                                       *(g.edges[k].pid for k in before)]))
        edges = (*before, i, *same, *(back for _, back in writers))
        return WaitPattern("prompt", members, chain, edges, proc.pid, thread.tid if thread
                           else None, also=also)
    return None


def _chain_to(g: Graph, ring: set[int]) -> list[int]:
    """The longest chain of waits from a process outside ``ring`` that reaches it (rank 1
    waiting on the store key that rank 0 sets after its child answers), up to ``ring``."""
    best: list[int] = []
    for pid in g.out:
        if pid in ring:
            continue
        path, _ = g.walk(pid, None)
        cut = next((n for n, k in enumerate(path) if g.edges[k].to_pid in ring), None)
        if cut is None or any(g.edges[k].pid in ring for k in path[:cut + 1]):
            continue
        # A chain of child waits only says who started whom: it must hold a wait that says
        # why (the store, a socket, a pipe).
        if cut + 1 > len(best) and any(g.edges[k].kind not in ("child", "thread")
                                       for k in path[:cut + 1]):
            best = path[:cut + 1]
    return best


def _pdb(thread: Thread) -> bool:
    return any((f.file or "").endswith("/pdb.py") for f in thread.frames)
