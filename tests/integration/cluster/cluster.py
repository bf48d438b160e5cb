"""A real multi-node cluster on one machine: "nodes" made of Linux namespaces.

Each node is a network namespace (``ip netns``) plus PID, UTS and mount namespaces
(``unshare``): its own hostname (``node01``...), its own /proc, a private /tmp and /run/sshd,
an /etc/hosts naming every node, a veth link to a bridge that lives in a "switch" namespace of
its own (10.200.0.0/24 exists only inside namespaces made here; the root namespace gets no
address and no route), a real OpenSSH server with key-only auth (a key made for this cluster),
and its part of a real multi-node torchrun gloo job (``--nnodes N --rdzv-backend c10d
--rdzv-endpoint node01:29400``) that hangs with mismatched collectives across nodes.

Needs root. ``Cluster`` is a context manager: teardown kills every node's PID-namespace init
(which takes every process of the node with it) and deletes the namespaces, even on failure.

By hand::

    python tests/integration/cluster/cluster.py --nodes 3   # up, print how to enter, wait
    (Ctrl-C tears it down)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
SUBNET = "10.200.0"
RDZV_PORT = 29400

_SSHD_CONFIG = """\
ListenAddress {address}
Port 22
HostKey {base}/hostkey
PidFile /run/sshd/sshd.pid
AuthorizedKeysFile {base}/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PrintMotd no
LogLevel ERROR
"""

# PID 1 of the node's PID namespace: private mounts, sshd, the node's share of the job.
_INIT = """\
set -e
hostname {name}
mkdir -p {base}/{name}/host-tmp && mount --bind /tmp {base}/{name}/host-tmp
mount -t tmpfs -o mode=1777 tmpfs /tmp
{keep}
mkdir -p /run/sshd && mount -t tmpfs -o mode=0755 tmpfs /run/sshd
mount --bind {base}/hosts /etc/hosts
mount --bind {base}/ssh /root/.ssh
ip link set lo up
/usr/sbin/sshd -f {base}/{name}/sshd_config -E {base}/{name}/sshd.log
touch {base}/{name}/up
cd {base}/{name}
{job}
wait
"""

# The node's share of the job: torchrun's agent, which rendezvouses with the other nodes.
_TORCHRUN = """\
GLOO_SOCKET_IFNAME=eth0 {python} -m torch.distributed.run --nnodes {nnodes} \\
  --nproc-per-node {nproc} --rdzv-backend c10d --rdzv-endpoint {first}:{port} \\
  --rdzv-id {run_id} --max-restarts 0 {worker} {base}/ready > torchrun.log 2>&1 &"""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=30)


class Cluster:
    """``nodes`` namespace nodes running sshd and a hung ``nproc``-ranks-per-node torchrun job."""

    def __init__(self, nodes: int = 3, nproc: int = 2, python: str | None = None) -> None:
        if os.geteuid() != 0:
            raise PermissionError("the namespace cluster needs root (namespaces, veth, mounts)")
        self.nnodes, self.nproc = nodes, nproc
        # The interpreter running the tests (CI's venv, or the checkout's .venv).
        self.python = python or sys.executable
        self.tag = secrets.token_hex(3)
        self.names = [f"node{i:02d}" for i in range(1, nodes + 1)]
        self.addresses = {n: f"{SUBNET}.{10 + i}" for i, n in enumerate(self.names, 1)}
        self.switch = f"hs{self.tag}sw"
        # Not under /tmp: every node mounts its own /tmp and must still see this directory.
        self.base = Path(tempfile.mkdtemp(prefix=f"hscluster-{self.tag}-", dir="/var/tmp"))
        self.inits: dict[str, subprocess.Popen[bytes]] = {}
        self._netns: list[str] = []

    # -- naming ---------------------------------------------------------------------------
    def netns(self, name: str) -> str:
        return f"hs{self.tag}{name}"

    def init_pid(self, name: str) -> int:
        """Host PID of the node's PID-namespace init (the child ``unshare --fork`` made)."""
        unshare = self.inits[name].pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            children = Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()
            if children:
                return int(children[0])
            time.sleep(0.02)
        raise RuntimeError(f"{name}: unshare made no init process")

    def nsenter(self, name: str) -> list[str]:
        """Argv prefix that runs a command on ``name`` (all its namespaces, cwd /)."""
        return ["nsenter", "-t", str(self.init_pid(name)), "-n", "-p", "-u", "-m", "--wd=/"]

    def run_on(self, name: str, *argv: str, timeout: float = 120,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.nsenter(name), *argv], capture_output=True, text=True,
                              timeout=timeout, env=env)

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Cluster:
        try:
            self._write_files()
            self._network()
            for name in self.names:
                self._start_node(name)
            self._wait_up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_files(self) -> None:
        base = self.base
        (base / "ready").mkdir()
        ssh = base / "ssh"
        ssh.mkdir(mode=0o700)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hscluster", "-f",
             str(ssh / "id_ed25519"))
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / "hostkey"))
        shutil.copy(ssh / "id_ed25519.pub", base / "authorized_keys")
        host_pub = (base / "hostkey.pub").read_text().split()[:2]
        known = ",".join(n for n in self.names) + "," + ",".join(self.addresses.values())
        (ssh / "known_hosts").write_text(f"{known} {' '.join(host_pub)}\n")
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{a} {n}\n" for n, a in self.addresses.items())
        (base / "hosts").write_text(hosts)
        for name in self.names:
            node = base / name
            node.mkdir()
            (node / "sshd_config").write_text(
                _SSHD_CONFIG.format(address=self.addresses[name], base=base))
            (node / "init.sh").write_text(_INIT.format(
                name=name, base=base, job=self.node_job(name), keep=self._keep_tmp(node)))
        Path("/root/.ssh").mkdir(mode=0o700, exist_ok=True)  # the bind-mount target only

    def _keep_tmp(self, node: Path) -> str:
        """Lines of init.sh that keep the checkout and the Python environment visible when they
        live under /tmp (CI's clone and venv may), which the node replaces with its own."""
        wanted = {str(REPO), sys.prefix, sys.base_prefix,
                  str(Path(self.python).parent.parent)}
        lines = []
        for path in sorted(p for p in wanted if p.startswith("/tmp/")):
            inner = path.removeprefix("/tmp/")
            lines.append(f"mkdir -p {path} && mount --bind {node}/host-tmp/{inner} {path}")
        return "\n".join(lines)

    def torchrun_command(self) -> str:
        """This node's torchrun agent, started in the background from the node's directory."""
        return _TORCHRUN.format(
            base=self.base, python=self.python, nnodes=self.nnodes, nproc=self.nproc,
            first=self.names[0], port=RDZV_PORT, run_id=f"hscluster{self.tag}",
            worker=HERE / "worker.py")

    def node_job(self, name: str) -> str:
        """What the node's init starts after sshd (a subclass starts Slurm daemons instead)."""
        return self.torchrun_command()

    def _network(self) -> None:
        _run("ip", "netns", "add", self.switch)
        self._netns.append(self.switch)
        sw = ["ip", "-n", self.switch]
        _run(*sw, "link", "add", "br0", "type", "bridge")
        _run(*sw, "link", "set", "br0", "up")
        for i, name in enumerate(self.names, 1):
            ns = self.netns(name)
            _run("ip", "netns", "add", ns)
            self._netns.append(ns)
            # Both ends are created inside the switch namespace: no interface ever appears
            # in the root namespace, even for a moment.
            _run(*sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0")
            _run(*sw, "link", "set", "eth0", "netns", ns)
            _run(*sw, "link", "set", f"p{i}", "master", "br0", "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.addresses[name]}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    def _start_node(self, name: str) -> None:
        log = open(self.base / name / "init.log", "wb")  # noqa: SIM115 -- lives with the node
        self.inits[name] = subprocess.Popen(
            ["ip", "netns", "exec", self.netns(name), "unshare", "--pid", "--fork",
             "--kill-child", "--uts", "--mount", "--mount-proc", "--propagation", "private",
             "bash", str(self.base / name / "init.sh")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def _wait_up(self, timeout: float = 60) -> None:
        """Until every node's init has made its mounts and started sshd (its ``up`` file): a
        command entering a node before that sees the host's /tmp hidden and CI's venv gone."""
        deadline = time.monotonic() + timeout
        while not all((self.base / n / "up").exists() for n in self.names):
            for name, proc in self.inits.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} died: {self.log(name)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the nodes' init did not finish in {timeout:.0f} s: "
                                   + "; ".join(f"{n}: {self.log(n)[-400:]}" for n in self.names))
            time.sleep(0.05)

    def wait_ready(self, timeout: float = 150) -> dict[int, dict[str, object]]:
        """Poll until every rank wrote its ready file; returns rank -> {host, pid, op}."""
        world = self.nnodes * self.nproc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            files = list((self.base / "ready").glob("rank*.json"))
            if len(files) == world:
                # Ready files are written just before the blocking call; give it a moment
                # only through the caller's own sampling window, never a sleep here.
                return {int(f.stem[4:]): json.loads(f.read_text()) for f in files}
            for name, proc in self.inits.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} died: {self.log(name)}")
            time.sleep(0.2)
        raise TimeoutError(f"only {len(files)} of {world} ranks ready after {timeout:.0f} s; "
                           + "; ".join(f"{n}: {self.log(n)[-800:]}" for n in self.names))

    def log(self, name: str) -> str:
        parts = []
        # every job's torchrun log too (a test that starts its own job names it after the job)
        for path in [self.base / name / "init.log", *sorted((self.base / name).glob(
                "torchrun*.log")), self.base / name / "sshd.log"]:
            if path.exists():
                parts.append(f"[{path.name}] " + path.read_text(errors="replace")[-1500:])
        return "\n".join(parts)

    def stop_sshd(self, name: str) -> None:
        """Stop one node's sshd (its job keeps running): that node no longer answers ssh."""
        result = self.run_on(name, "sh", "-c", "kill $(cat /run/sshd/sshd.pid)", timeout=10)
        if result.returncode != 0:
            raise RuntimeError(f"could not stop sshd on {name}: {result.stderr}")

    def close(self) -> None:
        for proc in self.inits.values():
            if proc.poll() is None:
                # SIGKILL to unshare: --kill-child kills the node's init, and the death of a
                # PID namespace's init kills every process in it (ranks, agents, sshd).
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for ns in reversed(self._netns):
            _run("ip", "netns", "del", ns, check=False)
        self._netns.clear()
        shutil.rmtree(self.base, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    with Cluster(args.nodes, args.nproc) as cluster:
        ranks = cluster.wait_ready()
        for rank in sorted(ranks):
            print(f"rank {rank}: {ranks[rank]}")
        print(f"enter a node: {' '.join(cluster.nsenter(cluster.names[0]))} bash")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
