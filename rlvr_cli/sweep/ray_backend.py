"""The Ray backend: each run a Ray task that asks for its CPUs (threads x processes) and GPUs and runs the
same `python -m rlvr_cli train` process the local backend runs, on whichever node Ray places it.

Run directories and logs are written by the node that runs the task, so ``--out`` must be a path every
node sees (a shared file system); the sweep reads the runs' progress from the same path. A run that
asks for several processes (`nproc:`) starts torchrun inside its task (`rlvr train --nproc`).

Joining a cluster (``--address``) first checks that the address answers: a TCP connection, then
`ray.init` in a child process (``python -m rlvr_cli.sweep.ray_backend ADDRESS``) killed after the
timeout, because `ray.init` on an address with no Ray behind it waits far longer than a user would.
Without an address a Ray instance is started on this machine (or the one this process already
started is used). Tasks are not retried by Ray: a failed run is reported and resumed by the next sweep.
Each task has its run's process group watched (:mod:`.watch`): should Ray kill the task's worker (the
sweep killed, a forced cancel), the run stops as Ctrl-C stops it rather than train on detached.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.sweep.backend import GRACE_S, Backend, Ended, Job, Settings
from rlvr_cli.sweep.local import spawn, stop
from rlvr_cli.sweep.watch import Watcher

CONNECT_TIMEOUT_S = 60.0
"""How long joining a cluster may take before the sweep gives up on the address (exit 2)."""


def run_in_task(argv: list[str], log_path: str, env: dict[str, str]) -> int:
    """The body of a run's Ray task: the run's process, waited for; a cancelled task (Ray raises
    KeyboardInterrupt in it) stops the process as Ctrl-C does locally, leaving the run resumable."""
    proc, log = spawn(argv, Path(log_path), env)
    watcher = Watcher(GRACE_S)
    watcher.add(proc.pid)
    try:
        while True:  # short waits: Ray delivers its KeyboardInterrupt between Python bytecodes, not inside one wait
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
    except KeyboardInterrupt:
        log.write("== the Ray task was cancelled: stopping the run (it resumes from its last checkpoint)\n")
        log.flush()
        stop([proc])
        raise
    finally:
        watcher.close()
        log.close()


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of `HOST:PORT` or `ray://HOST:PORT` (Ray's default ports when none is given)."""
    if address in ("auto", "local"):
        return None
    client = address.startswith("ray://")
    rest = address.removeprefix("ray://").split("/", 1)[0]
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    try:
        return host.strip("[]") or "127.0.0.1", int(port) if port else (10001 if client else 6379)
    except ValueError:
        raise UserError(f"--address {address}: expected HOST:PORT, ray://HOST:PORT or auto") from None


def check_address(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise UserError naming ``address`` unless a Ray cluster answers there within ``timeout`` seconds."""
    hp = _host_port(address)
    if hp is not None:
        try:
            socket.create_connection(hp, timeout=min(timeout, 10.0)).close()
        except OSError as e:
            raise UserError(f"--address {address}: no Ray cluster answers there ({e.strerror or e})") from None
    try:
        probe = subprocess.run([sys.executable, "-m", "rlvr_cli.sweep.ray_backend", address], capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError(f"--address {address}: no Ray cluster answered within {timeout:g} s") from None
    if probe.returncode != 0:
        lines = [ln for ln in (probe.stderr or probe.stdout).splitlines() if ln.strip()]
        raise UserError(f"--address {address}: cannot join the Ray cluster: {lines[-1] if lines else probe.returncode}")


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray: Ray is not installed; "
                        "pip install 'rlvr-cli[ray]' (or pip install ray)") from None
    return ray


class RayBackend(Backend):
    """Runs jobs as Ray tasks on the cluster at ``address`` (None: a Ray instance on this machine)."""

    name = "ray"
    takes_address = True

    def __init__(self, address: str | None = None):
        """Join the cluster at ``address`` (probed first by :meth:`check`) or start Ray here."""
        ray = _ray()
        self.ray = ray
        self._started = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise UserError(f"--address {address}: cannot join the Ray cluster: {e}") from None
            self._started = True
        self._remote = ray.remote(max_retries=0)(run_in_task)
        self._refs: dict[str, object] = {}

    @classmethod
    def check(cls, settings: Settings) -> None:
        """Ray installed, and a cluster answering at the address (when one is given)."""
        if not _ray().is_initialized() and settings.address is not None:
            check_address(settings.address, CONNECT_TIMEOUT_S if settings.timeout is None else settings.timeout)

    @classmethod
    def default_jobs(cls, cpus: list[int]) -> int:
        """Every run: Ray queues the tasks its cluster cannot place yet."""
        return max(1, len(cpus))

    @classmethod
    def open(cls, settings: Settings) -> RayBackend:
        return cls(settings.address)

    def start(self, job: Job) -> None:
        opts = {"num_cpus": job.cpus, "num_gpus": job.gpus, "name": f"rlvr train {job.name}"}
        self._refs[job.name] = self._remote.options(**opts).remote(job.argv, str(job.log), job.env)

    def poll(self) -> list[Ended]:
        """(name, exit status or None, why the task itself failed) of every task that ended."""
        if not self._refs:
            return []
        ready, _ = self.ray.wait(list(self._refs.values()), num_returns=len(self._refs), timeout=0)
        ended = []
        for name, ref in list(self._refs.items()):
            if ref in ready:
                del self._refs[name]
                try:
                    ended.append((name, self.ray.get(ref), None))
                except self.ray.exceptions.RayError as e:
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    ended.append((name, None, f"the Ray task failed: {type(e).__name__}: {first}"))
        return ended

    def interrupt(self, grace: float = GRACE_S) -> list[str]:
        """Cancel every task (each stops its run as Ctrl-C does); tasks that do not end within ``grace``
        are force-cancelled. Returns their names."""
        names, refs = list(self._refs), list(self._refs.values())
        for ref in refs:
            self.ray.cancel(ref)
        if refs:
            _, left = self.ray.wait(refs, num_returns=len(refs), timeout=grace + 5)
            for ref in left:
                self.ray.cancel(ref, force=True)
        self._refs.clear()
        return names

    def close(self) -> None:
        self.interrupt()
        if self._started:
            self.ray.shutdown()


if __name__ == "__main__":  # the address probe of check_address
    import ray

    ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False)
    ray.shutdown()
