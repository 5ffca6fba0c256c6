"""Transformers without its own progress bars (a module of its own so that every loader can import it)."""

from __future__ import annotations


def quiet_transformers() -> None:
    """No per-file progress bars from transformers ("Loading weights", "Writing model shards"):
    rlvr draws its own progress, and these would interleave with it on every checkpoint."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
