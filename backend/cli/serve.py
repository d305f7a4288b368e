"""``layerscope serve [BUNDLE] [--host --port]``: the API (/api) and the dashboard (/) in one
uvicorn process; with a bundle, that bundle read-only without a database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from backend.cli.common import CliError, session_factory, settings, setup_logging


def serve(
    bundle: Annotated[
        Path | None,
        typer.Argument(help="A results bundle to show read-only, without a database (read into a temporary one)."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Interface to listen on (default 127.0.0.1; beyond loopback every write needs a token)."),
    ] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (default 8050).")] = None,
    dashboard: Annotated[bool, typer.Option(help="Serve the dashboard at / too.")] = True,
    limit_concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=10_000,
            help="Heavy requests (exports, aggregates: /api/export/*, /api/curves, /api/profiles, "
            "/api/claims, suite bundles) served at once; more answer 503 with Retry-After, so "
            "/api/health and light reads stay fast (default 4: LAYERSCOPE_LIMIT_CONCURRENCY).",
        ),
    ] = None,
    warm: Annotated[
        bool,
        typer.Option(
            help="Once listening, compute what each dashboard page shows first (the suites' claims, "
            "profiles and curves) into the API's result cache, so the first visitor waits for none of it.",
        ),
    ] = True,
) -> None:
    """Serve the API (/api) and the dashboard (/); `serve BUNDLE.zip`: a bundle, read-only."""
    import uvicorn

    from backend.app import create_app, warm_when_up

    setup_logging()
    where = settings(host=host, port=port)
    check_port_free(where.host, where.port)  # one line now, not uvicorn's log and exit status 3
    if bundle is not None:
        import signal

        from backend.cli.supervision import raise_interrupt
        from backend.serve_bundle import bundle_app, remove_temporary

        s, application = bundle_app(bundle, host=host, port=port, dashboard=dashboard)
        # uvicorn re-raises the signal that stopped it once it has shut down: SIGTERM's default
        # would end the process there, before any clean-up; read as Ctrl-C, the folder goes
        signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            typer.echo(f"layerscope: {bundle} read into a temporary database, served read-only", err=True)
            announce(s)
            if warm:
                warm_when_up(application.app)
            uvicorn.run(application, host=s.host, port=s.port, log_level="info", access_log=False)
        finally:
            remove_temporary(s)
        return
    s = where
    if limit_concurrency is not None:
        s = s.model_copy(update={"limit_concurrency": limit_concurrency})
    application = create_app(s, session_factory(s), dashboard=dashboard)
    announce(s)
    if warm:
        warm_when_up(application)
    uvicorn.run(application, host=s.host, port=s.port, log_level="info", access_log=False)


def announce(settings) -> None:
    """Print (stderr) where the dashboard and the API docs are, and the token rule beyond loopback."""
    typer.echo(
        f"layerscope: dashboard at {settings.resolved_api_url}/   API at {settings.resolved_api_url}/api/docs", err=True
    )
    if settings.listens_beyond_loopback:
        typer.echo(
            "layerscope: listening beyond loopback — every write needs 'Authorization: Bearer <token>' "
            "(layerscope token create --name NAME)",
            err=True,
        )


def check_port_free(host: str, port: int) -> None:
    """Raises CliError when ``host:port`` cannot be listened on (in use, or not this machine's)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no conflict
        try:
            sock.bind(addr)
        except OSError as exc:
            raise CliError(
                f"cannot listen on {host}:{port}: {exc.strerror} (another server there? pick one with --port)"
            ) from None
