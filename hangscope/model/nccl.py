"""Collective evidence: what NCCL RAS and the PyTorch Flight Recorder say about each communicator.

Pure, frozen data; part of the JSON contract once a Snapshot carries it. This module does not
use ``from __future__ import annotations`` on purpose: its field types are real objects, so
model/serialize.py's generic reader (``typing.get_type_hints``, the one JSON codec) resolves
them without the model having to import every class here. Keep definitions in dependency
order (no forward references).
"""

from dataclasses import dataclass, field

# Where a piece of evidence came from.
SOURCE_RAS = "ras"  # NCCL RAS over its client socket
SOURCE_FR = "fr"  # PyTorch Flight Recorder dump

# What a collector's attempt came to (RasReading.status / FrReading.status).
READ = "read"
DISABLED = "disabled"  # NCCL_RAS_ENABLE=0
TOO_OLD = "too_old"  # NCCL < 2.24: no RAS
NO_NCCL = "no_nccl"  # no rank maps libnccl (gloo, CPU): nothing to ask
NO_LISTENER = "no_listener"  # nobody listens on the endpoint: no connect attempted
NOT_THIS_JOB = "not_this_job"  # another job's RAS listens there: not read
NAMESPACE = "namespace"  # the job's network namespace could not be entered
REFUSED = "refused"
TIMEOUT = "timeout"
GARBAGE = "garbage"
NONE_FOUND = "none_found"  # Flight Recorder: no dump of this job on disk
REFUSED_FILE = "refused_file"  # Flight Recorder: a dump was rejected (planted, too large, bad)


@dataclass(frozen=True)
class RasRank:
    """One rank of a communicator as RAS reports it (``ncclras -v``)."""

    rank: int  # rank within the communicator
    pid: int | None = None
    host: str | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    counts: dict[str, int] = field(default_factory=dict)  # op (AllReduce...) -> launched count
    init_state: int | None = None  # ncclResult_t: 0 ok, 7 in progress, else an error
    async_error: int | None = None
    abort: bool = False
    finalize: bool = False


@dataclass(frozen=True)
class RasMissing:
    """A rank RAS could not get data from: process gone, hung hard, or not in the communicator."""

    rank: int
    pid: int | None = None
    host: str | None = None
    cuda_dev: int | None = None
    unresponsive: bool | None = None
    dead: bool | None = None


@dataclass(frozen=True)
class RasComm:
    """One communicator of the job in a RAS report."""

    hash: str
    size: int | None = None
    ranks: tuple[RasRank, ...] = ()
    missing: tuple[RasMissing, ...] = ()
    status: str | None = None  # text form: RUNNING, INIT, ABORT, FINALIZE, NOCOMM
    errors: str | None = None  # text form: OK, MISMATCH, ERROR, INCOMPLETE
    # Text form only: counts are printed for the outliers; the majority is "N ranks have
    # launched up to operation V" without names. op -> ((value, n_ranks), ...).
    majorities: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RasReport:
    """A parsed RAS answer (``VERBOSE STATUS``)."""

    format: str  # json | json-repaired | text
    nccl_version: str | None = None
    communicators: tuple[RasComm, ...] = ()
    timeouts: int | None = None
    collection_s: float | None = None


@dataclass(frozen=True)
class RasReading:
    """What the RAS collector came back with: a report, or why there is none."""

    status: str  # READ, DISABLED, TOO_OLD, NO_NCCL, NO_LISTENER, NOT_THIS_JOB, ...
    note: str
    endpoint: str | None = None  # host:port asked (or that would have been)
    report: RasReport | None = None
    elapsed_s: float = 0.0
    raw: str | None = None  # the answer as received (kept for captures; not for reports)


@dataclass(frozen=True)
class FrEntry:
    """One Flight Recorder entry: a collective (or p2p op) as one rank enqueued it."""

    seq: int  # collective_seq_id (p2p ops: p2p_seq_id)
    op: str  # all_reduce, all_gather, ... (the ``nccl:``/``gloo:`` prefix dropped)
    pg: str  # process group name
    state: str | None = None  # scheduled | started | completed
    p2p: bool = False
    input_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    site: str | None = None  # "func (file.py:line)": the first frame of the job's own code
    output_dtypes: tuple[str, ...] = ()
    record_id: int | None = None  # the entry's place in the rank's ring buffer (0: the first)
    pg_id: str | None = None  # the group's uid on this rank (keys gloo's pg_status)
    peer: tuple[int, int] | None = None  # p2p: (source, destination), ranks within the group


