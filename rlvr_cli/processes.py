"""Worker processes that cannot outlive or outgrow their purpose: the few system calls the verifier
pool, the chat-template renderer and the overlapped trainer's sampler process share (standard library
only: anything may import it)."""

from __future__ import annotations

import os
import signal
import subprocess


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask the kernel to send this process ``sig`` when its parent dies (Linux ``PR_SET_PDEATHSIG``;
    elsewhere a no-op), so that a worker stuck in C code never outlives the command that started it.

    ``parent``: the pid the parent passed down; if this process's parent is already another (the parent
    died before the request was made, and the process was re-parented), exit now with status 1.
    """
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the caller's own end-of-input check stops it
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def limit_address_space(soft_bytes: int) -> None:
    """This process's soft address-space limit (an allocation past it is a MemoryError); the hard limit
    stays, so that a program started from here may set its own, possibly higher, soft limit."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (soft_bytes if hard == resource.RLIM_INFINITY else min(soft_bytes, hard), hard))


def kill_worker(proc: subprocess.Popen) -> None:
    """Kill a worker started with ``start_new_session=True`` and everything it started (its process
    group), close the pipes to it and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    proc.wait()
