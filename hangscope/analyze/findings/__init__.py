"""Findings: the checks an engineer runs by hand, each a sentence with its evidence; beside
rules/ (may read evidence/, graph/ and patterns/, never rules/).

Modules (what each reads, what it concludes):

census  The few processes each finding is about, sorted out of a snapshot in one pass.
checks  Findings: the checks an engineer runs by hand, each a sentence with its evidence.
cuda    The GPU core dump a job was set up for: ``CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1`` and
        ``CUDA_COREDUMP_PIPE`` in a rank's environment (hangscope says how to use it, never
        does).
kernel  Findings about the job's processes as the kernel sees them: states, memory, kernel
        messages.
loop    An asyncio loop handed work from another thread without its thread-safe hop: the latent
        form of analyze/patterns/loopwake.py's lost wake-up, for a loop that something else may
        still wake (it listens, it has a timer), so the job is not proven hung but a request can
        stay stuck.
"""
