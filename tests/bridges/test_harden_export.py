"""`rlvr export --to verl` writes override lines that mean exactly the recipe (issue 28).

Checked by parsing the written file with Hydra's own override parser and applying it to verl's
configuration (tests/bridges/test_bridges_verl.py's ``apply``): a line break in a name or in the recipe's file
name adds no override, a comma is not a sweep, ``${oc.env:...}`` stays text, and quoting survives any
mix of quotes, backslashes and ``$``. A value that cannot be written (a line break) is a warning, and
``--strict`` refuses it.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("omegaconf", reason="the `verl` extra (omegaconf) is not installed")
pytest.importorskip("hydra", reason="the `verl` extra (hydra-core) is not installed")

from hydra._internal.config_loader_impl import ConfigLoaderImpl  # noqa: E402
from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from test_bridges_verl import apply  # noqa: E402

from rlvr_cli.bridges.export_verl import format_value  # noqa: E402

HOSTILE_NAME = "run\n+trainer.total_epochs=1\ntrainer.project_name=hijacked"


def _recipe(tmp_path, filename: str, name: str, model: str = "Qwen/Qwen2.5-0.5B-Instruct"):
    import json

    path = tmp_path / filename
    # JSON is YAML: the strings go in escaped, whatever they hold
    path.write_text(f"extends: grpo\nname: {json.dumps(name)}\nmodel:\n  name: {json.dumps(model)}\n")
    return path


def _override_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _resolved(line: str):
    """The value one override line gives, after Hydra's parser and OmegaConf's resolution."""
    override = OverridesParser.create().parse_overrides([line])[0]
    assert not override.is_sweep_override(), line
    cfg = OmegaConf.create({"a": {"b": None}})
    ConfigLoaderImpl._apply_overrides_to_config([override], cfg)
    return OmegaConf.to_container(cfg, resolve=True)["a"]["b"]


def test_any_string_round_trips_through_hydra_and_omegaconf():
    rng = random.Random(0)
    alphabet = "ab1.-_/ ,='\"\\${}:[]()%#\t@!~*?<>|&;`é0"
    fixed = ["${oc.env:HOME}", "\\${x}", "a\\", "it's", "x,y", "null", "True", "1e3", "0.5_1e+09", "", " ", "${", "\\'"]
    for s in fixed + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(1500)]:
        assert _resolved("a.b=" + format_value(s)) == s
        assert _resolved("a.b=" + format_value([s, "x"])) == [s, "x"]


def test_hostile_names_and_file_names_add_no_override(cli, tmp_path):
    path = _recipe(tmp_path, "odd\n+trainer.total_epochs=1,2.yaml", HOSTILE_NAME,
                   model="/models/a,b/${oc.env:HOME}/it's\\")
    out = tmp_path / "out.verl.txt"
    res = cli("export", str(path), "--to", "verl", "--out", str(out))
    assert res.code == 0, res.stderr
    assert "trainer.experiment_name" in res.stderr and "line break" in res.stderr
    lines = _override_lines(out.read_text())
    cfg, problems = apply(lines)
    assert problems == []
    keys = [OverridesParser.create().parse_override(line).key_or_group for line in lines]
    assert len(keys) == len(set(keys)) and "trainer.total_epochs" not in keys and "trainer.project_name" not in keys
    assert cfg.trainer.experiment_name == HOSTILE_NAME.replace("\n", " ")
    assert OmegaConf.to_container(cfg, resolve=True)["actor_rollout_ref"]["model"]["path"] == "/models/a,b/${oc.env:HOME}/it's\\"
    assert cfg.trainer.project_name != "hijacked"


def test_strict_refuses_a_value_it_cannot_write(cli, tmp_path):
    path = _recipe(tmp_path, "r.yaml", HOSTILE_NAME)
    res = cli("export", str(path), "--to", "verl", "--strict")
    assert res.code == 2 and "trainer.experiment_name" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_comment_lines_stay_comments(cli, tmp_path, target):
    path = _recipe(tmp_path, "x\nimport os\n+a=1.yaml", "plain", model="m\nos.system('x')")
    res = cli("export", str(path), "--to", target)
    assert res.code == 0, res.stderr
    for line in res.stdout.splitlines():
        assert not line.startswith(("import os", "+a=1", "os.system")), line
