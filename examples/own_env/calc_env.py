"""A TRL environment class, written as for ``GRPOTrainer(environment_factory=CalcEnv)``, used by rlvr as it is.

Its one tool is ``calc``, the name builtin:tiny-calc was warm-started to call (`<calc>347*28</calc>`); it
answers as builtin:calculator does on + - * of integers, and it owns a reward of its own: a small bonus
for having used the tool at most once (``get_reward``, added to the task's reward at weight 1).
"""

import ast
import operator

OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _value(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return OPS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("only integers with + - *")


class CalcEnv:
    def __init__(self):
        self.calls = 0

    def reset(self, **kwargs):
        """Called with the task row (prompt, answer, id, expression) before the first turn."""
        self.calls = 0
        return None

    def calc(self, expression: str) -> str:
        """Evaluate an integer expression with + - *.

        Args:
            expression: The expression, e.g. 347*28.
        """
        self.calls += 1
        return str(_value(ast.parse(expression.strip(), mode="eval").body))

    def get_reward(self) -> float:
        return 0.1 if self.calls == 1 else 0.0
