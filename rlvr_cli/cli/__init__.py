"""The `rlvr` command line: thin commands over the library (docs/design.md §1).

Exit status: 0 success, 2 bad input (one `where: field: problem` line per problem on stderr), 1 an
internal failure (set RLVR_DEBUG=1 for the traceback), 3 `rlvr doctor` found that training would learn
nothing or stop.
"""

from __future__ import annotations

import os
import sys
import traceback

import click
import typer

from rlvr_cli.errors import RunFailed, UserError

app = typer.Typer(
    name="rlvr",
    help="Ablate GRPO-family RL with verifiable rewards: train, sample, verify, eval, compare.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    from rlvr_cli.cli import compare, doctor, evaluate, export, models, recipes, sample, sweep, train, verify

    app.command("train", no_args_is_help=True)(train.train)
    app.command("sample", no_args_is_help=True)(sample.sample)
    app.command("verify", no_args_is_help=True)(verify.verify)
    app.command("eval", no_args_is_help=True)(evaluate.evaluate)
    app.command("evaluate", no_args_is_help=True, help="Alias of `rlvr eval`.")(evaluate.evaluate)
    app.command("compare", no_args_is_help=True)(compare.compare)
    app.command("export", no_args_is_help=True)(export.export)
    app.command("doctor", no_args_is_help=True)(doctor.doctor)
    app.command("sweep", no_args_is_help=True)(sweep.sweep)
    app.add_typer(recipes.app, name="recipes")
    app.add_typer(models.app, name="models")


_register()


def _click_exception_kinds():
    """(Exit, ClickException, Abort) classes of click and of the copy of click newer Typer vendors."""
    exits, errors, aborts = [click.exceptions.Exit], [click.ClickException], [click.exceptions.Abort]
    for name, bucket in (("Exit", exits), ("Abort", aborts)):
        cls = getattr(typer, name, None)
        if isinstance(cls, type) and cls not in bucket:
            bucket.append(cls)
    try:
        from typer._click.exceptions import ClickException as VendoredClickException

        errors.append(VendoredClickException)
    except ImportError:
        pass
    return tuple(exits), tuple(errors), tuple(aborts)


_EXIT, _CLICK_ERROR, _ABORT = _click_exception_kinds()


def _check_environment() -> None:
    """The environment variables rlvr reads, refused before any command starts (exit 2) when set to a
    value rlvr cannot use: ``RLVR_CPU_NUMERICS`` not a mode, ``RLVR_CACHE`` not a directory."""
    from rlvr_cli.models.builtin import cache_root
    from rlvr_cli.numerics import switch_problem

    problem = switch_problem()
    if problem:
        raise UserError(problem)
    if os.environ.get("RLVR_CACHE"):
        cache_root()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `rlvr` console script; maps errors to exit codes."""
    from rich.markup import escape

    from rlvr_cli.cli.common import console

    try:
        _check_environment()
        rv = app(args=argv, prog_name="rlvr", standalone_mode=False)
    except _EXIT as e:
        sys.exit(e.exit_code)
    except _CLICK_ERROR as e:  # usage errors: exit 2 with click's own message
        e.show()
        sys.exit(e.exit_code)
    except _ABORT:
        console.print("aborted")
        sys.exit(130)
    except UserError as e:
        for line in e.problems:
            console.print(f"[red]error:[/red] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
        sys.exit(2)
    except RunFailed as e:
        console.print(f"[red]run failed:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - the CLI's last line of defence
        if os.environ.get("RLVR_DEBUG"):
            traceback.print_exc()
        console.print(
            f"[red]internal error:[/red] {type(e).__name__}: {escape(str(e))} (set RLVR_DEBUG=1 for the traceback)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
