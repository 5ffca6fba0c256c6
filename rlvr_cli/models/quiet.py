"""Transformers and peft without the output that says nothing about the run (a module of its own so that
every loader can import it)."""

from __future__ import annotations

import warnings
from contextlib import contextmanager


def quiet_transformers() -> None:
    """No per-file progress bars from transformers ("Loading weights", "Writing model shards"):
    rlvr draws its own progress, and these would interleave with it on every checkpoint."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


@contextmanager
def quiet_peft():
    """peft reading transformers' deprecated ``is_gradient_checkpointing`` when it wraps a model (a
    FutureWarning about the two packages' versions, on every LoRA run). What peft warns about rlvr's own
    choices is prevented where rlvr makes them instead: ``fan_in_fan_out`` is set for GPT-2's Conv1D
    layers (:func:`rlvr_cli.train.reference.add_lora`) and a checkpoint says whether it saves the
    embeddings (:class:`rlvr_cli.models.adapter.AdapterCheckpoint`), so peft never looks for the base
    model's config.json on the Hub."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
