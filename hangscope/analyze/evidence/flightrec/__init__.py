"""The Flight Recorder and NCCL RAS half of the collective evidence: per-rank dumps grouped
by process group, compared sequence by sequence, and the ranks they place.

Modules (what each reads, what it concludes):

collectives_fr  The Flight Recorder half of analyze/evidence/collectives.py: process groups from
                per-rank dumps.
fr_groups       Flight Recorder process groups: every rank's dump gathered per group (name and
                members).
fr_match        Whether two ranks' Flight Recorder entries for one collective agree, op by op.
fr_p2p          Point-to-point ops of a group: sends matched to receives, and the ops that wait on
                each other in a circle.
rank_evidence   Rank numbers from the collective evidence: a PID that NCCL RAS (or the Flight
                Recorder's debug-info pipe it holds open) places at a rank is that rank.
"""
