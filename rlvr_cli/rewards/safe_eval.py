"""Readers for model text that a scorer would otherwise hand to ``eval``: they evaluate nothing.

Some reasoning-gym scorers read an answer with Python's ``eval`` (a list written as Python) or with
sympy's ``parse_expr`` (which is ``eval`` after a token rewrite: ``__import__('os').system(...)`` runs
as written). rlvr puts these readers in the scorer's place (``rlvr_cli/rewards/reasoning_gym.py``):

- :func:`literal`: ``eval`` for Python literals only (numbers, strings, lists, tuples, dicts, sets,
  ``True``/``False``/``None``), via ``ast.literal_eval``, which builds values and calls nothing.
- :func:`int_arithmetic`: ``eval`` for integer arithmetic (``(0x1f << 0x2) - 7``), bounded in size, for
  references written as expressions.
- :func:`check_sympy_text`: lets through to ``parse_expr`` only an arithmetic expression over numbers,
  names and calls of sympy's own functions and classes (``sin``, ``exp``, ``log``, ``sqrt``,
  ``Rational``); everything else (attributes, subscripts, strings, keywords, lambdas, comparisons,
  calls of Python builtins such as ``__import__`` or ``open``) is refused with ``ValueError`` before
  anything runs. What passes can only build sympy objects: a name becomes a ``Symbol`` (or a sympy
  constant such as ``pi``), a number an ``Integer``/``Float``, a call a sympy expression.

Each raises ``ValueError`` (or ``SyntaxError``) where the original would evaluate something else; the
scorers catch that exactly as they catch a failed ``eval``, so an answer that is refused scores what an
unreadable answer scores. Honest answers (the generators' own answer formats) read the same as before;
``tests/rewards/test_safe_eval_in_reasoning_gym.py`` compares the verdicts of both on generated items.
"""

from __future__ import annotations

import ast
import builtins
import types
import warnings
from functools import cache

MAX_TEXT = 20_000
"""Longest text read (characters); a longer one is refused (honest answers are a few hundred)."""
MAX_BITS = 1 << 16
"""Largest integer, in bits, that :func:`int_arithmetic` builds (a shift or product beyond is refused)."""


def _source(text) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise ValueError(f"text of {len(text)} characters is longer than {MAX_TEXT}")
    return text.strip()


