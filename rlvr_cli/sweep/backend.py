"""Where a sweep's jobs run: the interface every backend implements, and the lookup of one by name.

A backend runs :class:`Job` s (one `rlvr train` process each, or a `--script`): it starts them, says
which have ended, stops them resumably (as Ctrl-C stops `rlvr train`) and closes. The pool
(:mod:`rlvr_cli.sweep.pool`) decides what runs when; a backend decides only where and how. A new
backend is one module with one subclass of :class:`Backend`, named in :data:`BACKENDS`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rlvr_cli.errors import UserError

GRACE_S = 30.0
"""How long an interrupted run may take to record itself before its processes are killed."""
BACKENDS = {
    "local": "rlvr_cli.sweep.local:LocalBackend",
    "ray": "rlvr_cli.sweep.ray_backend:RayBackend",
}
"""`--backend NAME` -> the class (``module:Class``, imported when chosen: Ray only when asked for)."""


@dataclass
class Job:
    """One run's `rlvr train` invocation (or a `--script`) and what it asks of the machine."""

    name: str
    argv: list[str]
    """The arguments after `python -m rlvr_cli` (`train BASE --out DIR --set ...`)."""
    log: Path
    cpus: int
    gpus: float = 0
    env: dict[str, str] = field(default_factory=dict)
    """Added to the environment of the run's process (its thread count)."""
    command: list[str] | None = None
    """A whole command line instead of `python -m rlvr_cli ARGV` (a `--script` of the sweep)."""


Ended = tuple[str, "int | None", "str | None"]
"""A job that ended: (its name, its exit status or None, why the backend itself failed it or None)."""


@dataclass
class Settings:
    """How to open a backend (the `rlvr sweep` flags; each backend takes what concerns it)."""

    address: str | None = None
    """`--address`: the cluster to join (a backend with ``takes_address``)."""
    timeout: float | None = None
    """Seconds to wait for that address to answer (None: the backend's default)."""
    fork: bool = True
    """Local runs forked from a warm server (not `--no-fork-server`)."""
    hold: tuple[int, ...] = ()
    """Descriptors of the sweep's locks, kept open by what stops the runs should the sweep be killed."""


class Backend(ABC):
    """Runs jobs somewhere; every method but :meth:`start` may be called with nothing running."""

    name: ClassVar[str]
    takes_address: ClassVar[bool] = False
    """Joins a cluster at `--address`."""
    on_this_machine: ClassVar[bool] = False
    """Runs on this machine: `--script` commands and the built-in model builds can share its slots."""

    @classmethod
    def check(cls, settings: Settings) -> None:
        """Refuse (``UserError``) what can be found wrong before the sweep writes anything."""

    @classmethod
    @abstractmethod
    def default_jobs(cls, cpus: list[int]) -> int:
        """Jobs at once when `--jobs` is not given, from the CPUs each planned run asks for."""

    @classmethod
    @abstractmethod
    def open(cls, settings: Settings) -> Backend:
        """A backend ready to start jobs."""

    @abstractmethod
    def start(self, job: Job) -> None:
        """Start ``job``; OSError when its log cannot be written (the job then fails alone)."""

    @abstractmethod
    def poll(self) -> list[Ended]:
        """Every job that ended since the last call."""

    @abstractmethod
    def interrupt(self, grace: float = GRACE_S) -> list[str]:
        """Stop every running job as Ctrl-C does (each stays resumable); their names."""

    @abstractmethod
    def close(self) -> None:
        """Stop what still runs and let go of what the backend holds."""


def backend_class(name: str) -> type[Backend]:
    """The backend called ``name``, or ``UserError`` naming those there are."""
    where = BACKENDS.get(name)
    if where is None:
        raise UserError(f"--backend {name}: expected {' or '.join(BACKENDS)}")
    module, cls = where.split(":")
    return getattr(importlib.import_module(module), cls)


def check_flags(kind: type[Backend], address: str | None, scripts: bool) -> None:
    """`--address` and `--script` only with a backend that takes them (exit 2 otherwise)."""
    def those(wanted) -> str:
        return " or ".join(f"--backend {n}" for n in BACKENDS if wanted(backend_class(n)))

    if address is not None and not kind.takes_address:
        raise UserError(f"--address: only with {those(lambda k: k.takes_address)}")
    if scripts and not kind.on_this_machine:
        raise UserError(f"--script: only with {those(lambda k: k.on_this_machine)}")
