"""One long-lived watcher per node: ``hangscope watch --find SPEC --events`` through a transport.

What ``ssh node hangscope watch --find SPEC --events`` would do, kept running for the whole
watch: hangscope is shipped the way a dump ships it (remote/ship.py, one connection), and
each JSON line the node prints (live/node_events.py) becomes a :class:`NodeEvent` on one queue
that the multi-node watch reads. A node whose transport fails or whose watcher ends without
saying the job ended there becomes a ``lost`` event carrying the sentence that says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from hangscope.errors import HangscopeError
from hangscope.remote.fanout import hangscope_error
from hangscope.remote.ship import (
    ENTRY_MODULE,
    HELLO_INSTALLED,
    HELLO_SEND,
    NO_PYTHON,
    REMOTE_SCRIPT,
    bundle,
)
from hangscope.remote.transport import Transport

#: prctl(2) option: the signal a child gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: Bytes of a node watcher's stderr kept to say why it ended.
STDERR_KEPT = 8192
#: How long a node watcher is given to end after SIGTERM before it is killed.
STOP_GRACE_S = 5.0


@dataclass(frozen=True)
class NodeEvent:
    """A line from a node's watcher (pulse, died, ended, note) or ``lost`` with ``error``."""

    node: str
    event: str
    data: dict[str, object] = field(default_factory=dict)

    @property
    def error(self) -> str:
        return str(self.data.get("error", ""))


def _die_with_parent() -> None:
    """In the transport's child: SIGTERM when the watch dies, also by SIGKILL (Linux
    ``prctl(PR_SET_PDEATHSIG)``), so an ssh left behind never keeps a node's watcher alive."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class NodeWatcher:
    """The watcher on ``node``; its events go to ``events``. ``local``: this machine, started
    as a child process (no transport, nothing to ship)."""

    def __init__(self, transport: Transport, node: str, args: Sequence[str],
                 events: queue.Queue[NodeEvent], ship: str = "auto", python: str = "python3",
                 local: bool = False) -> None:
        self.transport, self.node, self.args = transport, node, list(args)
        self.events, self.ship, self.python, self.local = events, ship, python, local
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr = bytearray()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hangscope-watch-{node}",
                                        daemon=True)

    def argv(self) -> list[str]:
        if self.local:
            return [sys.executable, "-m", ENTRY_MODULE, "watch", *self.args]
        return self.transport.argv(self.node, ["sh", "-c", REMOTE_SCRIPT, "hangscope-remote",
                                               self.ship, self.python, "watch", *self.args])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the watcher: SIGTERM to the transport (ssh hangs up, srun cancels its step,
        the local watcher stops at its pulse's end), SIGKILL after STOP_GRACE_S."""
        self._stopping.set()
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _lost(self, error: str) -> None:
        if not self._stopping.is_set():
            self.events.put(NodeEvent(self.node, "lost", {"error": error}))

    def _run(self) -> None:
        try:
            # Its own session: a ^C on the terminal reaches the watch, which ends every node
            # in order, not each transport at once with a traceback.
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        except OSError as exc:
            self._lost(f"could not run {self.argv()[0]}: {exc.strerror}")
            return
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        reader = threading.Thread(target=self._keep_stderr, args=(proc.stderr,), daemon=True)
        reader.start()
        if self.local:  # nothing to ship to this machine
            proc.stdin.close()
        ended = self._converse(proc)
        rc = proc.wait()
        reader.join(timeout=5)  # the transport's last words say why it ended
        if ended or self._stopping.is_set():
            return
        stderr = self._stderr.decode(errors="replace")
        if self.transport.unreachable_rc is not None and rc == self.transport.unreachable_rc:
            self._lost(self.transport.what_failed(rc, stderr))
        elif rc == NO_PYTHON:
            self._lost(hangscope_error(stderr) or "could not unpack hangscope there")
        else:
            self._lost(hangscope_error(stderr) or (
                f"its watcher on this machine stopped (exit status {rc})" if self.local
                else f"its watcher stopped ({self.transport.what_failed(rc, stderr)})"))

    def _converse(self, proc: subprocess.Popen[bytes]) -> bool:
        """Ship if asked, then pass on every line; True when the node said its job ended."""
        assert proc.stdin is not None and proc.stdout is not None
        ended = False
        try:
            for raw in proc.stdout:
                line = raw.strip()
                if line == HELLO_SEND.encode():
                    with contextlib.suppress(BrokenPipeError):
                        proc.stdin.write(bundle())
                if line in (HELLO_SEND.encode(), HELLO_INSTALLED.encode()):
                    with contextlib.suppress(BrokenPipeError):
                        proc.stdin.close()
                    continue
                try:
                    data = json.loads(line)
                except ValueError:
                    continue  # not an event (a login banner, a warning)
                if isinstance(data, dict) and isinstance(data.get("event"), str):
                    event = str(data.pop("event"))
                    ended = ended or event == "ended"
                    self.events.put(NodeEvent(self.node, event, data))
        except HangscopeError as exc:  # nothing to ship (no py-spy here)
            self._lost(exc.message)
            proc.kill()
        finally:
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.close()
        return ended

    def _keep_stderr(self, stream: object) -> None:
        for raw in stream:  # type: ignore[attr-defined]
            self._stderr += raw
            del self._stderr[:-STDERR_KEPT]
