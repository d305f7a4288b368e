"""The ``layerscope`` app: the root options, every command group registered in one place, and
:func:`main`, which turns known errors into one line on stderr and a non-zero exit status.

Each command lives in the module of its group (``backend/cli/*.py``); this module only wires them,
in the order ``layerscope --help`` lists them.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated, Any

import typer

from backend.cli import admin, bundles, demo, jobs, models, rebuild, remeasure, runs, serve, tasks, training, views
from backend.cli.common import CliError
from backend.cli.common import click_exceptions as _cx
from backend.cli.validation import validation_message
from layerscope_core.text import VALIDATOR_PREFIX

app = typer.Typer(
    name="layerscope",
    help="Where does a sequence model keep its state? Train, probe, intervene, patch — and explore in the browser.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# commands first, then groups: the order of `layerscope --help`
app.command("export-model")(models.export_model)
app.command("capture")(models.capture)
app.command("serve")(serve.serve)
app.command("worker")(jobs.worker)
app.command("probe")(remeasure.probe)
app.command("intervene")(remeasure.intervene)
app.command("patch")(remeasure.patch)
app.command("export")(bundles.export_cmd)
app.command("import")(bundles.import_cmd)
app.command("report")(bundles.report_cmd)
app.command("demo")(demo.demo)
app.add_typer(admin.token_app, name="token")
app.add_typer(admin.db_app, name="db")
app.add_typer(training.suite_app, name="suite")
runs.register_suite_commands(training.suite_app)
app.add_typer(tasks.task_app, name="task")
runs.runs_app.command("rebuild-weights")(rebuild.rebuild_weights)
app.add_typer(runs.runs_app, name="runs")
app.add_typer(jobs.jobs_app, name="jobs")
app.add_typer(views.views_app, name="views")

_DEBUG = False  # --debug / LAYERSCOPE_DEBUG: an error's traceback is printed before its line


def _print_version(value: bool) -> None:
    if value:
        from layerscope_core.provenance import code_versions, commit_label

        v = code_versions()
        typer.echo(
            f"layerscope {v['layerscope']}"
            + (f" (commit {commit_label(v, 12)})" if v["git_commit"] else "")
            + f"; torch {v['torch']}, transformers {v['transformers']}, Python {v['python']}"
        )
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version (and commit) and exit."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", envvar="LAYERSCOPE_DEBUG", help="Print the traceback of an error too.")
    ] = False,
) -> None:
    """Where does a sequence model keep its state? Train, probe, intervene, patch — and explore in the browser."""
    global _DEBUG
    _DEBUG = debug


def _close_progress_bars() -> None:
    """Close the progress bars a failed command left open, so the error starts on its own line
    (a bar's last frame has no newline)."""
    tqdm = sys.modules.get("tqdm")  # only if something imported it: no import here
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", None) or ()):
        bar.close()


def _err(message: str) -> None:
    _close_progress_bars()
    if (_DEBUG or os.environ.get("LAYERSCOPE_DEBUG", "").lower() in ("1", "true", "yes")) and sys.exc_info()[0]:
        import traceback

        traceback.print_exc()
    typer.echo(f"layerscope: error: {message}", err=True)


def _negative_number(exc: Any, argv: list[str] | None) -> str | None:
    """The argument click read as an unknown option that is a negative number meant as a value
    (``intervene -3``), or None."""
    return next(
        (
            a
            for a in (sys.argv[1:] if argv is None else argv)
            if a.startswith(exc.option_name or "-") and re.fullmatch(r"-\d+(\.\d*)?", a)
        ),
        None,
    )


def settings_message(exc: Any) -> str:
    """One line per malformed setting of a pydantic ``ValidationError`` from ``store.settings``:
    the environment variable (``LAYERSCOPE_`` + the field), the value given and why it is refused."""
    parts = []
    for e in exc.errors():
        field = str(e["loc"][0]) if e.get("loc") else "?"
        parts.append(f"LAYERSCOPE_{field.upper()}={e.get('input')!s}: {e['msg']}")
    return "bad setting: " + "; ".join(parts) + " (environment variables or .env; README, Configuration)"


def main(argv: list[str] | None = None) -> int:
    """Console entry point: known errors → one line on stderr and a non-zero exit status.

    Exit status: 0 done; 1 a known failure (CliError, LookupError, ValueError, OSError, a startup
    or database error); 2 wrong usage (unknown option, bad value, invalid parameters, bad database
    URL); 130 interrupted."""
    from pydantic import ValidationError
    from sqlalchemy.exc import ArgumentError as SQLAlchemyArgumentError
    from sqlalchemy.exc import OperationalError

    from backend.core.startup import StartupError
    from store.settings import get_settings

    try:
        get_settings()
    except ValidationError as exc:  # a malformed LAYERSCOPE_* variable: before any command, --help too
        _err(settings_message(exc))
        return 2
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="layerscope")
    except _cx.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "layerscope --help", err=True)
        return 2
    except _cx.NoSuchOption as exc:
        # click reads any token starting with "-" as an option: a negative number meant as a value
        # (`intervene -3`) would read "No such option: -3"
        number = _negative_number(exc, argv)
        _err(
            f"{number} is not a valid value here: ids, seeds and counts are ≥ 0 (a run id ≥ 1)"
            if number
            else " ".join(exc.format_message().split())
        )
        return 2
    except _cx.UsageError as exc:  # includes BadParameter / MissingParameter
        # an option typed by a pydantic validator carries pydantic's "Value error, " inside click's words
        _err(" ".join(exc.format_message().split()).replace(f": {VALIDATOR_PREFIX}", ": "))
        return 2
    except (typer.Abort, KeyboardInterrupt):
        _err("interrupted")
        return 130
    except _cx.ClickException as exc:
        _err(exc.format_message())
        return exc.exit_code
    except ValidationError as exc:
        _err(validation_message(exc))  # named by the options typed (backend.cli.validation)
        return 2
    except StartupError as exc:
        _err(str(exc))
        return 1
    except OperationalError as exc:
        _err(f"database not reachable: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}")
        return 1
    except SQLAlchemyArgumentError as exc:  # e.g. LAYERSCOPE_DB_URL=bogus://x
        _err(f"bad database URL (LAYERSCOPE_DB_URL): {exc}")
        return 2
    except (CliError, LookupError, ValueError, OSError) as exc:  # BundleError is a ValueError
        _err(str(exc.args[0]) if isinstance(exc, LookupError) and exc.args else str(exc))
        return 1
    return rv if isinstance(rv, int) else 0
