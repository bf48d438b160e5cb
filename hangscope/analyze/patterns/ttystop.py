"""A program blocked writing its terminal while the terminal's other end waits to read: the
terminal's output is stopped.

A pty's line discipline stops output when it receives the STOP character (XOFF, ^S, 0x13)
with IXON on (the default), and starts it again only on START (XON, ^Q, 0x11). A supervisor
that "pauses" its children's consoles by writing ^S into each master, or a feed of raw data
that happens to hold a 0x13, leaves every writer blocked in ``write()`` on its pty slave
(``n_tty_write``, wchan ``wait_woken``) while the process holding the master waits to read
bytes that never come. Neither side's buffer is full; the kernel holds the output back.

The kernel facts (analyze/graph/waitgraph.py): the writer's fd is ``/dev/pts/N``; the master's
fdinfo says ``tty-index: N``; a thread of its holder is blocked reading (or polling) it.
"""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph, hops_into, site_words, waits_into
from hangscope.model.waits import OUTPUT_STOPPED, WaitPattern
from hangscope.words import who


def tty_stopped(g: Graph) -> WaitPattern | None:
    stopped = [i for i, e in enumerate(g.edges)
               if e.kind == "terminal" and e.object.endswith(OUTPUT_STOPPED) and e.to_pid]
    if not stopped:
        return None
    first = g.edges[stopped[0]]
    master = g.procs.get(first.to_pid or 0)
    if master is None:
        return None
    writers = list(dict.fromkeys(g.edges[i].pid for i in stopped))
    procs = [g.procs[p] for p in writers if p in g.procs]
    thread = g.threads.get((first.pid, first.tid))
    terminals = sorted({g.edges[i].object.removesuffix(f" {OUTPUT_STOPPED}").removeprefix(
        "the terminal ") for i in stopped})
    names = ", ".join(who(p) for p in procs[:4]) + (
        f" and {len(procs) - 4} more" if len(procs) > 4 else "")
    many = len(procs) > 1
    chain = (f"{names} {'are' if many else 'is'} blocked writing to "
             f"{'their terminals' if many else 'its terminal'} {', '.join(terminals[:4])}"
             f"{site_words(thread) if not many else ''}, whose master {who(master)} holds and "
             "waits to read: nothing arrives and no buffer is full, so the terminal's output is "
             "stopped by flow control. With IXON on (the default), a STOP character (XOFF, ^S, "
             "0x13) written into the master stops the output until a START (XON, ^Q, 0x11) "
             f"follows: {who(master)} (or the data it feeds in) sent ^S and never ^Q. Write ^Q "
             "into the master (always, in a finally), or turn flow control off on the pty "
             "(stty -ixon, tty.setraw())")
    others, into = waits_into(g, master.pid)
    into = [i for i in into if i not in stopped][:3]
    chain += hops_into(g, into)
    members = tuple(dict.fromkeys([master.pid, *writers, *others]))
    return WaitPattern("tty_stopped", members, chain, (*stopped[:4], *into), master.pid)
