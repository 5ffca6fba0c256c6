"""Size limits that keep the library readable, checked on the syntax tree: no library function takes more
than 8 parameters (group them into a small frozen dataclass instead), no function in train/ is over 60
lines, and train/rl.py (the loop and the update) stays at most 350 lines. The Typer commands in cli/
are exempt from the parameter limit: each parameter there is one command-line option."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "rlvr_cli"
MAX_PARAMETERS = 8
MAX_TRAIN_FUNCTION_LINES = 60
MAX_RL_LINES = 350


def functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Every parameter (``*args`` and ``**kwargs`` count one each), ``self``/``cls`` of a method not."""
    a = fn.args
    named = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return len(named) + (a.vararg is not None) + (a.kwarg is not None) - (named[:1] in (["self"], ["cls"]))


def over_parameters(root: Path) -> list[str]:
    return [f"{p.relative_to(root)}:{fn.lineno} {fn.name}: {parameters(fn)} parameters"
            for p in sorted(root.rglob("*.py")) if p.relative_to(root).parts[0] != "cli"
            for fn in functions(p) if parameters(fn) > MAX_PARAMETERS]


def over_lines(root: Path, limit: int) -> list[str]:
    return [f"{p.relative_to(root)}:{fn.lineno} {fn.name}: {fn.end_lineno - fn.lineno + 1} lines"
            for p in sorted(root.rglob("*.py")) for fn in functions(p) if fn.end_lineno - fn.lineno + 1 > limit]


def test_no_library_function_takes_more_than_8_parameters():
    assert not over_parameters(PKG), over_parameters(PKG)


def test_no_function_in_train_is_over_60_lines():
    assert not over_lines(PKG / "train", MAX_TRAIN_FUNCTION_LINES), over_lines(PKG / "train", MAX_TRAIN_FUNCTION_LINES)


def test_the_rl_loop_file_stays_short():
    lines = len((PKG / "train" / "rl.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_RL_LINES, f"train/rl.py: {lines} lines (at most {MAX_RL_LINES})"


def test_the_limits_catch_a_long_or_wide_function(tmp_path):
    """The checks can fail: a 9-parameter function, a method whose self does not count, a 61-line body."""
    (tmp_path / "lib.py").write_text(
        "def wide(a, b, c, d, e, f, g, h, *, i): pass\n"
        "class K:\n    def eight(self, a, b, c, d, e, f, g, h): pass\n"
        "def long():\n" + "    x = 1\n" * 60, encoding="utf-8")
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "command.py").write_text("def cmd(a, b, c, d, e, f, g, h, i): pass\n", encoding="utf-8")
    assert over_parameters(tmp_path) == ["lib.py:1 wide: 9 parameters"]
    assert over_lines(tmp_path, MAX_TRAIN_FUNCTION_LINES) == ["lib.py:4 long: 61 lines"]
