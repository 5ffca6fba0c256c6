"""The progress of a sweep: one line for the whole (runs done / running / failed / queued, steps of all
runs, ETA) and one bar per running run (its steps from its metrics.jsonl), on a terminal; a line per
start and end of a run otherwise (a log file, a CI job)."""

from __future__ import annotations

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rlvr_cli.console import console


class SweepView:
    def __init__(self, total_steps: int, done_steps: int, runs: int, skipped: int):
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
            console=console, transient=False, disable=not console.is_terminal,
        )
        self.counts = {"done": skipped, "running": 0, "failed": 0, "queued": runs - skipped}
        self.total = self.progress.add_task("sweep", total=total_steps, completed=done_steps, status=self._status())
        self.bars: dict[str, int] = {}
        self.steps: dict[str, int] = {}

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

    def ended(self, name: str, ok: bool, seconds: float, detail: str = "") -> None:
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
