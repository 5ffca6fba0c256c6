"""rlvr_cli/train/rollouts/collect.py's RolloutSession: what collecting rollouts reads of a session, and
both sessions that collect (the trainer's, the overlapped sampler's) have it."""

import dataclasses
import typing

from rlvr_cli.train.rollouts.collect import RolloutSession
from rlvr_cli.train.rollouts.sampler_process import SamplerSession
from rlvr_cli.train.session import Session

READ = {"recipe", "model", "tokenizer", "autocast_dtype"}


def test_the_protocol_names_what_collecting_reads():
    assert set(typing.get_type_hints(RolloutSession)) == READ
    assert callable(RolloutSession.full_params)


def test_both_sessions_have_it():
    for cls in (Session, SamplerSession):
        fields = {f.name for f in dataclasses.fields(cls)}
        assert READ <= fields, (cls.__name__, READ - fields)
        assert callable(getattr(cls, "full_params", None)), cls.__name__
