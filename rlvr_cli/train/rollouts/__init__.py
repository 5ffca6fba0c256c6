"""train/rollouts: where a step's rollouts come from (docs/async.md).

- :mod:`.collect`: one step's rollouts, P prompts x G responses, sampled and scored (DAPO dynamic sampling);
- :mod:`.sources`: the seam the trainer asks for step t's batch: synchronous, lagged (in this process);
- :mod:`.overlap`: the overlapped source, a sampler process (:mod:`.sampler_process`) beside the trainer;
- :mod:`.policy_versions`: the policy's trainable tensors as versions, what a stale batch is sampled with.
"""
