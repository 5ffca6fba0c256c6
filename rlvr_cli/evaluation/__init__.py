"""Evaluation: the control signal read beside training (docs/design.md §4).

- :mod:`.core`: ``evaluate_policy`` -> the eval record (pass@k, maj@k, lengths, truncation, ...); the
  trainer (``train/evalhook.py``) and ``rlvr eval`` both call it, so their numbers agree.
- :mod:`.decoding`: how responses are drawn: sampling, greedy, budget forcing, minimum thinking.
- :mod:`.settings`: the protocol (a run's own eval settings, flag overrides) and its label.
- :mod:`.runs`: which weights a run directory evaluates (base + checkpoints), and with what scorer.
- :mod:`.plot`: pass@k against k (log2) for the base and each checkpoint.
"""
