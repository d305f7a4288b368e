"""The run panel on `/` (id ``rn-detail-card``): the run's header and links into the other views,
whether it trained, its actions (``run_actions``), its facts, loss curve and behaviour by length,
its configuration and the weights its probes and edits kept."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from dash import dcc, html

from dashboard.api_client import ApiClient, ApiError
from dashboard.components import api_alert
from dashboard.figures.common import graph_config
from dashboard.figures.runs import loss_figure, run_behaviour_figure
from dashboard.pages import run_actions
from dashboard.run_kind import control_badge, stop_reason_label
from dashboard.theme import family_label, task_label
from layerscope_core.provenance import commit_label
from science.budget import recorded_step_budget


def trained_flag(run: dict) -> html.Div:
    """The run panel's verdict line: trained or not, naming held-out accuracy and the criterion."""
    from science.trained import DEFAULT_CRITERION

    if run.get("control"):  # a random-init control is untrained by design: say what it is for
        return html.Div(
            f"{control_badge(run)}: the same architecture and seed as a trained run of the suite, "
            "not trained, probed only. Its curves are the floor the trained runs are measured against "
            "(docs/SCIENCE.md#controls).",
            className="alert alert-info trained-flag control-flag",
            id="rn-trained-flag",
        )
    acc, crit = run.get("heldout_acc"), run.get("early_stop_acc")
    crit = DEFAULT_CRITERION if crit is None else crit
    acc_txt = "no held-out accuracy stored" if acc is None else f"held-out token accuracy {100 * acc:.1f}%"
    if run.get("trained"):
        return html.Div(
            f"Trained: {acc_txt} at the training length ≥ criterion {100 * crit:.0f}%.",
            className="trained-flag trained-yes",
            id="rn-trained-flag",
        )
    return html.Div(
        f"Untrained: {acc_txt} at the training length < criterion {100 * crit:.0f}%. Its probes, "
        "edits and patching describe a model that has not learned the task.",
        className="alert alert-warning trained-flag trained-no",
        id="rn-trained-flag",
    )


def rebuilt_fact(first: dict[str, Any], train_config: dict[str, Any]) -> str:
    """What a run whose weights were rebuilt (docs/SCIENCE.md#rebuilding-weights) recorded first."""
    acc = first.get("heldout_acc")
    return (
        f"here, within the {recorded_step_budget(first, train_config)} steps its budget gave it; first made on "
        f"{first.get('made_on') or 'unknown'}: {first.get('steps')} steps in {float(first.get('train_seconds') or 0):.0f} s, "
        f"held-out acc {'–' if acc is None else f'{acc:.4f}'}"
    )


def run_facts(run: dict) -> list[tuple[str, Any]]:
    """(name, value) pairs of the panel's fact list."""
    facts = [
        ("family", family_label(run["family"])),
        ("task", task_label(run["task"])),
        ("seed", run["seed"]),
        ("layers", run["n_layers"]),
        ("d_model", run["d_model"]),
        ("parameters", f"{run['n_params']:,}"),
        ("steps", run.get("steps")),
        ("stopped early", "yes" if run.get("stopped_early") else "no"),
        ("stop reason", stop_reason_label(run)),
        ("train time", f"{run.get('train_seconds', 0):.0f} s"),
        ("suite", run.get("suite") or "–"),
        ("pretrained", run.get("pretrained") or "–"),
        ("config hash", (run.get("config_hash") or "")[:12]),
        ("checkpoint", run.get("checkpoint_id") or "–"),
        ("made on", f"{run.get('made_on') or 'unknown'}, commit {commit_label(run.get('made_with'), 7) or 'unknown'}"),
    ]
    if first := (run.get("made_with") or {}).get("rebuilt_from"):
        facts.append(("weights rebuilt", rebuilt_fact(first, run.get("train_config") or {})))
    if attempts := (run.get("made_with") or {}).get("trained_on"):
        facts.append(("trained on", trained_on_fact(attempts)))
    return facts


