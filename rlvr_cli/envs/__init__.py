"""Tools in the loop: environments in TRL's shape, the tool-call protocols, and the contract between an
environment and the multi-turn sampler (:mod:`.protocol`). docs/tools.md.

The trainer's one entry point is :func:`episode_factory` (``episode_factory(spec, tokenizer, model_name)``
returns ``row -> Episode``)."""

from rlvr_cli.envs.episode import ToolEpisode, episode_factory, problem_row

__all__ = ["ToolEpisode", "episode_factory", "problem_row"]
