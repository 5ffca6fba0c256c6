"""The progress of a sweep: one line for the whole (runs done / running / failed / queued, steps of all
runs, ETA) and one bar per running run (its steps and last reward from its metrics.jsonl), on a terminal;
otherwise (a log file, a CI job) a line per start and end of a run and, every ``PROGRESS_EVERY_S``
seconds, one per running run: its step of its steps, its last mean reward and its ETA."""

from __future__ import annotations

import time

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rlvr_cli.console import console

PROGRESS_EVERY_S = 60.0
"""Off a terminal, how often each running run gets a progress line."""


def duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.5 h``: a time a person reads at a glance."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


class SweepView:
    def __init__(self, total_steps: int, done_steps: int, runs: int, skipped: int, every: float | None = None,
                 clock=time.monotonic):
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
            console=console, transient=False, disable=not console.is_terminal,
        )
        self.counts = {"done": skipped, "running": 0, "failed": 0, "queued": runs - skipped}
        self.total = self.progress.add_task("sweep", total=total_steps, completed=done_steps, status=self._status())
        self.bars: dict[str, int] = {}
        self.steps: dict[str, int] = {}
        self.every, self.clock = PROGRESS_EVERY_S if every is None else every, clock
        self.runs: dict[str, tuple[float, int, int]] = {}
        """A running run's (start time, step at its start, its steps)."""
        self.said: dict[str, float] = {}
        """When each running run last got a progress line (or started)."""

    def _status(self) -> str:
        return ", ".join(f"{v} {k}" for k, v in self.counts.items())

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, soft_wrap=True)

    def started(self, name: str, step: int, steps: int, how: str) -> None:
        self.counts["queued"] -= 1
        self.counts["running"] += 1
        self.steps[name] = step
        self.runs[name] = (self.clock(), step, steps)
        self.said[name] = self.clock()
        self.bars[name] = self.progress.add_task(name, total=steps, completed=step, status="")
        self.progress.update(self.total, status=self._status())
        self.note(f"\\[start] {escape(name)} ({how})")

    def stepped(self, name: str, step: int) -> None:
        """The run ``name`` has logged ``step`` (read from its metrics.jsonl)."""
        before = self.steps.get(name, 0)
        if name in self.bars and step > before:
            self.steps[name] = step
            self.progress.update(self.bars[name], completed=step)
            self.progress.advance(self.total, step - before)

    def running(self, name: str, step: int, reward: float | None) -> None:
        """A running run's progress: its bar (with its reward) on a terminal, else a line every ``every`` s."""
        self.stepped(name, step)
        if name not in self.runs:
            return
        if reward is not None and name in self.bars:
            self.progress.update(self.bars[name], status=f"reward {reward:.3g}")
        now = self.clock()
        if self.progress.disable and now - self.said[name] >= self.every:
            self.said[name] = now
            self.note(f"\\[progress] {escape(name)}: {self._line(name, step, reward, now)}")

    def _line(self, name: str, step: int, reward: float | None, now: float) -> str:
        """`step 40/200, reward 0.41, eta 12 min` (the ETA from this run's pace since it started here)."""
        t0, first, steps = self.runs[name]
        text = f"step {step}/{steps}" + (f", reward {reward:.3g}" if reward is not None else "")
        if step > first and steps > step:
            text += f", eta {duration((now - t0) / (step - first) * (steps - step))}"
        return text

    def ended(self, name: str, ok: bool, seconds: float, detail: str = "") -> None:
        self.runs.pop(name, None)
        if name in self.bars:
            self.progress.remove_task(self.bars.pop(name))
            self.counts["running"] -= 1
        else:
            self.counts["queued"] -= 1  # never started (its log could not be written)
        self.counts["done" if ok else "failed"] += 1
        self.progress.update(self.total, status=self._status())
        if ok:
            self.note(f"\\[done] {escape(name)} in {seconds:.0f} s")
        else:
            self.note(f"[red]\\[failed][/red] {escape(name)} after {seconds:.0f} s: {escape(detail)}")
