"""The runs table on `/`: its columns, the row each run becomes, the orders the server sorts by,
and the page of runs fetched for the page state (``GET /api/runs``, filtered and paginated on
the server; dash-ag-grid shows one page)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import dash_ag_grid as dag

from dashboard.api_client import ApiClient
from dashboard.run_kind import control_badge, stop_reason_label
from dashboard.state import INT_MAX, parse_int
from dashboard.theme import all_tasks, family_label, family_names, task_label
from layerscope_core.provenance import commit_label

PAGE_SIZES = (25, 50, 100, 200)
# ``GET /api/runs?sort=``: the server sorts, so the order holds across pages
SORTS = tuple(
    (f"{d}{col}", f"{label} {arrow}")
    for col, label in (
        ("id", "id"),
        ("name", "name"),
        ("family", "family"),
        ("task", "task"),
        ("seed", "seed"),
        ("n_params", "params"),
        ("steps", "steps"),
        ("train_seconds", "train time"),
        ("created_at", "created"),
    )
    for d, arrow in (("", "↑"), ("-", "↓"))
)

PCT = {"function": "params.value == null ? '' : (100 * params.value).toFixed(1) + '%'"}
COLUMNS = [
    {"field": "id", "headerName": "id", "width": 80, "pinned": "left"},
    {"field": "name", "headerName": "name", "minWidth": 200, "flex": 2, "tooltipField": "name"},
    {"field": "suite", "headerName": "suite", "width": 120},
    {"field": "tags_label", "headerName": "tags", "width": 150, "tooltipField": "notes"},
    {"field": "family_label", "headerName": "family", "width": 120},
    {"field": "task_label", "headerName": "task", "width": 110},
    {"field": "seed", "headerName": "seed", "width": 80},
    {"field": "n_layers", "headerName": "layers", "width": 90},
    {"field": "d_model", "headerName": "d_model", "width": 100},
    {
        "field": "n_params",
        "headerName": "params",
        "valueFormatter": {"function": "params.value == null ? '' : (params.value / 1000).toFixed(0) + 'K'"},
        "width": 100,
    },
    {"field": "steps", "headerName": "steps", "width": 90},
    {
        "field": "control_badge",
        "headerName": "control",
        "width": 140,
        "headerTooltip": "a random-init control: the same architecture and seed as a trained run, not trained, probed "
        "only (docs/SCIENCE.md#controls)",
        "cellClassRules": {"cell-control": "params.value != null && params.value != ''"},
    },
    {
        "field": "stop_reason_label",
        "headerName": "stopped",
        "width": 150,
        "headerTooltip": "why training stopped: trained (criterion reached), plateau (no gain over the last evaluations), "
        "budget (still improving when its steps ran out), time limit (docs/SCIENCE.md#plateau)",
    },
    {
        "field": "trained_label",
        "headerName": "trained",
        "width": 110,
        "headerTooltip": "held-out token accuracy at the training length reached the run's early-stop criterion",
        "cellClassRules": {"cell-untrained": "params.value == 'untrained'"},
    },
    {
        "field": "heldout_acc",
        "headerName": "held-out",
        "valueFormatter": PCT,
        "width": 105,
        "headerTooltip": "held-out token accuracy at the training length when training ended",
    },
    {
        "field": "acc_40",
        "headerName": "acc L=40",
        "valueFormatter": PCT,
        "width": 110,
        "headerTooltip": "token accuracy at the training length",
    },
    {
        "field": "acc_max",
        "headerName": "acc longest L",
        "valueFormatter": PCT,
        "width": 130,
        "headerTooltip": "token accuracy at the longest eval length (out of distribution)",
    },
    {"field": "pretrained", "headerName": "pretrained", "width": 140},
    {
        "field": "made_on",
        "headerName": "made on",
        "width": 170,
        "tooltipField": "made_on",
        "headerTooltip": "device and host the run was trained on (a study made in parts mixes them)",
    },
    {
        "field": "commit",
        "headerName": "commit",
        "width": 100,
        "headerTooltip": "git commit of the code that trained the run (empty: not recorded)",
    },
    {"field": "created_at", "headerName": "created", "width": 170},
]
# the run record's fields a row shows as they are
PLAIN_FIELDS = (
    "id",
    "name",
    "suite",
    "family",
    "task",
    "seed",
    "n_layers",
    "d_model",
    "n_params",
    "steps",
    "pretrained",
    "made_on",
)


def table_row(run: dict) -> dict:
    """A run record (``GET /api/runs``) as the grid's row: the fields of :data:`COLUMNS`."""
    beh = run.get("behaviour") or {}
    lengths = sorted(int(k) for k in beh if str(k).isdigit())
    return {
        **{k: run.get(k) for k in PLAIN_FIELDS},
        "commit": commit_label(run.get("made_with"), 7),
        "tags_label": ", ".join(run.get("tags") or []),
        "notes": run.get("notes"),
        "row_id": str(run.get("id")),  # getRowId must return a string (AG Grid warns otherwise)
        "trained_label": trained_label(run),
        "control_badge": control_badge(run),
        "stop_reason_label": stop_reason_label(run),
        "heldout_acc": run.get("heldout_acc"),
        "family_label": family_label(run.get("family", "")),
        "task_label": task_label(run.get("task", "")),
        "acc_40": (beh.get("40") or {}).get("token_acc"),
        "acc_max": (beh.get(str(lengths[-1])) or {}).get("token_acc") if lengths else None,
        "created_at": str(run.get("created_at", ""))[:19].replace("T", " "),
    }


