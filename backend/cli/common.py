"""What the CLI's command modules share: settings and the results DB, the choices of ``--preset``,
``--family`` and ``--method``, the device check, a job run in this process, JSON and table output.

A command module imports this module, never ``backend.cli`` itself (the entry point, which
``python -m backend.cli`` runs as ``__main__``). Errors raised here are :class:`CliError`,
``LookupError``, ``ValueError`` or ``typer.BadParameter``: the entry point prints each as one line
(with the traceback under ``--debug``) and exits non-zero.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer
from sqlalchemy.orm import Session, sessionmaker

from layerscope_core.model_sources import hub_lookup_notice, missing_folder_problem
from layerscope_core.plugins import method_names
from layerscope_core.registry import MEASURE_PARTS, PRESETS, family_names
from layerscope_core.suite_names import suite_name_problem

try:  # typer ≥ 0.2x vendors its own click; its exceptions are not click's
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer on top of click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]  # the same module, click's own

__all__ = ["click_exceptions"]


class CliError(Exception):
    """A known failure: printed as one line, exit status 1."""


# Choices from the one list of each (layerscope_core.registry), so `--help` and a typo's error list them.
FAMILIES = family_names()  # the registered families when the CLI is imported (built-ins + plugins)
Preset = StrEnum("Preset", {p: p for p in PRESETS})  # type: ignore[misc]  # members from the registry: an enum made at run time
FamilyChoice = StrEnum("FamilyChoice", {f: f for f in FAMILIES})  # type: ignore[misc]  # members from the registry: an enum made at run time
MeasurePartChoice = StrEnum("MeasurePartChoice", {p: p for p in MEASURE_PARTS})  # type: ignore[misc]  # members from the registry: an enum made at run time
METHOD_NAMES = method_names()  # the built-ins, then the plugins'
MethodChoice = StrEnum("MethodChoice", {m: m for m in METHOD_NAMES})  # type: ignore[misc]  # members from the registry: an enum made at run time


def new_suite_name(value: str | None) -> str | None:
    """A ``--name`` for the runs of a suite, checked against the suite-name rule
    (``layerscope_core.suite_names``) before anything is trained or queued."""
    why = suite_name_problem(value) if value is not None else None
    if why:
        raise typer.BadParameter(f"{value!r} {why}", param_hint="'--name'")
    return value


def model_sources(ctx: typer.Context, param: Any, value: list[str] | None) -> list[str] | None:
    """``--pretrained`` / ``--from-config`` values (hub names or local folders), a path-like one
    (``./m``, ``/m``, ``~/m``, ``a/b/c``: ``layerscope_core.model_sources``) refused at once when
    no such folder is here, before anything heavy is imported or the hub is tried: the API's words.

    Raises:
        typer.BadParameter: the first such value, "'./m': no such local folder"."""
    for source in value or []:
        if why := missing_folder_problem(source):
            raise typer.BadParameter(f"{source!r}: {why}", ctx=ctx, param=param)
    for source in value or []:
        if notice := hub_lookup_notice(source):  # the hub may retry for ~30 s: say why the wait
            typer.echo(f"layerscope: {notice}", err=True)
    return value


def settings(**overrides: Any):
    """The settings (``store.settings.get_settings``), with the overrides that are not None applied."""
    from store.settings import get_settings

    s = get_settings()
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return s.model_copy(update=overrides) if overrides else s


def session_factory(s=None) -> sessionmaker[Session]:
    """The results DB of ``s`` (default: settings), migrated to the newest schema.

    Raises:
        StartupError: a bad home, database URL or database file (one line).
    """
    from backend.core.startup import open_database
    from store.session import make_engine, make_sessionmaker

    s = s or settings()
    open_database(s)
    return make_sessionmaker(make_engine(s.resolved_db_url))


def setup_logging(verbose: bool = False) -> None:
    """Log lines with a time on stderr; the chatty libraries at WARNING."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "huey", "alembic", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def redact(url: str) -> str:
    """A database URL with its password hidden, to print."""
    from backend.core.startup import redact as _redact

    return _redact(url)


def check_device(device: str) -> None:
    """``--device`` is auto, cpu, mps, cuda or cuda:N, and that CUDA device is here.

    Raises:
        typer.BadParameter: another spelling, or no such CUDA device on this machine.
    """
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", device):
        raise typer.BadParameter(f"{device!r} is not one of auto, cpu, cuda, cuda:N", param_hint="'--device'")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter(
                f"{device!r}: no CUDA device is available on this machine", param_hint="'--device'"
            )
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise typer.BadParameter(
                f"{device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)", param_hint="'--device'"
            )


def run_here(kind: str, params: Any, settings, factory, device: str | None) -> dict:
    """Run one job (``worker.execute.execute``) in this process, without the queue; its output dict."""
    from science.context import JobContext
    from worker.execute import execute
    from worker.pipeline import WorkerEnv, resolve_device

    env = WorkerEnv(factory, settings.resolved_store_dir, resolve_device(device or settings.device))
    ctx = JobContext(description=kind)
    try:
        return execute(kind, params, ctx, env)
    finally:
        ctx.close()


def _default(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    raise TypeError(f"not JSON: {type(v).__name__}")


def echo_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (dates as ISO 8601)."""
    typer.echo(json.dumps(data, default=_default, indent=2))


def echo_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """A plain tab-aligned table on stdout (``column -t``-friendly): header, then one line a row."""

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, datetime):
            return f"{v:%Y-%m-%d %H:%M}"
        if isinstance(v, list):
            return ",".join(map(str, v)) or "-"
        return str(v).replace("\t", " ").replace("\n", " ")

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    typer.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` unless ``yes``; a "no" (or no terminal to ask on) aborts with exit status 1."""
    if yes:
        return
    try:
        ok = typer.confirm(question, default=False, err=True)
    except typer.Abort:  # no answer (end of input)
        ok = False
    if not ok:
        typer.echo("layerscope: nothing deleted (--yes deletes without asking)", err=True)
        raise typer.Exit(1)


class PrecisionChoice(StrEnum):
    """``--precision``: the forward passes' (``science.precision.PRECISIONS``)."""

    fp32 = "fp32"
    bf16 = "bf16"


PrecisionOption = Annotated[
    PrecisionChoice,
    typer.Option(
        help="Forward passes in fp32, or bf16 (bfloat16 autocast; states, edits, probes and statistics stay "
        "float32; docs/SCIENCE.md#precision)."
    ),
]
