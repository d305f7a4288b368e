"""What the CLI's command modules share (settings, the DB, JSON and table output), kept apart
from backend/cli.py so a command module never imports the entry point (``python -m backend.cli``
runs it as ``__main__``). Errors raised here are ``LookupError`` / ``ValueError``: the entry point
prints them as one line (with the traceback under ``--debug``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import typer
from sqlalchemy.orm import Session, sessionmaker


def settings():
    from store.config import get_settings

    return get_settings()


def session_factory(s=None) -> sessionmaker[Session]:
    """The results DB of ``s`` (default: settings), migrated to the newest schema."""
    from backend.core.startup import open_database
    from store.session import make_engine, make_sessionmaker

    s = s or settings()
    open_database(s)
    return make_sessionmaker(make_engine(s.resolved_db_url))


def _default(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    raise TypeError(f"not JSON: {type(v).__name__}")


def echo_json(data: Any) -> None:
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
