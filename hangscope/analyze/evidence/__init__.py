"""What one kind of evidence says: a thread's category and call site, a rank's identity and
role, its progress, its GPU, its collectives, its locks. Reads the Snapshot only; imports
nothing of the other wings (evidence <- graph <- patterns <- rules).

Modules (what each reads, what it concludes):

classify        Classify each thread (category, op, call site, context) and pick each process's
                working thread.
collectives     Collective evidence (NCCL RAS, Flight Recorder) -> per-communicator positions
                and conclusions.
compiling       A compile in progress: what compiles, since when, and how many helpers work on
                it.
deadscripts     Scripts of the job that died: a Python traceback in a log the job writes, whose
                outermost frame is a script no live process of the job runs.
facts           The facts record: everything the verdict rules read, derived once per snapshot.
failures        Ranks that failed: NCCL and c10d errors in the ranks' output, read from the log
                tails.
flightrec/      The Flight Recorder and NCCL RAS half of the collective evidence: per-rank dumps
                grouped by process group, compared sequence by sequence, and the ranks they
                place.
gpu             GPU evidence for one rank: what the GPU and the host thread are doing together.
group           Group ranks by what their working thread waits on, and merge their stacks into
                one tree.
identity        A rank is its coordinates: read them, label them, key them, and say which ranks
                compare.
locals_wanted   Whom the live pipeline asks for ``py-spy dump --locals``, and what their locals
                say.
locks           Who waits for which lock, and who holds it: file locks across processes, Python
                locks inside one.
p2p             Point-to-point waits: who each rank waits for in send/recv, and the cycles that
                never end.
progress        Progressing, stuck or slow: a pure decision per rank from
                :mod:`hangscope.model.progress`.
progress_hints  What a stack sample says that the progress counters cannot: spin-waits and
                stream reads.
progress_sites  Where a rank called collectives during the progress window (``py-spy record``
                raw stacks).
pylocals        Read py-spy ``--locals`` JSON (``py-spy dump --locals --json --pid PID``): pure
                helpers.
roles           Pure rules that name a process's role, its rank coordinates and the job's
                expected size.
roots           A root that works is no launcher; a job outside torch.distributed has no
                collectives.
signatures      The signature table: one row per known way a thread can be blocked, ordered.
stackmemo       One answer per distinct stack: a fact of a thread's frames, computed once for
                every rank that shares them.
store_key       Which key a rank waits for in a c10d store get/wait, from its stack, its locals
                and its line.
visitors        Clients from outside the job (a curl, a load generator on its port): context, never
                the cause.
working         Does a process that others wait for work, or spin? A pure reading of the
                progress window.
world           The expected world against the ranks found: which ranks are missing, and what is
                left of them.
"""
