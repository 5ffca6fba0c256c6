"""What every exporter returns: the target's settings plus one warning per knob it cannot carry exactly.
Its own module so the exporters import it without importing the package that dispatches to them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Export:
    target: str
    settings: dict
    """TRL: the ``GRPOConfig`` keyword arguments. verl: Hydra overrides, dotted key -> value."""
    warnings: list[str] = field(default_factory=list)
    """One line per knob that is not carried exactly: ``rlvr.field: what the target does instead``."""
    notes: list[str] = field(default_factory=list)
    """What the user must still do (model path, reward function): not a loss of fidelity."""


class Warnings(list):
    """Collects ``field: message`` lines."""

    def add(self, field_name: str, message: str) -> None:
        self.append(f"{field_name}: {message}")
