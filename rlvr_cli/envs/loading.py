"""Finding a recipe's environment: ``environment.factory`` and ``environment.tools``, TRL's shape.

TRL (``GRPOTrainer(environment_factory=..., tools=[...])``, trl 1.x ``grpo_trainer.py``) and rlvr agree on:

- the factory is a callable (usually a class) building one environment object; its bound public methods
  (``inspect.getmembers(obj, inspect.ismethod)``, no leading underscore) except ``reset`` and
  ``get_reward`` are the tools, named by their method name; ``reset`` is required;
- ``reset(**row)`` gets the task row as keywords; a str it returns is appended to the prompt, None adds
  nothing;
- an optional ``get_reward()`` (no argument, a float; may be ``async``) scores the finished trajectory,
  added to the other reward sources at weight 1;
- ``tools`` are plain functions, named by ``__name__``, callable beside the factory's methods; ``async``
  tools are awaited.

Where rlvr differs (docs/tools.md): the factory is called with ``environment.options`` as keywords (TRL
calls it with none: a TRL class with no parameters runs unchanged when options is empty); rlvr builds a
fresh object per trajectory (TRL pools objects and reuses them through ``reset``); a tool's error is shown
as ``error: ExcType: message`` (TRL: ``{'error': 'message'}``); tools run under a timeout (TRL has none).

Everything is checked when the run starts (:func:`load_environment`, called by
:func:`rlvr_cli.envs.episode_factory` and by ``rlvr recipes validate``), the user's modules first imported
in a child process with a time limit (a module that hangs or exits at import): a reference that does not import,
a factory that is not callable or raises on ``options``, an object without ``reset``, no tools at all, a
tool that is not callable, two tools of one name: a ``UserError`` naming ``environment.factory``,
``environment.options`` or ``environment.tools[i]`` and the reference (exit 2).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from rlvr_cli.envs.calls import TAG_REPLY, TOOL_NAME
from rlvr_cli.envs.limits import run_limited
from rlvr_cli.errors import UserError
from rlvr_cli.user_code import describe_exception, did_you_mean, import_where, raised_at, split_reference

RESERVED = ("reset", "get_reward")
"""Methods of an environment that are not tools (TRL's names)."""


def _calculator():
    from rlvr_cli.envs.calculator import Calculator

    return Calculator


BUILTIN_ENVIRONMENTS: dict[str, Callable[[], type]] = {"calculator": _calculator}
"""`builtin:NAME` -> the class (imported when named); docs/tools.md lists them."""


@dataclass(frozen=True)
class Loaded:
    """A recipe's environment, found and checked once per process."""

    factory: Callable | None
    """Builds one environment object (called with the options as keywords), or None: plain tools only."""
    label: str
    """How messages name it: the factory's reference, or `tools`."""
    options: dict = field(default_factory=dict)
    functions: dict[str, Callable] = field(default_factory=dict)
    """The plain tools (``environment.tools``) by name."""
    method_names: tuple[str, ...] = ()
    """The factory's tools, as found on the probe object."""

    @property
    def tool_names(self) -> tuple[str, ...]:
        return (*self.method_names, *self.functions)

    def build(self):
        """A fresh environment object (``factory(**options)``), or None without a factory."""
        return None if self.factory is None else self.factory(**self.options)


def methods_of(obj) -> dict[str, Callable]:
    """An environment object's tools: its bound public methods but ``reset`` and ``get_reward`` (TRL's rule)."""
    return {name: member for name, member in inspect.getmembers(obj, predicate=inspect.ismethod)
            if name not in RESERVED and not name.startswith("_")}


def _factory(ref: str) -> Callable:
    if ref.startswith("builtin:"):
        name = ref.split(":", 1)[1]
        if name not in BUILTIN_ENVIRONMENTS:
            raise UserError(f"environment.factory: {ref}: unknown built-in environment (known: "
                            f"{', '.join('builtin:' + n for n in BUILTIN_ENVIRONMENTS)}){did_you_mean(name, BUILTIN_ENVIRONMENTS)}")
        return BUILTIN_ENVIRONMENTS[name]()
    return _named(ref, "environment.factory", "class")


def _named(ref: str, where: str, kind: str) -> Callable:
    """The callable ``ref`` names, or ``UserError`` starting with ``where``."""
    module_where, name = split_reference(ref)
    if not module_where or not name:
        raise UserError(f"{where}: {ref!r} is not a reference (write file.py:Name or module:Name)")
    try:
        module = import_where(ref)
    except UserError as e:
        raise UserError(f"{where}: {e.problems[0]}") from None
    obj = getattr(module, name, None)
    if obj is None:
        known = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)]
        raise UserError(f"{where}: {ref}: {module_where} has no {name!r}{did_you_mean(name, known)}")
    if not callable(obj):
        raise UserError(f"{where}: {ref}: {name} is a {type(obj).__name__}, not a {kind}")
    return obj