def trained_on_fact(attempts: list[dict[str, Any]]) -> str:
    """Where each attempt of a resumed run trained (``made_with.trained_on``), e.g. "steps 0–7,399:
    not recorded; from step 7,400: cpu on vm" for a run a GPU lease began before attempts were
    recorded (docs/SCIENCE.md#resuming-training)."""
    parts = []
    if attempts and attempts[0]["from_step"] > 0:
        parts.append(f"steps 0–{attempts[0]['from_step'] - 1:,}: not recorded")
    parts += [f"from step {a['from_step']:,}: {a['device']}" for a in attempts]
    return "; ".join(parts)


def _header(run: dict, path_for) -> html.Div:
    """``Run #3 name`` and the links that open the run in the other views."""
    q = {"task": run["task"], "family": run["family"], "seed": run["seed"], "run": run["id"]}
    curves = path_for("/curves?" + urlencode({"tasks": run["task"], "families": run["family"]}))
    links = [
        dcc.Link("Layerwise curves", href=curves, className="btn btn-sm"),
        dcc.Link("Probe vs causal", href=path_for("/probe-vs-causal?" + urlencode(q)), className="btn btn-sm"),
        dcc.Link("Patching", href=path_for("/patching?" + urlencode({"runs": run["id"]})), className="btn btn-sm"),
    ]
    title = html.H2(
        [
            "Run ",
            html.Span(f"#{run['id']}", className="muted"),
            " ",
            html.Span(run.get("name", ""), className="run-name"),
        ],
        className="card-title",
    )
    return html.Div([title, html.Div(links, className="export-buttons")], className="card-header")


def _facts_and_figures(run: dict) -> html.Div:
    """The facts beside the loss curve and the behaviour by length."""
    return html.Div(
        [
            html.Dl([x for k, v in run_facts(run) for x in (html.Dt(k), html.Dd(str(v)))], className="facts"),
            html.Div(
                dcc.Graph(figure=loss_figure(run), config=graph_config(f"run-{run['id']}-loss")),
                className="detail-fig",
            ),
            html.Div(
                dcc.Graph(figure=run_behaviour_figure(run), config=graph_config(f"run-{run['id']}-behaviour")),
                className="detail-fig",
            ),
        ],
        className="detail-grid",
    )


def run_detail(api: ApiClient, run_id: int, path_for) -> Any:
    """The panel of run ``run_id`` (an alert when the API cannot give it)."""
    try:
        run = api.run(run_id)
    except ApiError as exc:
        return api_alert(exc)
    cfg = {
        "task_params": run.get("task_params"),
        "model_config": run.get("model_config"),
        "train_config": run.get("train_config"),
    }
    return html.Div(
        [
            _header(run, path_for),
            trained_flag(run),
            run_actions.rebuild_section(run),
            run_actions.annotation_section(run),
            _facts_and_figures(run),
            html.Details([html.Summary("Configuration (JSON)"), html.Pre(json.dumps(cfg, indent=2, default=str))]),
            learned_weights(api, run["id"]),
        ],
        className="card",
        id="rn-detail-card",
    )


def _weight_row(w: dict) -> html.Tr:
    download = f"{w['kind']}-{w['method'] or 'probe'}-L{w['eval_length']}-layer{w['layer']}.safetensors"
    link = html.A(f"{w['artifact_id'][:12]}….safetensors", href=f"/api/artifacts/{w['artifact_id']}", download=download)
    return html.Tr(
        [
            html.Td(w["kind"]),
            html.Td(w["method"] or "–"),
            html.Td("emb" if w["layer"] == -1 else str(w["layer"])),
            html.Td(str(w["eval_length"])),
            html.Td(link),
        ]
    )


def learned_weights(api: ApiClient, run_id: int) -> html.Details:
    """What the run's probes and edits learned: one download link per kept safetensors
    file (probe weights and class directions; an edit's removed directions)."""
    try:
        rows = api.run_weights(run_id)
    except ApiError as exc:
        return html.Details([html.Summary("Probe weights and removed directions"), api_alert(exc)])
    if not rows:
        body: Any = html.P(
            "None kept for this run (measured before they were stored, or imported without them).", className="muted"
        )
    else:
        head = html.Thead(html.Tr([html.Th(h) for h in ("kind", "method", "layer", "eval length", "file")]))
        body = html.Table(
            [head, html.Tbody([_weight_row(w) for w in rows])], className="weights-table", id="rn-weights"
        )
    return html.Details([html.Summary(f"Probe weights and removed directions ({len(rows)} safetensors files)"), body])
