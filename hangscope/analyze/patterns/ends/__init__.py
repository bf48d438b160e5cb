"""Waits whose other end is gone, stopped, or the waiter itself: dead processes and threads,
stopped peers, lost signals, fork leftovers, sockets connected to themselves or shared,
listeners nobody accepts on, a process out of fds, a reader holding its own write end, a
method awaiting a call nobody makes.

Modules (what each reads, what it concludes):

crashloops      The wait-for graph's crash loop: the children a process waits on die as they
                start, and something starts them again (a ``multiprocessing.Pool`` replaces each
                dead worker; a supervisor restarts its child), so the wait never ends and no
                process is stuck for long.
deadprocs       A process of the job died and the others wait on: a zombie the rest poll for or
                depend on (read in analyze/patterns/waitpatterns.py's order, after the dead
                threads).
deadthreads     The wait-for graph's dead thread: a thread of a live process died with an
                exception, and the job waits for what it would have done (a launcher polling a
                health check that stays "loading", clients waiting on the launcher's Event).
fdlimit         A process out of file descriptors: its open fds at its RLIMIT_NOFILE.
fifopatterns    The wait-for graph's FIFO opens: threads blocked in ``open()`` of a named pipe
                that no process of the job opens from the other end.
forkwaits       A notifier left behind by fork: a forked child waits for a thread that exists
                only in its parent (read in analyze/patterns/waitpatterns.py's order, before the
                orphaned waits).
ownendpatterns  A reader that holds the other end itself: EOF (or the reply) can never come.
selfconnect     A TCP socket connected to itself: its reader waits for bytes only it could send.
sharedconn      One connection, several processes: a socket inherited through fork and used by
                each.
signalmasks     A signal that cannot end a wait: sent but blocked by every thread, or ignored.
signalwaits     A signal already gone: a process sleeps in ``signal.pause()`` (or
                ``sigsuspend``, ``sigwait``) for its child's SIGCHLD while that child has
                already exited and waits, a zombie, to be reaped (read in
                analyze/patterns/waitpatterns.py's order, with the lost wake-ups).
stoppedends     A chain that ends at a stopped process: what stopped it, from the kernel's facts
                (read by analyze/patterns/waitpatterns.py's sink, whose chain may then be only
                child waits: the stop says why).
uncalled        A call nobody makes: a producer's method (a Ray async actor's ``get``) awaits
                another call to it while no live process of the job could make one; the
                waiter for it is the suspect. Or the waiter's own line submitted that other
                call, queued behind the method in flight (queued_call): the producer is.
unaccepted      Connections nobody accepts: a listener with a full accept queue that no thread
                watches.
zmqends         A zmq receive nobody in the job owes a message: its live peers only wait for
                its next request; the peer that owed the answer is gone.
"""
