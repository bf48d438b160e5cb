"""Parse NCCL RAS answers (``ncclras -v`` / ``ncclras -v -f json``) into evidence.RasReport.

Pure: text in, data out. Every malformed input raises RasFormatError (a ValueError) with a
sentence; nothing else escapes. The formats are NCCL's own (src/ras/client_support.cc):

- JSON (NCCL >= 2.28): every communicator, every rank's collective counts, missing ranks.
  NCCL 2.28.9 writes no comma after ``"nvml_dev": N`` in ``missing_ranks``; ``repair_json``
  puts the commas back where a value is followed by a key on the next line.
- text (every NCCL with RAS): a table of communicator groups, then blocks per communicator
  with errors or warnings; only *outlier* ranks are named, the majority is counted
  ("2 ranks have launched up to operation 5").
"""

from __future__ import annotations

import json
import re
from typing import Any

from hangscope.model.nccl import RasComm, RasMissing, RasRank, RasReport


class RasFormatError(ValueError):
    """The answer is not a RAS report this parser understands."""


# A value (number, string, true/false/null, object or array end) at the end of a line and a
# key at the start of the next: a missing comma. Raw newlines cannot occur inside JSON strings.
_MISSING_COMMA = re.compile(r'(?<=[0-9"el\]}])([ \t]*\r?\n[ \t]*)(?=")')


def repair_json(text: str) -> str:
    """NCCL 2.28.9's JSON with the missing commas put back."""
    return _MISSING_COMMA.sub(r",\1", text)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RasFormatError(f"{what} is not an integer ({value!r:.40})")
    return value


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise RasFormatError(f"{what} is not a string ({value!r:.40})")
    return value


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RasFormatError(f"{what} is not an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise RasFormatError(f"{what} is not a list")
    return value


def norm_hash(text: str) -> str:
    """A communicator hash as ``0x`` + 16 hex digits (JSON drops leading zeros, text keeps them)."""
    try:
        return f"0x{int(text, 16):016x}"
    except ValueError:
        raise RasFormatError(f"communicator hash {text!r:.40} is not hexadecimal") from None


def _pid(value: Any, what: str) -> int | None:
    pid = _opt_int(value, what)
    return pid if pid is not None and pid > 0 else None  # NCCL writes -1 when unknown


def _host(value: Any, what: str) -> str | None:
    host = _str(value, what) if value is not None else None
    return None if host in (None, "unknown") else host


def parse_json(text: str) -> RasReport:
    """A RAS JSON answer; repairs NCCL 2.28.9's missing commas first if it must."""
    fmt = "json"
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        try:
            data = json.loads(repair_json(text))
        except (json.JSONDecodeError, RecursionError) as exc:
            raise RasFormatError(f"not JSON even after repair ({exc})") from None
        fmt = "json-repaired"
    top = _obj(data, "the answer")
    comms = []
    for i, raw in enumerate(_list(top.get("communicators", []), "communicators")):
        c = _obj(raw, f"communicators[{i}]")
        ranks = []
        for j, r in enumerate(_list(c.get("ranks", []), f"communicators[{i}].ranks")):
            r = _obj(r, f"communicators[{i}].ranks[{j}]")
            where = f"communicators[{i}].ranks[{j}]"
            status = _obj(r.get("status", {}), f"{where}.status")
            counts = {str(op): _int(n, f"{where}.collective_counts.{op}")
                      for op, n in _obj(r.get("collective_counts", {}),
                                        f"{where}.collective_counts").items()}
            ranks.append(RasRank(
                rank=_int(r.get("rank"), f"{where}.rank"), pid=_pid(r.get("pid"), f"{where}.pid"),
                host=_host(r.get("host"), f"{where}.host"),
                cuda_dev=_opt_int(r.get("cuda_dev"), f"{where}.cuda_dev"),
                nvml_dev=_opt_int(r.get("nvml_dev"), f"{where}.nvml_dev"), counts=counts,
                init_state=_opt_int(status.get("init_state"), f"{where}.init_state"),
                async_error=_opt_int(status.get("async_error"), f"{where}.async_error"),
                abort=status.get("abort_flag") is True,
                finalize=(status.get("finalize_called") is True
                          or status.get("destroy_flag") is True),
            ))
        missing = []
        for j, m in enumerate(_list(c.get("missing_ranks", []), f"communicators[{i}].missing")):
            where = f"communicators[{i}].missing_ranks[{j}]"
            m = _obj(m, where)
            status = _obj(m.get("status", {}), f"{where}.status")
            missing.append(RasMissing(
                rank=_int(m.get("rank"), f"{where}.rank"), pid=_pid(m.get("pid"), f"{where}.pid"),
                host=_host(m.get("host"), f"{where}.host"),
                cuda_dev=_opt_int(m.get("cuda_dev"), f"{where}.cuda_dev"),
                unresponsive=status.get("unresponsive") if isinstance(
                    status.get("unresponsive"), bool) else None,
                dead=status.get("considered_dead") if isinstance(
                    status.get("considered_dead"), bool) else None,
            ))
        comms.append(RasComm(
            hash=norm_hash(_str(c.get("hash"), f"communicators[{i}].hash")),
            size=_opt_int(c.get("size"), f"communicators[{i}].size"),
            ranks=tuple(ranks), missing=tuple(missing),
        ))
    ras = top.get("ras") if isinstance(top.get("ras"), dict) else {}
    timeouts = ras.get("timeouts_count")
    collection = ras.get("collection_time_sec")
    return RasReport(
        format=fmt,
        nccl_version=top.get("nccl_version") if isinstance(top.get("nccl_version"), str) else None,
        communicators=tuple(comms),
        timeouts=timeouts if isinstance(timeouts, int) and not isinstance(timeouts, bool) else None,
        collection_s=float(collection) if isinstance(collection, (int, float))
        and not isinstance(collection, bool) else None,
    )


_MAX_LINE = 4096
_VERSION = re.compile(r"^NCCL version (\S+)")
_TABLE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s*$")
_BLOCK = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) (\w+)\s*$")
# "GPU 3" or "GPU 3 (NVML 5)" (rasGpuToString); no pattern here lets two repeats compete for
# the same characters, so a hostile line costs linear time.
_WHO = (r"(?: -- (?:GPU (-?\d+)(?: \(NVML -?\d+\))? managed by process (-?\d+) on node (\S+)"
        r"|\[process information not found\]))?")
