"""`rlvr sweep`: an ablation (arms x seeds, then a comparison) run from one spec file.

- :mod:`.spec`: the spec's schema, reading it with line numbers, expanding it into runs (each arm's
  recipe loaded and validated before anything runs).
- :mod:`.state`: what each run directory already holds (new, finished, to resume, to extend).
- :mod:`.runner`: runs the plan through a backend, keeps going past a failed run, stops cleanly on
  Ctrl-C, then compares.
- :mod:`.local` / :mod:`.ray_backend`: where a run's `rlvr train` process runs (this machine's slots,
  or a Ray task with its CPU/GPU request).
- :mod:`.view`: the progress across runs.

Each run is `python -m rlvr_cli train BASE --out OUT/<arm>-seed<k> --set ...` (with `--resume` when
its directory holds a run): the sweep schedules processes and never trains in its own process, so it
imports no torch.
"""
