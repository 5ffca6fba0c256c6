"""The base of every recipe section, its own module so that the schema and the objective registry
(:mod:`rlvr_cli.recipe.objectives`) both build on it without importing each other."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base of every recipe section: unknown keys are errors; attribute docstrings are field docs; every
    float refuses .inf and .nan (issue 28: a "no limit" is written null, never .inf)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True, allow_inf_nan=False)
