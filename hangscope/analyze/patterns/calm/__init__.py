"""Paused or idle, not hung: a job whose processes wait for nobody in the job, or only for a
server waiting for work (an event loop, a long poll); read before any chain is called hung.

Modules (what each reads, what it concludes):

calm        Paused or idle, not hung: a job whose every process waits for nobody in the job.
calm_chain  Calm by the wait-for graph: a process blocked only on an idle or paused one is calm
            too.
calmends    Where a wait chain ends in a calm process it waits on for work: no sink
            (analyze/patterns/calm/calm.py reads the calm processes;
            analyze/patterns/waitpatterns.py asks here chain by chain).
engines     An idle serving engine: its front end waits for requests with no connection open,
            and every other process of the job waits at the head of its loop for the next
            message.
longpoll    A long poll: a server holds each request in a timed wait, then answers (304, "no
            news").
"""
