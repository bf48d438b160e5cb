"""NCCL RAS: ``ncclras -v -f json`` (the job's own ``127.0.0.1:28028``), bounded by a deadline.

NCCL >= 2.24 runs a RAS thread in every NCCL process; one per node listens for clients on
``NCCL_RAS_ADDR`` (default ``localhost:28028``) and answers, for every communicator of the job
on every node, each rank's collective counts and the ranks it cannot reach. We speak its text
protocol (src/ras/client.cc) with one hard deadline, and only to a listener that a process of
*this* job holds: another job's RAS on the same node is never read as ours. A job in another
network namespace is reached inside it (a short-lived thread ``setns``-es and makes the socket
there). Every outcome is a RasReading with a note; nothing raises.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import select
import socket
import threading
import time
from collections.abc import Iterable, Sequence

from hangscope.collect import procfs
from hangscope.collect.ras_format import RasFormatError, parse
from hangscope.model import Process, Socket
from hangscope.model import nccl as ev

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 28028
# What this collector reads of a rank's environment (kept by collect/procfs.py's allow-list).
ENV_KEYS = ("NCCL_RAS_ADDR", "NCCL_RAS_ENABLE")
DEADLINE_S = 1.5  # a snapshot never waits longer than this on RAS
MAX_ANSWER = 32 << 20  # a verbose JSON answer of a 10,000-rank job is a few MiB
MIN_VERSION = (2, 24)
_CLONE_NEWNET = 0x40000000


def endpoint(environs: Iterable[dict[str, str]]) -> tuple[str, int, bool]:
    """(host, port, explicit) from the first ``NCCL_RAS_ADDR`` among the ranks, else the default."""
    for env in environs:
        value = (env or {}).get("NCCL_RAS_ADDR")
        if not value:
            continue
        host, sep, port = value.rpartition(":")
        if sep and port.isdigit() and 0 < int(port) < 65536:
            host = host.strip("[]") or DEFAULT_HOST
            return ("127.0.0.1" if host == "localhost" else host), int(port), True
    return DEFAULT_HOST, DEFAULT_PORT, False


def _local(address: str) -> bool:
    return address in ("0.0.0.0", "::", "127.0.0.1", "::1") or address.startswith("127.")


def owner(processes: Sequence[Process], host: str, port: int,
          extra: dict[int, tuple[Socket, ...]] | None = None) -> tuple[Process, Socket] | None:
    """The job process that listens on the RAS endpoint, and its socket; None: none of ours.

    ``extra``: listening sockets read inside another network namespace, by PID.
    """
    for proc in processes:
        for sock in (extra or {}).get(proc.pid, proc.listening):
            if sock.kind not in ("tcp", "tcp6") or sock.port != port:
                continue
            if sock.address == host or sock.address in ("0.0.0.0", "::") or (
                    _local(host) and _local(sock.address)):
                return proc, sock
    return None


def _netns(pid: int | str) -> int | None:
    return procfs.netns_inode(pid)


def listening_in_netns(pid: int) -> tuple[Socket, ...]:
    """``ss -ltn`` inside PID's network namespace, limited to the sockets PID itself holds."""
    inodes = procfs.read_fds(pid)[4]
    table = procfs.read_listening(net_dir=procfs.net_dir(pid))
    return tuple(table[i] for i in sorted(inodes) if i in table)


_VERSION_IN_NAME = re.compile(r"libnccl\.so\.(\d+)\.(\d+)\.(\d+)")
_DIST_INFO = re.compile(r"nvidia_nccl_cu\d+-(\d+)\.(\d+)\.(\d+)[^/]*\.dist-info$")


def nccl_version(pid: int) -> tuple[int, int, int] | bool | None:
    """The libnccl a process maps (``grep libnccl /proc/PID/maps``): its version, True when the
    version cannot be told, False when it maps no NCCL, None when the maps cannot be read."""
    paths = procfs.read_map_paths(pid, "libnccl")
    if paths is None:
        return None
    paths = {p for p in paths if "/" in p}
    if not paths:
        return False
    for path in sorted(paths):
        m = _VERSION_IN_NAME.search(path)
        if m:
            return int(m.group(1)), int(m.group(2)), int(m.group(3))
        # pip's nvidia-nccl-cuXX: site-packages/nvidia/nccl/lib/libnccl.so.2 beside the
        # package's dist-info, read through the process's root (it may be a container).
        site = path.split("/nvidia/nccl/", 1)[0] if "/nvidia/nccl/" in path else None
        if site:
            for name in procfs.list_in_root(pid, site):
                d = _DIST_INFO.match(name)
                if d:
                    return int(d.group(1)), int(d.group(2)), int(d.group(3))
    return True