def _parse(text) -> ast.Expression:
    """The expression's syntax tree (``SyntaxError`` if it is not one), without the warnings that
    Python prints for odd escapes in model text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(_source(text), mode="eval")


def literal(text, _globals=None, _locals=None):
    """``eval(text)`` for a Python literal; ``ValueError`` for anything that would compute or call."""
    return ast.literal_eval(_parse(text).body)


_INT_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b,
    ast.BitXor: lambda a, b: a ^ b,
}
_INT_UNARY = {ast.USub: lambda a: -a, ast.UAdd: lambda a: +a, ast.Invert: lambda a: ~a}


def _result_bits(op, a: int, b: int) -> int:
    """An upper bound on the size in bits of ``a op b``, computed without building it."""
    if isinstance(op, ast.LShift):
        return a.bit_length() + max(b, 0)
    if isinstance(op, ast.Mult):
        return a.bit_length() + b.bit_length()
    return max(a.bit_length(), b.bit_length()) + 1


def int_arithmetic(text, _globals=None, _locals=None) -> int:
    """``eval(text)`` for integer arithmetic: int literals (any base), ``+ - * // % << >> & | ^``, unary
    ``- + ~`` and parentheses. ``ValueError`` for anything else or a value beyond ``MAX_BITS`` bits."""
    tree = _parse(text)

    def value(node) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _INT_UNARY:
            return _INT_UNARY[type(node.op)](value(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, (ast.LShift, ast.RShift)) and b < 0:
                raise ValueError("negative shift count")
            if _result_bits(node.op, a, b) > MAX_BITS:
                raise ValueError(f"integer beyond {MAX_BITS} bits")
            return _INT_OPS[type(node.op)](a, b)
        raise ValueError(f"not integer arithmetic: {type(node).__name__}")

    return value(tree.body)


# --- sympy expressions ------------------------------------------------------------------------------
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult,
               ast.BitXor, ast.BitAnd, ast.BitOr, ast.LShift, ast.RShift)
_PURE_BUILTINS = frozenset({"abs", "pow", "round", "max", "min"})
"""Python builtins that ``parse_expr`` exposes and that only do arithmetic on their arguments (``max``
and ``min`` are sympy's ``Max``/``Min`` there)."""
_PURE_SYMPY_FUNCTIONS = frozenset({"sqrt", "root", "cbrt", "real_root"})
"""sympy functions that are plain Python functions (not classes) and only build an expression."""


@cache
def _parse_expr_names() -> dict:
    """The names ``parse_expr`` resolves itself (its default global namespace: sympy's public names and
    Python's builtin functions); any other name becomes a ``Symbol`` or an undefined ``Function``."""
    import sympy

    names = {n: getattr(sympy, n) for n in sympy.__all__ if hasattr(sympy, n)}
    names.update({n: f for n, f in vars(builtins).items() if isinstance(f, types.BuiltinFunctionType)})
    return names


def _name_ok(name: str, called: bool, local_names) -> bool:
    import sympy

    if name.startswith("_"):
        return False
    if name in local_names:
        return True
    known = _parse_expr_names()
    if name not in known:
        return True  # parse_expr turns it into Symbol(name) or Function(name)
    obj = known[name]
    if isinstance(obj, type) and issubclass(obj, sympy.Basic):
        return True  # a sympy class: sin, exp, log, Abs, Rational, Integer (constructors build an expression)
    if called:
        return name in _PURE_BUILTINS or name in _PURE_SYMPY_FUNCTIONS
    return isinstance(obj, sympy.Basic)  # a constant: pi, E, I, oo


def check_sympy_text(text, local_names=()) -> str:
    """``text`` if ``parse_expr`` would only build a sympy expression from it; ``ValueError`` otherwise.

    Allowed: int/float/complex literals; names (not starting with ``_``) that ``parse_expr`` turns into
    symbols or that are sympy constants or classes; ``+ - * / // % ** @ ^ & | << >>`` and unary ``+ -
    ~``; calls of such a name, or of a pure builtin/sympy function, with positional arguments of the same
    kind. ``local_names`` are the names the caller binds itself (its ``local_dict``)."""
    tree = _parse(text)
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Constant):
            ok = type(node.value) in (int, float, complex)
        elif isinstance(node, ast.Name):
            ok = True  # checked with its context below (a call's function or a value)
        elif isinstance(node, ast.BinOp):
            ok = isinstance(node.op, _ARITHMETIC)
        elif isinstance(node, ast.UnaryOp):
            ok = isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert))
        elif isinstance(node, ast.Call):
            ok = isinstance(node.func, ast.Name) and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
        elif isinstance(node, (ast.Load, ast.operator, ast.unaryop)):
            ok = True
        else:
            ok = False
        if not ok:
            raise ValueError(f"not an arithmetic expression: {type(node).__name__} at column {getattr(node, 'col_offset', 0)}")
    called = {id(n.func) for n in ast.walk(tree.body) if isinstance(n, ast.Call)}
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Name) and not _name_ok(node.id, id(node) in called, local_names):
            raise ValueError(f"name {node.id!r} is not a sympy symbol, constant or function")
    return text


def gated_parse_expr(parse_expr):
    """``parse_expr`` that first refuses (``ValueError``) any text :func:`check_sympy_text` refuses."""

    def parse(s, local_dict=None, *args, **kwargs):
        if args or set(kwargs) - {"evaluate"}:
            raise ValueError("parse_expr with the caller's namespace or transformations is not gated")
        check_sympy_text(s, tuple(local_dict or ()))
        return parse_expr(s, local_dict, **kwargs)

    parse.__wrapped__ = parse_expr
    return parse
