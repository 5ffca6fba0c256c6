"""`rlvr sweep`: an ablation (arms x seeds, then a comparison) run from one spec file.

- :mod:`.spec`: the spec's schema, reading it with line numbers, expanding it into runs (each arm's
  recipe loaded and validated before anything runs).
- :mod:`.state`: what each run directory already holds (new, finished, to resume, to extend).
- :mod:`.preflight`: every path the sweep writes and every run's process count, checked before it writes.
- :mod:`.runner`: checks the disk, locks the output (:mod:`.lock`), opens the backend, runs the pool.
- :mod:`.pool`: one pool of slots for every plan: what starts when, what ended how, each plan's
  comparison; :mod:`.commands` (each job's command line), :mod:`.record` (sweep.json), :mod:`.builds`
  (the built-in models built first), :mod:`.continuation` (runs that start from another's steps).
- :mod:`.backend`: the interface of where jobs run, implemented by :mod:`.local` (this machine's
  slots, runs forked from :mod:`.forkserver`) and :mod:`.ray_backend` (a Ray task per run); :mod:`.watch`
  stops the runs of a sweep that was killed.
- :mod:`.view`: the progress across runs.

Each run is `python -m rlvr_cli train BASE --out OUT/<arm>-seed<k> --set ...` (with `--resume` when
its directory holds a run): the sweep schedules processes and never trains in its own process, which
imports no torch (planning and `--dry-run` included; each comparison is a process of its own). A local
sweep does run torch beside it: by default the local backend forks each run from a server process that
imported torch once (:mod:`.forkserver`; `--no-fork-server` starts fresh processes instead).
"""
