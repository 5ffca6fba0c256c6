"""Optional tracker sinks beside ``metrics.jsonl``: TensorBoard, W&B (offline), trackio (local).

``metrics.jsonl`` stays the source of truth: every row is written there first, durably, and then
handed to the sinks the run's recipe chose (``trackers:`` in the recipe). The sinks of a run
directory are opened on its first row (from the ``recipe.yaml`` the run saved, so every caller of
``RunDir.append_metrics`` gets them) and closed when the run is marked finished or failed, or at exit.

Each row becomes scalars named as in ``metrics.jsonl`` (``outcomes`` becomes ``outcomes/correct``,
...); strings and nulls are left out. A sink that fails while logging prints one warning and is
dropped: a tracker must never stop a run. A package that is missing is an error naming its extra,
checked before training starts (:func:`check_trackers`).
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
import shutil
import sys
from pathlib import Path

import yaml

from rlvr_cli import run_files
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import TrackersSpec

TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
"""Recipe field -> the Python package it needs (the extra of the same name installs it)."""

_OPEN: dict[Path, list] = {}


def check_trackers(spec) -> None:
    """Raise UserError (exit 2) naming the extra for each chosen tracker whose package is missing."""
    problems = [
        f"trackers.{name}: the `{pkg}` package is not installed; install it with: pip install 'rlvr-cli[{name}]'"
        for name, pkg in TRACKERS.items()
        if getattr(spec, name) and importlib.util.find_spec(pkg) is None
    ]
    if problems:
        raise UserError(problems)


def scalars(row: dict) -> dict[str, float]:
    """The numbers of a metrics row (one level of nesting flattened with `/`), step excluded."""
    out: dict[str, float] = {}
    for k, v in row.items():
        if k == "step":
            continue
        if isinstance(v, dict):
            out.update({f"{k}/{kk}": float(vv) for kk, vv in v.items() if isinstance(vv, (int, float))})
        elif isinstance(v, (int, float)):
            out[k] = float(v)
    return out


def _writable_dir(path: Path) -> None:
    """Make ``path`` a directory rlvr can write in, or raise OSError saying why: a symbolic link or a
    special file there is refused (never written through), and a probe file is created and removed
    (TensorBoard's writer fails silently in its background thread, so the sink would claim to log)."""
    import stat
    import tempfile

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(parents=True)
    else:
        if stat.S_ISLNK(st.st_mode):
            raise OSError(f"{path} is a symbolic link; rlvr does not write through links")
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(f"{path} exists and is not a directory")
    fd, probe = tempfile.mkstemp(prefix=".probe-", dir=path)
    os.close(fd)
    os.unlink(probe)


class TensorBoardSink:
    def __init__(self, root: Path, spec, config: dict):
        from torch.utils.tensorboard import SummaryWriter

        _writable_dir(root / "tensorboard")
        self.writer = SummaryWriter(log_dir=str(root / "tensorboard"))

    def log(self, step: int, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, root: Path, spec, config: dict):
        import wandb

        self.run = wandb.init(
            mode="offline", dir=str(root), project=spec.project, name=root.name, config=config,
            reinit="create_new", settings=wandb.Settings(silent=True, console="off"),
        )

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log({k: v for k, v in values.items() if math.isfinite(v)}, step=step)

    def close(self) -> None:
        self.run.finish()


class TrackioSink:
    def __init__(self, root: Path, spec, config: dict):
        import trackio

        self.trackio = trackio
        self.run = trackio.init(project=spec.project, name=root.name, config=config, resume="allow", auto_log_cpu=False, auto_log_gpu=False)

    def log(self, step: int, values: dict[str, float]) -> None:
        self.trackio.log({k: v for k, v in values.items() if math.isfinite(v)}, step=step)

    def close(self) -> None:
        self.trackio.finish()


SINKS = {"tensorboard": TensorBoardSink, "wandb": WandbSink, "trackio": TrackioSink}


def _open(root: Path) -> list:
    try:
        config = yaml.safe_load((root / run_files.RECIPE).read_text(encoding="utf-8")) or {}
        spec = TrackersSpec.model_validate(config.get("trackers") or {})
    except Exception:  # noqa: BLE001 - no readable recipe: no sinks (metrics.jsonl is unaffected)
        return []
    check_trackers(spec)
    sinks = []
    for name, cls in SINKS.items():
        if getattr(spec, name):
            try:
                sinks.append(cls(root, spec, config))
            except Exception as e:  # noqa: BLE001 - a tracker must not stop the run
                _warn(f"trackers.{name}: could not start ({type(e).__name__}: {e}); not logging there")
    return sinks


def log_to_trackers(root: Path, row: dict) -> None:
    """Hand one metrics row to the run directory's sinks (opened on first use)."""
    root = Path(root)
    if root not in _OPEN:
        _OPEN[root] = _open(root)
    sinks = _OPEN[root]
    if not sinks or not isinstance(row.get("step"), int):
        return
    values = scalars(row)
    for sink in list(sinks):
        try:
            sink.log(row["step"], values)
        except Exception as e:  # noqa: BLE001 - a tracker must not stop the run
            _warn(f"{type(sink).__name__}: logging failed ({type(e).__name__}: {e}); dropped")
            sinks.remove(sink)


def close_trackers(root: Path) -> None:
    for sink in _OPEN.pop(Path(root), []):
        try:
            sink.close()
        except Exception as e:  # noqa: BLE001
            _warn(f"{type(sink).__name__}: closing failed ({type(e).__name__}: {e})")


def _close_all() -> None:
    for root in list(_OPEN):
        close_trackers(root)


atexit.register(_close_all)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


MADE_BY_COMPARE = ".rlvr-compare"
"""Marker file in each run directory ``write_tensorboard`` creates: its event files are rlvr's to replace."""


def _compare_run_dir(out: Path, name: str) -> Path:
    """``out/name`` as a directory whose old event files rlvr may replace: created here (and marked),
    or marked by an earlier compare. A symlink, a special file, or a directory rlvr did not make that
    holds event files is refused (UserError naming it): rlvr never deletes there."""
    import stat

    dest = out / name
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        dest.mkdir()
        (dest / MADE_BY_COMPARE).touch()
        return dest
    if stat.S_ISLNK(st.st_mode):
        raise UserError(f"--tensorboard {dest}: is a symbolic link; rlvr does not write or delete through links (remove it or choose another directory)")
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(f"--tensorboard {dest}: exists and is not a directory")
    marker = dest / MADE_BY_COMPARE
    if os.path.lexists(marker):
        if not os.path.isfile(marker) or os.path.islink(marker):
            raise UserError(f"--tensorboard {marker}: is not a regular file")
        return dest
    if any(dest.glob("events.out.tfevents.*")):
        raise UserError(f"--tensorboard {dest}: holds event files that `rlvr compare` did not write; not replacing them (choose another directory)")
    marker.touch()
    return dest


def write_tensorboard(runs, out_dir: str | Path) -> list[Path]:
    """Write the metrics of compared runs (rlvr's or imported) as TensorBoard event files, one
    sub-directory per run, so old runs can be browsed there: ``tensorboard --logdir OUT_DIR``.

    A run's directory is replaced only where an earlier compare made it (see ``_compare_run_dir``):
    every directory is checked before anything is written."""
    import tempfile

    check_trackers(TrackersSpec(tensorboard=True))
    from torch.utils.tensorboard import SummaryWriter

    out, names, used = Path(out_dir), [], set()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--tensorboard {out}: cannot create the directory ({e.strerror or e})") from None
    for run in runs:
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.name) or "run"
        if name in (".", ".."):
            name = "run"
        while name in used:
            name += "_"
        used.add(name)
        names.append(name)
    try:
        dests = [_compare_run_dir(out, name) for name in names]
    except OSError as e:
        raise UserError(f"--tensorboard {out}: cannot write there ({e.strerror or e})") from None
    written = []
    for run, dest in zip(runs, dests):
        # written beside (a fresh directory of its own), then put in place of the events an earlier
        # compare wrote there: run twice, a run's curve is replaced, not drawn twice (TensorBoard reads
        # every event file of a directory)
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out))
        except OSError as e:
            raise UserError(f"--tensorboard {out}: cannot write there ({e.strerror or e})") from None
        try:
            writer = SummaryWriter(log_dir=str(tmp))
            for step, row in run.metrics.iterrows():
                for key, value in row.items():
                    if value == value:  # skip NaN (not logged)
                        writer.add_scalar(str(key), float(value), int(step))
            writer.close()
            for old in dest.glob("events.out.tfevents.*"):
                if old.is_symlink() or old.is_file():
                    old.unlink()  # a link is removed itself, never its target
            for new in tmp.iterdir():
                os.replace(new, dest / new.name)
        except OSError as e:
            raise UserError(f"--tensorboard {dest}: cannot write there ({e.strerror or e})") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        written.append(dest)
    return written
