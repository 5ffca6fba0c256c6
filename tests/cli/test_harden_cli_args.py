"""Argument edges of `verify` (issue 28): exit 2 naming the flag and the reason, before any work.
(The same for sample/eval/compare, seeds and devices is planned in /work/notes/harden_phase2.md.)"""

import json
import sys

import pytest

from rlvr_cli.cli import main


def run(argv) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


@pytest.fixture
def rg_samples(tmp_path):
    path = tmp_path / "rg.jsonl"
    ref = {"dataset": "chain_sum", "config": {}, "entry": {"question": "1+1", "answer": "2", "metadata": {}}}
    path.write_text(json.dumps({"response": "<answer>2</answer>", "reference": json.dumps(ref), "verifier": "reasoning_gym"}) + "\n")
    return path


@pytest.fixture
def no_reasoning_gym(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # find_spec -> None, import -> ImportError


def test_verify_reasoning_gym_without_the_package_names_the_extra(rg_samples, tmp_path, capsys, no_reasoning_gym):
    out = tmp_path / "scored.jsonl"
    assert run(["verify", str(rg_samples), "--verifier", "reasoning_gym", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--verifier reasoning_gym" in err and "rlvr-cli[reasoning-gym]" in err and "Traceback" not in err
    assert not out.exists()
    # the same when the lines name the verifier
    assert run(["verify", str(rg_samples), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "verifier reasoning_gym" in err and "rlvr-cli[reasoning-gym]" in err
    assert not out.exists()


def test_verify_out_that_is_a_directory(rg_samples, tmp_path, capsys):
    assert run(["verify", str(rg_samples), "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path}: is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["sample", "eval"])
@pytest.mark.parametrize("args, message", [
    (["--seed", str(2**64)], "--seed"),
    (["--seed", str(-(2**63) - 1)], "--seed"),
    (["--device", "tpu9"], "--device tpu9: unknown device"),
    (["--device", "cuda:7"], "--device"),
])
def test_seed_and_device_edges_exit_2_before_loading(command, args, message, tmp_path, capsys, monkeypatch):
    import rlvr_cli.models as models

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", no_loading)
    out = ["--out", str(tmp_path / "x.jsonl")] if command == "sample" else []
    assert run([command, "builtin:tiny", *out, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("command", ["sample", "eval"])
def test_out_that_is_a_directory_exits_2(command, tmp_path, capsys):
    assert run([command, "builtin:tiny", "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path}: is a directory" in capsys.readouterr().err
