"""A real single-node SLURM cluster (munged, slurmctld, slurmd) on loopback, for tests.

Every daemon runs in a private network namespace held by ``unshare --net sleep
infinity``, so the fixed SLURM ports never meet another test run's. Clients (``sinfo``,
``sbatch``, ``scancel``, a Python process running a Dask client) join it through
`SlurmCluster.command`. Needs root and Debian's ``slurmctld slurmd slurm-client munge``;
`unavailable_reason` says why it cannot run here.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED_PROGRAMS = ("slurmctld", "slurmd", "sinfo", "sbatch", "squeue", "scancel", "munged",
                     "unshare", "nsenter", "ip", "runuser")
MUNGE_KEY = Path("/etc/munge/munge.key")
#: Set (by CI) to turn "SLURM cannot start here" from a skip into a failure.
REQUIRE_ENV = "GLYPHFORGE_REQUIRE_SLURM"

_CONF = """\
ClusterName=glyphforge-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MinJobAge=900
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=8000
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def unavailable_reason() -> str | None:
    """Return why a SLURM test cluster cannot start on this machine, or None if it can."""
    if os.geteuid() != 0:
        return "the SLURM test cluster needs root (it runs slurmd and a network namespace)"
    missing = [name for name in REQUIRED_PROGRAMS if shutil.which(name) is None]
    if missing:
        return (f"programs not found: {', '.join(missing)}; install SLURM with `apt-get install -y "
                "--no-install-recommends slurmctld slurmd slurm-client munge` (unshare, nsenter, runuser: "
                "util-linux; ip: iproute2)")
    if not MUNGE_KEY.is_file():
        return f"{MUNGE_KEY} is missing (the munge package creates it)"
    return None


@dataclass
class SlurmCluster:
    """A running test cluster: run client commands inside its network namespace."""

    root: Path
    holder: subprocess.Popen
    daemons: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """``os.environ`` plus ``SLURM_CONF`` pointing at this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def command(self, *args: str) -> list[str]:
        """Return ``args`` prefixed to run inside the cluster's network namespace."""
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--", *args]

    def run(self, *args: str, timeout: float = 30) -> str:
        """Run a command in the namespace with this cluster's config; return its stdout."""
        done = subprocess.run(self.command(*args), env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def job_ids(self) -> list[str]:
        """Return the ids of running jobs."""
        return self.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").split()

    def submitted_ids(self) -> set[str]:
        """Return the ids of every job slurmctld knows: queued, running, or ended in the last ``MinJobAge`` seconds."""
        listing = self.run("scontrol", "-o", "show", "job")
        return {field.removeprefix("JobId=") for line in listing.splitlines() for field in line.split()[:1]
                if field.startswith("JobId=")}

    def log_tail(self, lines: int = 30) -> str:
        """Return the end of the daemons' logs (for error messages)."""
        parts = []
        for name in ("munge/munged.log", "slurmctld.log", "slurmd.log"):
            path = self.root / name
            if path.exists():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)


def _start(cluster: SlurmCluster, *args: str, user: str | None = None) -> subprocess.Popen:
    prefix = ["runuser", "-u", user, "--"] if user else []
    process = subprocess.Popen(cluster.command(*prefix, *args), env=cluster.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    cluster.daemons.append(process)
    return process


def _wait_until(check, what: str, cluster: SlurmCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"SLURM test cluster: {what} within {timeout} s\n{cluster.log_tail()}")
        for daemon in cluster.daemons:
            if daemon.poll() is not None:
                raise RuntimeError(f"SLURM test cluster: {daemon.args[-6:]} exited with "
                                   f"{daemon.returncode} while waiting for {what}\n{cluster.log_tail()}")
        time.sleep(0.1)


def _node_idle(cluster: SlurmCluster) -> bool:
    try:
        return cluster.run("sinfo", "-h", "-o", "%T", timeout=10).strip() == "idle"
    except (RuntimeError, subprocess.TimeoutExpired):
        return False


def _stop(process: subprocess.Popen, timeout: float = 5) -> None:
    """SIGTERM the process group, SIGKILL it on timeout."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout)
            break
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _cancel_all_jobs(cluster: SlurmCluster, timeout: float = 10) -> None:
    """scancel every job and wait for the queue to drain (job steps outlive slurmd)."""
    try:
        cluster.run("scancel", "--user", "root", timeout=timeout)
        deadline = time.monotonic() + timeout
        while cluster.run("squeue", "-h", "-o", "%i", timeout=timeout).split():
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)
    except (RuntimeError, subprocess.TimeoutExpired):
        pass  # the daemons are already broken: their teardown follows


@contextmanager
def slurm_cluster(cpus: int = 2) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd in a private network namespace; stop them after.

    State lives in a fresh directory under the system temp dir (munged, running as
    the munge user, must reach its socket: pytest's tmp dirs are private to root).
    """
    root = Path(tempfile.mkdtemp(prefix="glyphforge-slurm-"))
    root.chmod(0o755)
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"], start_new_session=True)
    cluster = SlurmCluster(root=root, holder=holder)
    try:
        own_ns = os.readlink("/proc/self/ns/net")
        _wait_until(lambda: os.readlink(f"/proc/{holder.pid}/ns/net") != own_ns,
                    "the network namespace did not appear", cluster, 10)
        cluster.run("ip", "link", "set", "lo", "up")
        # slurmctld needs an address glibc counts as configured besides 127.0.0.1.
        cluster.run("ip", "addr", "add", "127.0.0.2/8", "dev", "lo")

        munge_dir = root / "munge"
        munge_dir.mkdir(mode=0o755)
        munge = pwd.getpwnam("munge")
        os.chown(munge_dir, munge.pw_uid, munge.pw_gid)
        socket = munge_dir / "munge.socket"
        _start(cluster, "munged", "--foreground", f"--socket={socket}", f"--key-file={MUNGE_KEY}",
               f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={munge_dir / 'munged.log'}",
               f"--seed-file={munge_dir / 'munged.seed'}", user="munge")
        _wait_until(socket.exists, "munged did not create its socket", cluster, 10)

        for name in ("state", "spool"):
            (root / name).mkdir()
        cluster.conf.write_text(_CONF.format(root=root, munge_socket=socket, cpus=cpus))
        _start(cluster, "slurmctld", "-D", "-i", "-f", str(cluster.conf))
        _start(cluster, "slurmd", "-D", "-N", "localhost", "-f", str(cluster.conf))
        _wait_until(lambda: _node_idle(cluster), "the node did not become idle", cluster, 30)
        yield cluster
    finally:
        if cluster.daemons:
            _cancel_all_jobs(cluster)
        for daemon in reversed(cluster.daemons):
            _stop(daemon)
        _stop(holder)
        shutil.rmtree(root, ignore_errors=True)