_RANK_AT = re.compile(r"^\s+Rank (\d+) has launched up to operation (\d+)" + _WHO + r"\s*$")
_RANK_NONE = re.compile(r"^\s+Rank (\d+) has not launched any operations" + _WHO + r"\s*$")
_RANK_STATUS = re.compile(r"^\s+Rank (\d+) has status (\w+)" + _WHO + r"\s*$")
_RANK_PLAIN = re.compile(r"^\s+Rank (\d+)" + _WHO + r"\s*$")
_MAJORITY_AT = re.compile(r"^\s+(\d+) ranks have launched up to operation (\d+)\s*$")
_MAJORITY_NONE = re.compile(r"^\s+(\d+) ranks have not launched any operations\s*$")
_MAJORITY_STATUS = re.compile(r"^\s+(\d+) ranks have status (\w+)\s*$")
_OP_HEADER = re.compile(r"^\s+Communicator ranks have different (\w+) operation counts\s*$")
_MISSING_HEADER = re.compile(r"^\s+Missing communicator data from \d+ ranks?\s*$")
_MISSING_LIST = re.compile(r"^\s+The missing ranks?: ([\d, ]{1,1024})$")  # NCCL 2.24-2.25
_TIMEOUTS = re.compile(r"^\s+Encountered (\d+) communication timeouts?")


class _Block:
    """What the text says about one communicator, built line by line."""

    def __init__(self, group: int, comm_hash: str) -> None:
        self.group = group
        self.hash = comm_hash
        self.kinds: list[str] = []
        self.counts: dict[int, dict[str, int]] = {}
        self.where: dict[int, tuple[int | None, int | None, str | None]] = {}
        self.missing: dict[int, RasMissing] = {}
        self.majorities: dict[str, list[tuple[int, int]]] = {}


def _who(match: re.Match[str], first: int) -> tuple[int | None, int | None, str | None]:
    gpu, pid, host = match.group(first), match.group(first + 1), match.group(first + 2)
    pid_n = int(pid) if pid and int(pid) > 0 else None
    return (int(gpu) if gpu else None, pid_n, host)


