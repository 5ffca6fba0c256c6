"""Issue 28: an --out that cannot be written (a directory for a file, a symbolic link, /proc, an
unwritable or file-blocked parent) is exit 2 naming the flag, before any work."""

from __future__ import annotations

import json
import os

import pytest

from rlvr_cli.cli.common import output_problem


@pytest.fixture
def samples(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"task": "arithmetic", "response": "#1", "answer": "1"}) + "\n")
    return f


def _cases(tmp_path):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("keep\n")
    (tmp_path / "victim").write_text("keep\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "victim")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    return {
        "a directory": (str(tmp_path / "adir"), "is a directory"),
        "under /proc": ("/proc/self/x.jsonl", "system tree"),
        "a symbolic link": (str(tmp_path / "link.jsonl"), "symbolic link"),
        "a dangling link": (str(tmp_path / "dangling.jsonl"), "symbolic link"),
        "a file as a parent": (str(tmp_path / "afile" / "x.jsonl"), "not a directory"),
        "/dev/null": ("/dev/null", "system tree"),
    }


def test_output_problem_names_flag_and_reason(tmp_path):
    for what, (path, reason) in _cases(tmp_path).items():
        problem = output_problem("--out", path)
        assert problem and problem.startswith(f"--out {path}:") and reason in problem, what
    assert output_problem("--out", str(tmp_path / "new" / "deeper" / "x.jsonl")) is None
    assert output_problem("--out", str(tmp_path / "afile")) is None  # an existing regular file is replaced
    assert (tmp_path / "victim").read_text() == "keep\n"


def test_an_unwritable_parent_is_refused(tmp_path, monkeypatch):
    import tempfile

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)  # root ignores chmod: deny at the probe instead
    assert "cannot write in" in output_problem("--out", str(tmp_path / "x.jsonl"))


def test_a_directory_output_refuses_a_file_and_a_link(tmp_path):
    (tmp_path / "f").write_text("")
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "d")
    assert "not a directory" in output_problem("--out", str(tmp_path / "f"), directory=True)
    assert "symbolic link" in output_problem("--out", str(tmp_path / "l"), directory=True)
    assert output_problem("--out", str(tmp_path / "d"), directory=True) is None
    assert output_problem("--out", str(tmp_path / "new" / "d"), directory=True) is None


@pytest.mark.parametrize("case", ["a directory", "under /proc", "a symbolic link", "a file as a parent"])
def test_verify_refuses_before_reading(cli, tmp_path, samples, case):
    path, reason = _cases(tmp_path)[case]
    res = cli("verify", str(samples), "--out", path)
    assert res.code == 2 and "--out" in res.stderr and reason in " ".join(res.stderr.split()), res.stderr
    assert (tmp_path / "victim").read_text() == "keep\n"


@pytest.mark.parametrize("command", ["sample", "eval"])
@pytest.mark.parametrize("case", ["under /proc", "a symbolic link", "a file as a parent"])
def test_sample_and_eval_refuse_before_loading_a_model(cli, tmp_path, monkeypatch, command, case):
    import rlvr_cli.models as models

    def no_load(*a, **k):
        raise AssertionError("a model was loaded")

    for name in ("load_policy", "load_model"):
        if hasattr(models, name):
            monkeypatch.setattr(models, name, no_load)
    path, reason = _cases(tmp_path)[case]
    args = ["--task", "arithmetic"] if command == "sample" else ["--task", "arithmetic"]
    res = cli(command, str(tmp_path / "no_model"), *args, "--out", path)
    assert res.code == 2 and "--out" in res.stderr and reason in " ".join(res.stderr.split()), res.stderr
    assert (tmp_path / "victim").read_text() == "keep\n"


@pytest.mark.parametrize("case", ["a file", "a link"])
def test_compare_refuses_its_out_before_reading_runs(cli, tmp_path, case):
    (tmp_path / "d").mkdir()
    out = tmp_path / "out"
    if case == "a file":
        out.write_text("keep\n")
    else:
        out.symlink_to(tmp_path / "d")
    res = cli("compare", str(tmp_path / "missing_run"), "--out", str(out))
    assert res.code == 2 and f"--out {out}" in " ".join(res.stderr.split()), res.stderr
    assert not any((tmp_path / "d").iterdir())
