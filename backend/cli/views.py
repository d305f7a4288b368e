"""``layerscope views …``: saved dashboard views (short links ``/v/<slug>``).

layerscope views list [--json]
layerscope views delete SLUG [--yes]
"""

from __future__ import annotations

from typing import Annotated

import typer

from backend.cli import common as C

views_app = typer.Typer(help="Saved dashboard views.", no_args_is_help=True)


@views_app.command("list")
def views_list(as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (for scripts).")] = False) -> None:
    """Saved views, newest first: slug, page, title, who saved it (the token's name), when."""
    from backend.api.routes.views import list_saved

    with C.session_factory()() as s:
        rows = list_saved(s)
    if as_json:
        C.echo_json(rows)
        return
    C.echo_table(rows, ["slug", "page", "title", "created_by", "created_at"])
    if not rows:
        typer.echo("layerscope: no saved views here", err=True)


@views_app.command("delete")
def views_delete(
    slug: Annotated[str, typer.Argument(help="The view's slug (/v/SLUG).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Delete a saved view (its short link stops working)."""
    from backend.api.routes.views import delete_saved, find_saved

    with C.session_factory()() as s:
        view = find_saved(s, slug)
        C.confirm(f"Delete view {slug} ({view.page}, {view.title!r})?", yes)
        delete_saved(s, slug)
    typer.echo(f"layerscope: deleted view {slug}")