@dataclass(frozen=True)
class FrGroup:
    """A process group as one rank's dump describes it."""

    name: str
    desc: str | None = None
    ranks: tuple[int, ...] = ()  # global ranks, in group-rank order
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


@dataclass(frozen=True)
class FrDump:
    """One rank's Flight Recorder dump."""

    rank: int  # global rank, from the file name
    path: str
    version: str | None = None
    comm_lib_version: str | None = None
    groups: tuple[FrGroup, ...] = ()
    entries: tuple[FrEntry, ...] = ()
    mtime: float | None = None


@dataclass(frozen=True)
class FrReading:
    """What the Flight Recorder collector came back with."""

    status: str  # READ, NONE_FOUND, REFUSED_FILE, TIMEOUT
    note: str
    dumps: tuple[FrDump, ...] = ()
    prefix: str | None = None
    triggered: tuple[int, ...] = ()  # ranks whose debug-info pipe was written
    fresh: tuple[int, ...] = ()  # ranks whose dump was written during this read: alive then
    placed: tuple[tuple[int, int], ...] = ()  # (rank, PID): a process holding that rank's pipe
    notes: tuple[str, ...] = ()  # per-file refusals and trigger outcomes
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class RankPosition:
    """Where one rank of a communicator is in its sequence of collectives."""

    rank: int  # rank within the communicator
    global_rank: int | None = None
    pid: int | None = None
    host: str | None = None
    gpu: int | None = None
    counts: dict[str, int] = field(default_factory=dict)  # RAS: op -> launched count
    last_enqueued: int | None = None  # FR sequence ids
    last_started: int | None = None
    last_completed: int | None = None
    last_op: str | None = None  # FR: the op of the last enqueued collective
    last_state: str | None = None
    last_site: str | None = None
    status: str | None = None  # RAS: running | init | error | abort | finalize
    source: str = SOURCE_RAS


@dataclass(frozen=True)
class MissingRank:
    """A member of a communicator with no data and, where we can tell, no live process."""

    rank: int  # rank within the communicator
    global_rank: int | None = None
    pid: int | None = None
    host: str | None = None
    gpu: int | None = None
    reason: str = ""
    source: str = SOURCE_RAS


@dataclass(frozen=True)
class Side:
    """One side of a disagreement: the ranks that issued the same collective at a sequence."""

    ranks: tuple[int, ...]  # global ranks where known, else communicator ranks
    op: str
    sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    site: str | None = None
    output_sizes: tuple[tuple[int, ...], ...] = ()
    state: str | None = None
    record_id: int | None = None  # the first side rank's entry that differs
    detail: str | None = None  # what differs, in words ("3 ops in the coalesced group")


@dataclass(frozen=True)
class Disagreement:
    """The first sequence id at which the ranks of a communicator issued different collectives."""

    seq: int
    what: str  # op | sizes | dtype | numel | coalesced | p2p | state
    sides: tuple[Side, ...] = ()
    source: str = SOURCE_FR


@dataclass(frozen=True)
class Communicator:
    """One communicator / process group and every rank's position in it."""

    id: str  # RAS hash (0x...) or FR process group name
    source: str  # ras | fr
    name: str | None = None  # FR process group description (default_pg, ...)
    size: int | None = None
    members: tuple[int, ...] = ()  # global ranks, where known
    positions: tuple[RankPosition, ...] = ()
    missing: tuple[MissingRank, ...] = ()
    disagreement: Disagreement | None = None
    status: str | None = None
    errors: str | None = None


# Conclusion kinds, as the verdict rules use them.
BEHIND = "behind"
MISSING = "missing"
MISMATCH = "mismatch"


@dataclass(frozen=True)
class Conclusion:
    """A finding a verdict rule can use directly: who is behind, missing, or mismatched."""

    kind: str  # behind | missing | mismatch
    communicator: str
    ranks: tuple[int, ...]  # the suspects: global ranks where ``global_ranks``, else comm ranks
    sentence: str
    pids: tuple[int, ...] = ()
    ops: tuple[str, ...] = ()  # the op(s) not reached, or each side's op
    seq: int | None = None
    sites: tuple[str, ...] = ()
    source: str = SOURCE_RAS  # ras | fr | ras+fr
    global_ranks: bool = True


@dataclass(frozen=True)
class CollectiveEvidence:
    """All collective evidence of one node's read: the Snapshot's ``collectives`` items."""

    host: str | None = None
    communicators: tuple[Communicator, ...] = ()
    conclusions: tuple[Conclusion, ...] = ()
    notes: tuple[str, ...] = ()
    ras_status: str | None = None
    fr_status: str | None = None
    missing_evidence: str | None = None  # one sentence when neither source said anything
