"""Worker processes that cannot outlive or outgrow their purpose: the few system calls the verifier
pool and the chat-template renderer share (standard library only: anything may import it)."""

from __future__ import annotations

import os
import signal
import subprocess


def die_with_parent() -> None:
    """Ask the kernel to kill this process when its parent dies (Linux ``PR_SET_PDEATHSIG``; elsewhere a
    no-op), so that a worker stuck in C code never outlives the command that started it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


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
