"""rlvr_cli/sampling/rounds.py: a round's prompts depend on (seed, step, round) only, and a prompt's G
responses on its index in the round, not on which other prompts are sampled beside it (the trainer's
ranks and the doctor sample different subsets of the same round)."""

from rlvr_cli.models import load_model
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.sampling.rounds import RoundKey, draw_prompts, sample_round
from rlvr_cli.tasks import build_task


def test_a_prompts_responses_do_not_depend_on_the_prompts_beside_it(tiny_base):
    r = load_recipe("grpo", [f"model.name={tiny_base}", "rollout.group_size=3", "rollout.max_new_tokens=10",
                             "rollout.temperature=1.5"])
    task = build_task(r.task)
    model, tok, _ = load_model(r.model.name)
    model.eval()
    key = RoundKey(r.seed, 1, 0)
    problems = draw_prompts(task, key, 4)
    assert [p.prompt for p in problems] == [p.prompt for p in draw_prompts(task, key, 4)]
    assert [p.prompt for p in problems] != [p.prompt for p in draw_prompts(task, RoundKey(r.seed, 2, 0), 4)]
    every = sample_round(model, tok, task, r.rollout, key, problems, [0, 1, 2, 3], None)
    alone = sample_round(model, tok, task, r.rollout, key, problems, [2], None)
    assert alone.texts == every.texts[6:9] and alone.samples.response_ids == every.samples.response_ids[6:9]
    assert len(set(every.texts)) > 3  # the samples differ: the equality says something
    other = sample_round(model, tok, task, r.rollout, RoundKey(r.seed, 1, 1), problems, [2], None)
    assert other.texts != alone.texts  # another round draws other samples of the same prompt