def _probe(factory: Callable, ref: str, options: dict, timeout_s: float):
    kind, value = run_limited(lambda: factory(**options), timeout_s, "factory")
    if kind == "timeout":
        raise UserError(f"environment.factory: {ref}: building it took longer than environment.tool_timeout_s "
                        f"({timeout_s:g} s)")
    if kind == "error":
        field_ = "environment.options" if isinstance(value, TypeError) and options else "environment.factory"
        raise UserError(f"{field_}: {ref}(**{options!r}) raised {describe_exception(value)}{raised_at(value)}")
    return value


def _check_imports(spec) -> None:
    """Import the user's environment modules first in a child process, with a time limit: a module that
    waits for something at import, exits or crashes is one line naming its field (exit 2), not a hung or
    silently ended rlvr (the reward functions' checked import, rlvr_cli/checked_import.py)."""
    from rlvr_cli.checked_import import check_importable

    fields = {ref: f"environment.tools[{i}]" for i, ref in enumerate(spec.tools)}
    if spec.factory is not None and not spec.factory.startswith("builtin:"):
        fields[spec.factory] = "environment.factory"
    problems = check_importable([ref for ref in fields if split_reference(ref)[0]], None)
    for ref, problem in problems.items():
        raise UserError(f"{fields[ref]}: {problem}")


def load_environment(spec) -> Loaded:
    """The environment ``spec`` (an ``EnvironmentSpec``) names, checked (see the module docstring)."""
    if spec.factory is None and not spec.tools:
        raise UserError("environment: give a factory (a class, e.g. builtin:calculator) or tools (plain functions)")
    _check_imports(spec)
    functions: dict[str, Callable] = {}
    for i, ref in enumerate(spec.tools):
        fn = _named(ref, f"environment.tools[{i}]", "function")
        name = getattr(fn, "__name__", None) or split_reference(ref)[1]
        if name in functions:
            raise UserError(f"environment.tools[{i}]: {ref}: a second tool named {name!r}")
        functions[name] = fn
    factory, methods, label = None, (), "tools"
    if spec.factory is not None:
        label = spec.factory
        factory = _factory(spec.factory)
        probe = _probe(factory, spec.factory, dict(spec.options), spec.tool_timeout_s)
        if not callable(getattr(probe, "reset", None)):
            raise UserError(f"environment.factory: {spec.factory}: its objects have no reset method (TRL requires one: "
                            "def reset(self, **row) -> str | None)")
        try:
            methods = tuple(methods_of(probe))
        except Exception as e:  # noqa: BLE001 - inspect.getmembers reads every property, which may raise
            raise UserError(f"environment.factory: {spec.factory}: reading its methods raised {describe_exception(e)}") from None
        clash = sorted(set(methods) & set(functions))
        if clash:
            raise UserError(f"environment.tools: {clash[0]!r} is both a method of {spec.factory} and a tool")
        if not methods and not functions:
            raise UserError(f"environment.factory: {spec.factory} has no tools (public methods besides reset and "
                            "get_reward) and environment.tools is empty")
    elif spec.options:
        raise UserError("environment.options: options are the factory's keyword arguments, and there is no factory")
    return Loaded(factory, label, dict(spec.options), functions, methods)


def check_names(loaded: Loaded, protocol: str, characters: frozenset | None) -> None:
    """``UserError`` when a tool's name cannot be written in ``protocol`` by a tokenizer of ``characters``."""
    for name in loaded.tool_names:
        if protocol == "tags" and (not TOOL_NAME.fullmatch(name) or name == TAG_REPLY[0][1:-1]):
            raise UserError(f"environment: tool {name!r} cannot be called with protocol tags (a name is letters, digits "
                            f"and _, and not {TAG_REPLY[0][1:-1]!r}, the reply's tag)")
        if characters is not None and not set(name) <= characters:
            raise UserError(f"environment: the model's tokenizer cannot write the tool name {name!r} "
                            f"(characters {''.join(sorted(set(name) - characters))!r})")
