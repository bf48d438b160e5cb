"""The patterns of the wait-for graph, one module per family, each with its suspect and the
chain in one sentence; ``waitpatterns`` holds the one ``PATTERNS`` table and runs it.
Imports graph/ and evidence/; ends/ and calm/ are families of their own.

Modules (what each reads, what it concludes):

barrierpatterns  The wait-for graph's short barrier: threads wait in ``threading.Barrier.wait``
                 and no other thread of their process is left that could arrive.
behind           Who waits behind a pattern of the wait-for graph: the processes whose waits
                 lead into it, and the ranks that sit in a collective for them.
calm/            Paused or idle, not hung: a job whose processes wait for nobody in the job, or
                 only for a server waiting for work (an event loop, a long poll); read before
                 any chain is called hung.
checkouts        A pool emptied by nested checkouts: every thread that holds one of a pool's
                 resources waits inside the pool's checkout for a second one.
cycleadvice      What to do about a cycle of the wait-for graph: one sentence of advice by the
                 kinds of its waits (a full pipe, a server calling back into itself, captured
                 output read in the wrong order), read by analyze/patterns/waitpatterns.py's
                 cycle.
ends/            Waits whose other end is gone, stopped, or the waiter itself: dead processes
                 and threads, stopped peers, lost signals, fork leftovers, sockets connected to
                 themselves or shared, listeners nobody accepts on, a process out of fds, a
                 reader holding its own write end.
gilpatterns      The GIL held in a blocking call: a thread that owns the GIL blocks in the
                 kernel (a ``ctypes.PyDLL`` call keeps it), and the threads that could end its
                 wait wait for the GIL.
looppatterns     The wait-for graph's blocked event loop: an asyncio loop's thread blocked in a
                 synchronous read inside one of its coroutines, so no other task of the loop
                 runs until it returns.
loopwake         The wait-for graph's unwoken event loop: an asyncio loop asleep in
                 ``epoll_wait`` with nothing to wake it but its own self-pipe, while another
                 thread of its process hands it work through a loop-only call
                 (``q.put_nowait(item)`` on an ``asyncio.Queue``, ``fut.set_result(x)`` on a
                 loop future) instead of ``loop.call_soon_threadsafe``.
managerpatterns  The wait-for graph's orphaned Manager lock: clients wait for a lock that a
                 ``multiprocessing`` Manager hosts, and no live client holds it.
permitpatterns   The wait-for graph's leaked permits: threads wait in
                 ``threading.Semaphore.acquire`` for a permit that no live thread holds.
poolpatterns     The wait-for graph's patterns of ``multiprocessing.Pool``: a result nobody
                 computes, a pool saturated by tasks waiting for tasks (read in
                 analyze/patterns/waitpatterns.py's order).
promptpatterns   The wait-for graph's prompts: a read of a terminal, a FIFO or a pipe nobody
                 writes under ``input()``, pdb or cmd, or a Python child reading its stdin pipe
                 whose writers wait for it (read in analyze/patterns/waitpatterns.py's order;
                 its cycles skip a prompt's parent holding its stdin).
selfcalls        A pool that calls its own server: every worker of a thread pool waits inside a
                 call, and the process holds both ends of a connection to its own listening
                 port (a gRPC handler calling its own server).
stalepatterns    A stale lock: processes poll for a lock that their own log says a process holds
                 which no longer exists (read in analyze/patterns/waitpatterns.py's order, with
                 the orphaned waits).
starvedpools     A process pool starved by its own tasks: every worker waits for what a queued
                 task would do.
threadpatterns   The patterns of threads inside one process: a lock-order ring (ABBA), a thread
                 waiting on a lock its own outer frame holds, an event loop blocked on its own
                 future, a wait whose producer thread is gone, a lock inherited locked across
                 fork.
ttystop          A program blocked writing its terminal while the terminal's other end waits to
                 read: the terminal's output is stopped.
upgradepatterns  A thread that takes a lock its own outer frame holds, through a lock of its own
                 making.
waitpatterns     The patterns of the wait-for graph, each with its suspect and the chain in one
                 sentence.
wakepatterns     The wait-for graph's lost wake-ups: every thread of a process waits for another
                 thread of it to notify it, and none runs to.
"""