def trained_label(run: dict) -> str:
    """``trained`` / ``untrained`` from the API's computed ``trained`` field; ``–`` when absent."""
    t = run.get("trained")
    return "–" if t is None else ("trained" if t else "untrained")


def runs_grid() -> dag.AgGrid:
    """The grid (id ``rn-grid``): one page of rows, several selectable (they open other views)."""
    return dag.AgGrid(
        id="rn-grid",
        columnDefs=COLUMNS,
        rowData=[],
        defaultColDef={"sortable": False, "resizable": True, "suppressHeaderMenuButton": True},
        dashGridOptions={
            "rowSelection": {
                "mode": "multiRow",
                "checkboxes": True,
                "headerCheckbox": False,
                "enableClickSelection": True,
            },
            "tooltipShowDelay": 300,
            "animateRows": False,
            "suppressCellFocus": True,
            "rowHeight": 34,
            "headerHeight": 38,
        },
        getRowId="params.data.row_id",  # a string field of the row (see table_row)
        style={"height": "560px", "width": "100%"},
        className="ag-theme-quartz",
    )


def bundle_href(suite: str | None, *, allow_partial: bool = False) -> str:
    """The suite's results bundle (``GET /api/suites/{name}/bundle``); empty without a suite.
    ``allow_partial`` asks for it while runs are being rebuilt (the route answers 409 otherwise)."""
    if not suite:
        return ""
    return f"/api/suites/{quote(suite, safe='')}/bundle" + ("?allow_partial=true" if allow_partial else "")


BUNDLE_LABEL = "Download suite bundle"
BUNDLE_TITLE = "The suite's results bundle (layerscope import FILE loads it elsewhere)"


def bundle_link(suite: str | None, listed: list[dict]) -> tuple[str, str, str]:
    """(href, label, title) of the suite bundle's link, given ``GET /api/suites``'s rows. While
    runs of the suite are being rebuilt (``n_rebuilding``: their old results deleted, their own not
    all stored), a plain link would get a 409; the link then asks for the partial bundle and says so."""
    n = next((int(r.get("n_rebuilding") or 0) for r in listed if r.get("name") == suite), 0)
    if not suite or not n:
        return bundle_href(suite), BUNDLE_LABEL, BUNDLE_TITLE
    runs = "1 run is" if n == 1 else f"{n} runs are"
    return (
        bundle_href(suite, allow_partial=True),
        f"{BUNDLE_LABEL} (partial: {runs} being rebuilt)",
        f"{runs[0].upper()}{runs[1:]} being rebuilt: the bundle holds them without all their results. "
        "Wait for the rebuild to finish for a complete one.",
    )


def run_filters(state: dict) -> dict[str, Any]:
    """The page state's filters as ``GET /api/runs`` parameters (the table and its CSV alike)."""
    return {
        "task": state["task"] or None,
        "family": state["family"] or None,
        "seed": state["seed"],
        "suite": state["suite"] or None,
        "q": state.get("q") or None,
        "controls": state.get("controls") or "include",
    }


def page_size(state: dict) -> int:
    """The page state's page size: one of :data:`PAGE_SIZES`, else 50."""
    return state["size"] if state["size"] in PAGE_SIZES else 50


def page_number(state: dict) -> int:
    """The page state's page number, at least 1 and at most the last page whose offset the API
    takes (``offset`` <= 2**31 - 1: ``?page=50000000`` asks for no offset past it)."""
    size = page_size(state)
    return min(max(1, state["page"] or 1), INT_MAX // size + 1)


def fetch_page(api: ApiClient, state: dict) -> dict:
    """One page of runs for the page state (see :func:`page_size`, :func:`page_number`)."""
    size = page_size(state)
    offset = (page_number(state) - 1) * size
    return api.runs(**run_filters(state), limit=size, offset=offset, sort=state["sort"] or None)


def fetch_clamped_page(api: ApiClient, state: dict) -> tuple[dict, int]:
    """(the page of runs, its number): a page past the last one shows the last one (a link to
    ``?page=2`` after runs were deleted, a typed page number, ``?page=50000000``)."""
    page = fetch_page(api, state)
    p = page_number(state)
    n_pages = max(1, -(-page["total"] // page["limit"]))
    if p > n_pages:
        p = n_pages
        page = fetch_page(api, {**state, "page": p})
    return page, p


def pager_text(total: int, size: int, p: int) -> tuple[str, str, int]:
    """(``1–50 of 120 runs``, ``of 3``, the number of pages) for page ``p`` of ``size`` rows."""
    n_pages = max(1, -(-total // size))
    first = (p - 1) * size + 1 if total else 0
    last = min(total, p * size)
    return f"{first:,}–{last:,} of {total:,} runs", f"of {n_pages:,}", n_pages


def grid_rows(rows: Any) -> list[dict]:
    """The grid's selected rows that carry a run id, a known task and family (the grid sends
    what it was given; a tampered request may send anything)."""
    out = []
    for r in rows if isinstance(rows, list) else []:
        rid = parse_int(r.get("id")) if isinstance(r, dict) else None
        if rid is not None and rid >= 1 and r.get("task") in all_tasks() and r.get("family") in family_names():
            out.append({**r, "id": rid})
    return out
