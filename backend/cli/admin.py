"""``layerscope token …`` (API tokens) and ``layerscope db upgrade`` (the results DB's schema).

layerscope token create --name NAME     # printed once; stored as SHA-256 only
layerscope token revoke NAME_OR_ID
layerscope token list [--json]
layerscope db upgrade                   # a SQLite file is backed up first
layerscope db rekey-artifacts [--dry-run]   # kept weights written before their bytes were deterministic
"""

from __future__ import annotations

from typing import Annotated

import typer

from backend.cli import common as C

token_app = typer.Typer(
    help="API tokens (needed for writes when the server listens beyond loopback).", no_args_is_help=True
)
db_app = typer.Typer(help="The results database.", no_args_is_help=True)


@token_app.command("create")
def token_create(name: Annotated[str, typer.Option(help="Who or what the token is for.")]) -> None:
    """Create a token; it is printed once (stdout) and stored as SHA-256 only."""
    from backend.core.security import create_token

    with C.session_factory()() as s:
        token_id, token = create_token(s, name)
    typer.echo(f"layerscope: token {token_id} ({name!r}) created; it is shown only now:", err=True)
    typer.echo(token)


@token_app.command("revoke")
def token_revoke(name_or_id: Annotated[str, typer.Argument(help="Token name or id.")]) -> None:
    """Revoke tokens by name or id."""
    from backend.core.security import revoke_token

    with C.session_factory()() as s:
        n = revoke_token(s, name_or_id)
    if n == 0:
        raise C.CliError(f"no active token named or numbered {name_or_id!r}")
    typer.echo(f"layerscope: revoked {n} token(s)")


@token_app.command("list")
def token_list(
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON on stdout (id, name, created_at, revoked; for scripts).")
    ] = False,
) -> None:
    """List tokens (names and ids; never the tokens)."""
    from backend.core.security import list_tokens

    with C.session_factory()() as s:
        rows = [{"id": t.id, "name": t.name, "created_at": t.created_at, "revoked": t.revoked} for t in list_tokens(s)]
    if as_json:
        C.echo_json(rows)
        return
    for t in rows:
        typer.echo(
            f"{t['id']}\t{t['name']}\t{t['created_at']:%Y-%m-%d %H:%M}\t{'revoked' if t['revoked'] else 'active'}"
        )


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the results DB to the newest schema (alembic upgrade head).

    A SQLite file is first copied to ``<file>.bak-<UTC time>-<revision>`` next to it."""
    from backend.core.startup import check_db_url, check_folders, explain
    from store.migrate import MigrationError, backup_sqlite, database_revision, head_revision, init_db

    settings = C.settings()
    url = settings.resolved_db_url
    shown = C.redact(url)
    check_folders(settings)
    check_db_url(url)
    try:
        was, head = database_revision(url), head_revision()
    except Exception as exc:  # a garbage file, an unreachable server: one line, not a traceback
        raise explain(exc, url) from exc
    if was == head:
        typer.echo(f"layerscope: {shown} at revision {head} already; nothing to do")
        return
    backup = backup_sqlite(url)
    if backup is not None:
        typer.echo(f"layerscope: backed up {shown} (revision {was or 'none'}) to {backup}")
    try:
        rev = init_db(url)
    except MigrationError as exc:
        raise C.CliError(f"upgrade of {shown} failed: {exc}" + (f"; backup at {backup}" if backup else "")) from exc
    except Exception as exc:  # one line naming the database and what to do, plus where the backup is
        if backup is None:
            raise explain(exc, url) from exc
        raise C.CliError(f"{explain(exc, url)}; the database is unchanged, and a backup is at {backup}") from exc
    typer.echo(f"layerscope: {shown} at revision {rev}" + (f" (was {was})" if was else ""))


@db_app.command("rekey-artifacts")
def db_rekey_artifacts(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would change; write and delete nothing.")
    ] = False,
) -> None:
    """Write kept weights (probe weights, removed directions) stored before their bytes were
    deterministic again as they are written now, and delete the old files no result row names:
    an edit applied at five eval lengths was five files, one now. Numbers do not change; later
    bundles of the suite carry one file per edit (backend/artifact_rekey.py)."""
    from backend.artifact_rekey import rekey_artifacts
    from models_store.artifacts import ArtifactStore

    settings = C.settings()
    store = ArtifactStore(settings.resolved_store_dir)
    with C.session_factory()() as s:
        try:
            r = rekey_artifacts(s, store, dry_run=dry_run)
        except ValueError as exc:  # a damaged file: nothing was changed
            raise C.CliError(f"{exc}; nothing was changed") from exc
    verb = "would re-key" if dry_run else "re-keyed"
    typer.echo(
        f"layerscope: {verb} {r.rows_rekeyed} of {r.rows} kept-weight row(s): {r.files_before} file(s) named "
        f"before, {r.files_after} after"
        + ("" if dry_run else f"; {len(r.removed)} old file(s) removed ({r.bytes_removed / 1e6:.1f} MB)")
        + (f"; {len(r.missing)} file(s) named but not in this store, left as they are" if r.missing else ""),
        err=True,
    )