def _socket_in_netns(pid: int, family: int) -> socket.socket:
    """A TCP socket made inside PID's network namespace (``nsenter --net=/proc/PID/ns/net``).

    setns() moves only the calling thread, so a short-lived thread does it, makes the socket
    (a socket stays in the namespace it was made in) and moves back before it ends.
    Raises OSError (EPERM without CAP_SYS_ADMIN).
    """
    result: dict[str, object] = {}

    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        own = target = -1
        try:
            own = procfs.open_netns("thread-self")
            target = procfs.open_netns(pid)
            if libc.setns(target, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            try:
                result["sock"] = socket.socket(family, socket.SOCK_STREAM)
            finally:
                libc.setns(own, _CLONE_NEWNET)
        except OSError as exc:
            result["error"] = exc
        finally:
            for fd in (own, target):
                if fd >= 0:
                    os.close(fd)

    thread = threading.Thread(target=run, name="hangscope-netns", daemon=True)
    thread.start()
    thread.join(1.0)
    if "sock" in result:
        return result["sock"]  # type: ignore[return-value]
    error = result.get("error")
    raise error if isinstance(error, OSError) else OSError(errno.ETIMEDOUT, "setns timed out")


class _Failed(Exception):
    def __init__(self, status: str, note: str) -> None:
        super().__init__(note)
        self.status, self.note = status, note


def _exchange(host: str, port: int, deadline: float, json_format: bool,
              netns_pid: int | None) -> bytes:
    """Connect, send the whole conversation at once, read until the server closes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = _socket_in_netns(netns_pid, family) if netns_pid else socket.socket(
            family, socket.SOCK_STREAM)
    except OSError as exc:
        raise _Failed(ev.NAMESPACE, f"could not enter the job's network namespace "
                      f"({exc.strerror or exc}); run hangscope as root to read RAS there") from None
    chunks: list[bytes] = []
    size = 0
    with sock:
        sock.setblocking(False)
        try:
            sock.connect((host, port))
        except BlockingIOError:
            pass
        except OSError as exc:
            raise _Failed(ev.REFUSED,
                          f"connecting to {host}:{port} failed: {exc.strerror}") from None
        if not select.select([], [sock], [], max(0.0, deadline - time.monotonic()))[1]:
            raise _Failed(ev.TIMEOUT, f"{host}:{port} did not accept within the deadline")
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise _Failed(ev.REFUSED, f"connecting to {host}:{port} failed: {os.strerror(err)}")
        # The server's own gathering timeout (whole seconds, at least 1) stays inside ours.
        timeout = max(1, int(deadline - time.monotonic()) - 1)
        request = f"CLIENT PROTOCOL 2\nTIMEOUT {timeout}\n"
        request += ("SET FORMAT json\n" if json_format else "") + "VERBOSE STATUS\n"
        try:
            sock.sendall(request.encode())  # a few dozen bytes: fits any socket buffer
        except OSError as exc:
            raise _Failed(ev.REFUSED, f"{host}:{port} closed the connection: {exc}") from None
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise _Failed(ev.TIMEOUT, f"{host}:{port} accepted but did not finish its "
                              f"answer within the deadline ({size} bytes read)")
            try:
                data = sock.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise _Failed(ev.REFUSED, f"{host}:{port} reset the connection: "
                              f"{exc.strerror}") from None
            if not data:
                return b"".join(chunks)
            size += len(data)
            if size > MAX_ANSWER:
                raise _Failed(ev.GARBAGE, f"{host}:{port} sent more than "
                              f"{MAX_ANSWER >> 20} MiB: not a RAS answer we read")
            chunks.append(data)


def _split(raw: bytes) -> tuple[str, bool]:
    """The report part of the answer, and whether the server accepted ``SET FORMAT json``."""
    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if not lines or not lines[0].upper().startswith("SERVER PROTOCOL"):
        raise _Failed(ev.GARBAGE, f"the listener does not speak the RAS protocol "
                      f"(it answered {lines[0][:40]!r})")
    json_ok = False
    i = 1
    while i < len(lines) and i < 4 and (lines[i] == "OK" or lines[i].startswith("ERROR")):
        json_ok = lines[i] == "OK" if i == 2 else json_ok
        i += 1
    return "\n".join(lines[i:]), json_ok


def query(host: str, port: int, deadline_s: float = DEADLINE_S,
          netns_pid: int | None = None) -> ev.RasReading:
    """Ask one RAS endpoint for ``VERBOSE STATUS``: JSON first, text when JSON is not to be had."""
    start = time.monotonic()
    deadline = start + deadline_s
    where = f"{host}:{port}"
    raw_text = ""
    try:
        raw = _exchange(host, port, deadline, True, netns_pid)
        raw_text, json_ok = _split(raw)
        try:
            report = parse(raw_text)
        except RasFormatError as first:
            if not json_ok or deadline - time.monotonic() < 0.05:
                raise _Failed(ev.GARBAGE, f"the RAS answer could not be parsed ({first})") from None
            raw_text, _ = _split(_exchange(host, port, deadline, False, netns_pid))
            try:
                report = parse(raw_text)
            except RasFormatError as second:
                raise _Failed(ev.GARBAGE, f"neither the JSON nor the text RAS answer could be "
                              f"parsed ({first}; {second})") from None
    except _Failed as failed:
        return ev.RasReading(status=failed.status, note=f"NCCL RAS at {where}: {failed.note}.",
                             endpoint=where, elapsed_s=time.monotonic() - start,
                             raw=raw_text or None)
    comms = len(report.communicators)
    return ev.RasReading(
        status=ev.READ, endpoint=where, report=report, raw=raw_text,
        elapsed_s=time.monotonic() - start,
        note=f"NCCL RAS at {where} (NCCL {report.nccl_version or '?'}, {report.format}): "
             f"{comms} communicator{'s' if comms != 1 else ''} reported.")


def _version_text(version: tuple[int, int, int]) -> str:
    return ".".join(str(v) for v in version)


def read(processes: Sequence[Process], host_ports: Iterable[int] = (),
         deadline_s: float = DEADLINE_S) -> ev.RasReading:
    """The job's RAS report, or a note saying exactly why there is none.

    ``processes``: the job's processes with their listening sockets and (allow-listed)
    environments; ``host_ports``: every TCP port listened on by any process of the node.
    """
    start = time.monotonic()
    live = [p for p in processes if not p.is_exited]
    environs = [p.environ for p in live]
    host, port, explicit = endpoint(environs)
    where = f"{host}:{port}"
    if any(env.get("NCCL_RAS_ENABLE") == "0" for env in environs):
        return ev.RasReading(ev.DISABLED, "NCCL RAS is off in this job (NCCL_RAS_ENABLE=0): "
                             "no per-communicator collective counts.", endpoint=where)
    own_ns = _netns("self")
    extra: dict[int, tuple[Socket, ...]] = {}
    foreign = [p for p in live if (ns := _netns(p.pid)) is not None and ns != own_ns]
    for proc in foreign:  # the sampler's socket table is of our namespace: read theirs
        extra[proc.pid] = listening_in_netns(proc.pid)
    found = owner(live, host, port, extra)
    if found is not None:
        proc, sock = found
        # Connect where it listens; a wildcard listener is reached on loopback.
        address = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(sock.address, sock.address)
        netns_pid = proc.pid if proc.pid in extra else None
        return query(address, port, max(0.05, deadline_s - (time.monotonic() - start)),
                     netns_pid)
    if port in set(host_ports):
        return ev.RasReading(ev.NOT_THIS_JOB, f"A process outside this job listens on {where} "
                             "(another job's NCCL RAS?): not read as this job's.", endpoint=where)
    for proc in live:
        if proc.python is False:
            continue
        version = nccl_version(proc.pid)
        if version is False or version is None:
            continue
        if isinstance(version, tuple) and version[:2] < MIN_VERSION:
            return ev.RasReading(ev.TOO_OLD, f"The ranks use NCCL {_version_text(version)}; "
                                 "NCCL RAS needs 2.24 or later.", endpoint=where)
        shown = f"NCCL {_version_text(version)}" if isinstance(version, tuple) else "NCCL"
        hint = (f"NCCL_RAS_ADDR={host}:{port}" if explicit else
                "the default port 28028 (NCCL_RAS_ADDR moves it)")
        return ev.RasReading(ev.NO_LISTENER, f"The ranks map {shown} but no process of the job "
                             f"listens on {where} ({hint}): RAS is off, not yet started (it "
                             "starts with the first communicator), or bound elsewhere.",
                             endpoint=where)
    return ev.RasReading(ev.NO_NCCL, "No rank has NCCL loaded (gloo or CPU job): no NCCL RAS "
                         "to ask.", endpoint=where)
