"""examples/own_env: a TRL environment class (no rlvr import) loads from its recipe, answers the calls
builtin:tiny-calc writes as builtin:calculator does, and its get_reward is its own."""

from __future__ import annotations

from pathlib import Path

from rlvr_cli.envs import episode_factory, problem_row
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.environment import EnvironmentSpec
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.rewards.references import check_references
from rlvr_cli.tasks import build_task

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_env"


def test_the_example_class_runs_as_the_builtin_calculator():
    recipe = load_recipe(str(EXAMPLE / "recipe.yaml"))
    assert recipe.environment.factory == f"{EXAMPLE / 'calc_env.py'}:CalcEnv"  # read from the recipe's folder
    assert check_references(recipe) == []
    assert "import rlvr" not in (EXAMPLE / "calc_env.py").read_text() and "from rlvr" not in (EXAMPLE / "calc_env.py").read_text()
    tok = build_char_tokenizer()
    mine = episode_factory(recipe.environment, tok, recipe.model.name)
    builtin = episode_factory(EnvironmentSpec(factory="builtin:calculator"), tok, recipe.model.name)
    for p in build_task("calc").eval_problems()[:5]:
        a, b = mine(problem_row(p)), builtin(problem_row(p))
        assert a.reset(problem_row(p)) is None and b.reset(problem_row(p)) is None
        call = f"<calc>{p.meta['expression']}</calc>"
        assert a.step(call).text == b.step(call).text == f"<r>{p.reference}</r>"
        assert a.reward() == 0.1 and b.reward() is None  # one call: the example's own bonus
    bad = mine({})
    reply = bad.step("<calc>2**8</calc>")
    assert reply.failed and reply.text.startswith("<r>error: valueerror: only integers")
