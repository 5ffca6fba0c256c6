"""Tools in the loop: environments in TRL's shape, the tool-call protocols, and the contract between an
environment and the multi-turn sampler (:mod:`.protocol`). docs/tools.md."""