def parse_text(text: str) -> RasReport:
    """A RAS text answer: communicators with errors/warnings, outlier counts, missing ranks."""
    lines = text.splitlines()
    if not lines or not _VERSION.match(lines[0]):
        raise RasFormatError("the answer does not start with 'NCCL version'")
    version = _VERSION.match(lines[0]).group(1)  # type: ignore[union-attr]
    groups: dict[int, tuple[int, str, str]] = {}  # group -> (ranks per comm, status, errors)
    blocks: dict[str, _Block] = {}
    block: _Block | None = None
    op: str | None = None
    value: int | None = None  # the majority count the following plain "Rank R" lines share
    section = ""
    timeouts = 0
    for line in lines[1:]:
        if len(line) > _MAX_LINE:  # NCCL's lines fit 1 KiB; a longer one is not NCCL's
            continue
        stripped = line.strip()
        if stripped in ("Errors", "Warnings") or stripped.startswith("Communicators"):
            section, block, op = stripped.split()[0].rstrip("."), None, None
            continue
        if section == "Communicators" and (m := _TABLE_ROW.match(line)):
            groups[int(m.group(1))] = (int(m.group(5)), m.group(7), m.group(8))
            continue
        if (m := _BLOCK.match(line)):
            comm_hash = norm_hash(m.group(3))
            block = blocks.setdefault(comm_hash, _Block(int(m.group(1)), comm_hash))
            block.kinds.append(m.group(4))
            op, value = None, None
            continue
        if (m := _TIMEOUTS.match(line)):
            timeouts += int(m.group(1))
            continue
        if block is None:
            continue
        if (m := _OP_HEADER.match(line)):
            op, value = m.group(1), None
        elif _MISSING_HEADER.match(line) or "have different status" in line:
            op, value = "missing" if "Missing" in line else None, None
        elif (m := _MISSING_LIST.match(line)):
            for rank in (int(x) for x in re.findall(r"\d+", m.group(1))):
                block.missing.setdefault(rank, RasMissing(rank=rank, unresponsive=True))
        elif (m := _MAJORITY_AT.match(line)) or (m := _MAJORITY_NONE.match(line)):
            value = int(m.group(2)) if m.re is _MAJORITY_AT else 0
            if op not in (None, "missing"):
                block.majorities.setdefault(op, []).append((value, int(m.group(1))))
        elif _MAJORITY_STATUS.match(line):
            value = None
        elif (m := _RANK_AT.match(line)) or (m := _RANK_NONE.match(line)):
            at = m.re is _RANK_AT
            rank = int(m.group(1))
            if op not in (None, "missing"):
                block.counts.setdefault(rank, {})[op] = int(m.group(2)) if at else 0
            block.where[rank] = _who(m, 3 if at else 2)
        elif (m := _RANK_STATUS.match(line)):
            block.where[int(m.group(1))] = _who(m, 3)
        elif (m := _RANK_PLAIN.match(line)):
            rank = int(m.group(1))
            gpu, pid, host = _who(m, 2)
            if op == "missing":
                block.missing[rank] = RasMissing(rank=rank, pid=pid, host=host, cuda_dev=gpu,
                                                 unresponsive=True)
            else:
                block.where[rank] = (gpu, pid, host)
                if op is not None and value is not None:
                    block.counts.setdefault(rank, {})[op] = value
    if not groups and not blocks and "Group" not in text and "No communicator data" not in text:
        raise RasFormatError("no communicator table in the text answer")
    comms = []
    for b in blocks.values():
        size, status, errors = groups.get(b.group, (None, None, None))
        ranks = []
        for rank in sorted(set(b.counts) | set(b.where)):
            if rank in b.missing:
                continue
            gpu, pid, host = b.where.get(rank, (None, None, None))
            ranks.append(RasRank(rank=rank, pid=pid, host=host, cuda_dev=gpu,
                                 counts=b.counts.get(rank, {})))
        comms.append(RasComm(
            hash=b.hash, size=size, ranks=tuple(ranks),
            missing=tuple(b.missing[r] for r in sorted(b.missing)), status=status,
            errors=errors, majorities={k: tuple(v) for k, v in b.majorities.items()},
        ))
    return RasReport(format="text", nccl_version=version, communicators=tuple(comms),
                     timeouts=timeouts)


def parse(text: str) -> RasReport:
    """JSON when the answer looks like JSON, else text."""
    if text.lstrip().startswith("{"):
        return parse_json(text)
    return parse_text(text)
