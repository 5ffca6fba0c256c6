"""The environment variables rlvr reads, set to values it cannot use (issue 50): each refused before
any command starts, exit 2, in one line naming the variable."""

from __future__ import annotations

import os

import pytest


def _one_error(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (res.code, res.stderr)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    return lines[0]


def _sample(cli, tmp_path):
    return cli("sample", "builtin:tiny", "--n", "1", "--num-prompts", "1", "--out", str(tmp_path / "s.jsonl"))


def test_rlvr_cache_naming_a_file(cli, tmp_path, monkeypatch):
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "f"))
    line = _one_error(_sample(cli, tmp_path))
    assert f"RLVR_CACHE={tmp_path / 'f'}: is a file, not a directory; set RLVR_CACHE to a directory" in line


def test_rlvr_cache_below_a_file(cli, tmp_path, monkeypatch):
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "f" / "cache"))
    line = _one_error(cli("models", "list"))
    assert f"RLVR_CACHE={tmp_path / 'f' / 'cache'}: is below {tmp_path / 'f'}, which is not a directory" in line


def test_rlvr_cache_a_broken_symbolic_link(cli, tmp_path, monkeypatch):
    os.symlink(tmp_path / "gone", tmp_path / "link")
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "link"))
    line = _one_error(_sample(cli, tmp_path))
    assert f"RLVR_CACHE={tmp_path / 'link'}: is a broken symbolic link; set RLVR_CACHE to a directory" in line


def test_rlvr_cache_where_nothing_can_be_written(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", "/proc/rlvr-no-such-cache")  # a directory tree that refuses mkdir, even to root
    line = _one_error(_sample(cli, tmp_path))
    assert "cannot write rlvr's cache there" in line and "set RLVR_CACHE to a writable directory" in line


def test_rlvr_cache_a_fresh_directory_is_made(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "new" / "cache"))
    assert _sample(cli, tmp_path).code == 0
    assert (tmp_path / "new" / "cache" / "builtin").is_dir()


def test_rlvr_cache_empty_means_the_default(monkeypatch, tmp_path):
    from rlvr_cli.models.builtin import cache_root

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RLVR_CACHE", "")
    assert cache_root() == tmp_path / ".cache" / "rlvr"


def test_the_default_cache_a_file_is_named(cli, tmp_path, monkeypatch):
    (tmp_path / ".cache").write_text("x")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RLVR_CACHE")
    line = _one_error(_sample(cli, tmp_path))
    assert f"{tmp_path / '.cache' / 'rlvr'}: rlvr's default cache is below {tmp_path / '.cache'}" in line
    assert "set RLVR_CACHE to a directory" in line


@pytest.mark.parametrize("value", ["nativ", "Portable2", "avx2", "0", "native,portable"])
def test_rlvr_cpu_numerics_typo(cli, monkeypatch, value):
    monkeypatch.setenv("RLVR_CPU_NUMERICS", value)
    line = _one_error(cli("models", "list"))
    assert line == f"error: RLVR_CPU_NUMERICS={value!r}: unknown value (valid: portable, native)"


@pytest.mark.parametrize("value", ["native", "NATIVE", " portable ", ""])
def test_rlvr_cpu_numerics_valid_values_pass(cli, monkeypatch, value):
    monkeypatch.setenv("RLVR_CPU_NUMERICS", value)
    res = cli("models", "list")
    assert res.code == 0, res.stderr
