"""The callbacks a page registers, stated once: the URL ⇄ controls sync, "Save view", the
figures' PNG/SVG/CSV exports, the partial-study banner, and callbacks that read the page's state.

Every page with a state (all but /views) calls :func:`register_page` with what differs (its
state, controls, suite control and exports); /curves, /reversal, /patching and /probe-vs-causal
then decorate the functions that turn the page's state into its figures with :meth:`Page.on_state`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dash import Dash, Input, Output, State, no_update

from dashboard.api_client import ApiClient
from dashboard.components import Bind, register_exports, register_save_view, register_url_sync, state_from_controls
from dashboard.state import PageState
from dashboard.suites import default_suite, register_partial_banner, with_suite


@dataclass(frozen=True)
class Export:
    """A figure's export buttons: ``gid`` the ``dcc.Graph`` id, ``filename`` without extension,
    ``csv_rows(state)`` the rows its CSV holds."""

    gid: str
    filename: str
    csv_rows: Callable[[dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Page:
    """A registered page: what :meth:`on_state` needs to feed a callback the page's state."""

    app: Dash
    spec: PageState
    binds: Sequence[Bind]
    base_id: str
    resolve: Callable[[dict[str, Any]], dict[str, Any]] = lambda state: state

    def on_state(self, *outputs: Output, without: Sequence[str] = ()) -> Callable[[Callable], Callable]:
        """Register ``fn(state) -> outputs`` as a callback on ``outputs``, fed by every control of
        the page (but the fields named in ``without``) and the page's base state (a saved view):
        the controls' values are read into the page state (``state_from_controls``) first.
        Returns ``fn`` unchanged (callable directly in tests)."""
        binds = [b for b in self.binds if b.name not in set(without)]
        unknown = set(without) - {b.name for b in self.binds}
        if unknown:
            raise ValueError(f"without names no control of the page: {sorted(unknown)}")

        def decorate(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
            def from_controls(*values: Any) -> Any:
                return fn(self.resolve(state_from_controls(self.spec, binds, values[:-1], values[-1])))

            from_controls.__name__ = from_controls.__qualname__ = fn.__name__  # the callback is known by fn's name
            self.app.callback(*outputs, [Input(b.cid, b.prop) for b in binds], Input(self.base_id, "data"))(
                from_controls
            )
            add_first_draw(self.app, lambda: fn(self.resolve(self.spec.defaults())))
            return fn

        return decorate


Rows = Callable[[dict[str, Any]], list[dict[str, Any]]]


def _resolved(rows: Rows, resolve: Callable[[dict[str, Any]], dict[str, Any]]) -> Rows:
    """``rows`` of the state as ``resolve`` reads it."""
    return lambda state: rows(resolve(state))


def register_page(
    app: Dash,
    api: ApiClient,
    path_for: Callable[[str], str],
    *,
    key: str,
    path: str,
    spec: PageState,
    binds: Sequence[Bind],
    loc_id: str,
    suite_cid: str | None = None,
    exports: Sequence[Export] = (),
    reset: dict[str, Any] | None = None,
    lengths: LengthControl | None = None,
) -> Page:
    """Register what every page with a state has: the URL ⇄ controls sync on ``loc_id``
    (``reset``: fields set back when another control changes) and "Save view" under ``path``;
    on a page of one suite's aggregates, the partial-study banner over the suite in ``suite_cid``
    (the default suite when none is chosen); and each figure's exports. The page's base state is
    the store ``<key>-base``. ``lengths``: the page's eval-length control, whose options follow the
    suite in ``suite_cid`` and whose field every callback and export reads resolved to a length
    the suite was measured at (``dashboard.lengths``)."""
    base_id = f"{key}-base"
    resolve = lengths.resolve if lengths is not None else (lambda state: state)
    register_url_sync(app, spec=spec, binds=binds, loc_id=loc_id, base_id=base_id, reset=reset, resolve=resolve)
    register_save_view(  # a page of one suite's aggregates saves the suite it shows, default or chosen
        app,
        api,
        page_key=key,
        page_path=path,
        spec=spec,
        loc_id=loc_id,
        base_id=base_id,
        path_for=path_for,
        shown=(lambda state: with_suite(api, state)) if suite_cid is not None else None,
    )
    if suite_cid is not None:
        register_partial_banner(app, api, page_key=key, suite_cid=suite_cid, default=default_suite)
    for e in exports:
        register_exports(
            app,
            gid=e.gid,
            filename=e.filename,
            spec=spec,
            loc_id=loc_id,
            base_id=base_id,
            csv_rows=_resolved(e.csv_rows, resolve),
        )
    if lengths is not None and suite_cid is not None:
        register_length_options(app, lengths, suite_cid=suite_cid, spec=spec)
    return Page(app=app, spec=spec, binds=binds, base_id=base_id, resolve=resolve)


@dataclass(frozen=True)
class LengthControl:
    """A page's eval-length control: ``cid`` the control, ``key`` its state field,
    ``options(suite)`` its options for a suite, ``resolve(state)`` the state with the field set to
    lengths the suite was measured at (``dashboard.lengths``)."""

    cid: str
    key: str
    options: Callable[[str | None], list[dict[str, Any]]]
    resolve: Callable[[dict[str, Any]], dict[str, Any]]


def register_length_options(app: Dash, lengths: LengthControl, *, suite_cid: str, spec: PageState) -> None:
    """Another suite typed: the length control offers that suite's lengths, its value one of them."""

    @app.callback(
        Output(lengths.cid, "options"),
        Output(lengths.cid, "value", allow_duplicate=True),
        Input(suite_cid, "value"),
        State(lengths.cid, "value"),
        prevent_initial_call=True,
    )
    def _length_options(suite, current):
        suite = spec.value("suite", suite) or None
        value = spec.value(lengths.key, current)
        new = lengths.resolve({"suite": suite, lengths.key: value})[lengths.key]
        return lengths.options(suite), (no_update if new == value else new)


def add_first_draw(app: Dash, draw: Callable[[], Any]) -> None:
    """Record ``draw()``: what a page's callback computes on a first visit with no query string
    (its default state). ``dashboard.warm`` runs each once when the server starts, so the API's
    result cache holds the aggregates a first visitor asks for."""
    draws = getattr(app, "_layerscope_first_draws", None)
    if draws is None:
        draws = []
        app._layerscope_first_draws = draws  # type: ignore[attr-defined]  # Dash has no slot for app-level state; the warm-up reads it back
    draws.append(draw)


def first_draws(app: Dash) -> list[Callable[[], Any]]:
    """The draws :func:`add_first_draw` recorded, in the order the pages registered them."""
    return list(getattr(app, "_layerscope_first_draws", []))
