"""The lines of the layerwise curves (:func:`dashboard.figures.curves.layerwise_curves`): which
rows make a line (a family; a pretrained model, or another depth of a family, gets its own),
and a line's traces on one facet — its seeds, 95% CI band, mean and selectivity — beside the
facet's control ("at initialisation") and per-token-type lines."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import plotly.graph_objects as go

from dashboard.figures.common import TraceBatch, ci_band, esc, esc_or, finite, untrained_suffix
from dashboard.figures.curve_extras import control_label, control_trace, type_trace
from dashboard.theme import FAMILIES, family_color, family_label, family_symbol, layer_name, ordered, rgba

UNTRAINED_OPACITY = 0.5  # mean line of a family × task that includes untrained runs

# a line: (family, its depth when the family has several or is pretrained else None, pretrained or "")
LineKey = tuple[str, int | None, str]


class Facet(NamedTuple):
    """One subplot: its place in the grid (1-based) and the task × eval length it shows."""

    row: int
    col: int
    task: str
    length: int | None


def x_value(r: dict[str, Any], by_depth: bool) -> Any:
    """A point's x: its normalised depth, or its layer index (emb = −1)."""
    return r["depth"] if by_depth else int(r["layer"])


def x_or_none(r: dict[str, Any], by_depth: bool) -> Any:
    """As :func:`x_value`, None where a row has no depth."""
    return r.get("depth") if by_depth else int(r["layer"])


def line_key(row: dict[str, Any], multi_depth: set[str]) -> LineKey:
    """A line per family; pretrained models and other depths of a family get their own line."""
    fam = row["family"]
    pre = row.get("pretrained") or ""
    return (fam, int(row.get("n_layers") or 0) if (fam in multi_depth or pre) else None, pre)


def line_label(key: LineKey) -> str:
    """The legend / hover name of a line (escaped: pretrained and family names are stored text)."""
    fam, n, pre = key
    if pre:
        return f"{esc(pre.rstrip('/').split('/')[-1])} ({n} layers)"
    return esc(family_label(fam)) + (f" ({n} layers)" if n else "")


@dataclass(frozen=True)
class Lines:
    """The rows grouped into lines: ``groups`` (task, eval length, line) → points;
    ``seed_groups`` (task, eval length, line, seed) → one seed's points; per line the run ids
    behind it and those of untrained runs."""

    multi_depth: set[str]
    fam_order: list[str]
    groups: dict[tuple, list[dict]]
    seed_groups: dict[tuple, list[dict]]
    run_ids: dict[LineKey, set]
    untrained: dict[LineKey, set]

    def keys_in(self, facet_rows: Sequence[dict[str, Any]]) -> list[LineKey]:
        """The lines of one facet, in family order."""
        return sorted(
            {line_key(r, self.multi_depth) for r in facet_rows},
            key=lambda k: (self.fam_order.index(k[0]), k[2], k[1] or 0),
        )

    def order(self, k: LineKey) -> tuple:
        """A sort key for lines whose family may be missing from the curves (controls, types)."""
        return (self.fam_order.index(k[0]) if k[0] in self.fam_order else len(self.fam_order), k[2], k[1] or 0)


def group_lines(
    rows: Sequence[dict[str, Any]], seed_rows: Sequence[dict[str, Any]] | None, families: Sequence[str] | None
) -> Lines:
    """Group ``rows`` (and the ``seed_rows`` of ``families``) into lines."""
    n_by_fam: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        n_by_fam[r["family"]].add(int(r.get("n_layers") or 0))
    multi_depth = {f for f, ns in n_by_fam.items() if len(ns) > 1}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["task"], int(r["eval_length"]), line_key(r, multi_depth))].append(r)
    seed_groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in seed_rows or []:
        if families is not None and r["family"] not in families:
            continue
        key = (r["task"], int(r["eval_length"]), line_key(r, multi_depth), r.get("seed"))
        seed_groups[key].append(r)
    run_ids: dict[tuple, set] = defaultdict(set)
    untrained: dict[tuple, set] = defaultdict(set)
    for r in rows:
        k = line_key(r, multi_depth)
        run_ids[k].update(r.get("run_ids") or [])
        untrained[k].update(r.get("untrained_run_ids") or [])
    fam_order = ordered([r["family"] for r in rows], FAMILIES)
    return Lines(multi_depth, fam_order, groups, seed_groups, run_ids, untrained)


@dataclass(frozen=True)
class _Line:
    """What every trace of one line on one facet shares."""

    key: LineKey
    label: str
    color: str
    group: str
    meta: dict[str, Any]
    n_untrained: int


def add_line(
    batch: TraceBatch,
    lines: Lines,
    facet: Facet,
    key: LineKey,
    *,
    by_depth: bool,
    show_ci: bool,
    show_selectivity: bool,
    legend_done: set[str],
) -> None:
    """One line on ``facet``: its seeds (one trace), CI band, mean and, when asked and stored, its
    selectivity; each legend entry shown once (``legend_done``)."""
    fam = key[0]
    pts = sorted(lines.groups[(facet.task, facet.length, key)], key=lambda r: int(r["layer"]))
    xs = [x_value(r, by_depth) for r in pts]
    label = line_label(key) + untrained_suffix(len(lines.untrained[key]), len(lines.run_ids[key]))
    meta = {
        "family": fam,
        "task": facet.task,
        "eval_length": facet.length,
        "n_layers": key[1],
        "pretrained": key[2] or None,
        "untrained_run_ids": sorted(lines.untrained[key]),
    }
    line = _Line(key, label, family_color(fam), f"{fam}-{key[1]}-{key[2]}", meta, len(lines.untrained[key]))
    seeds = _seed_trace(lines, facet, line, by_depth)
    if seeds is not None:
        batch.add(seeds, row=facet.row, col=facet.col)
    if show_ci:
        band = ci_band(
            xs,
            [r.get("lo") for r in pts],
            [r.get("hi") for r in pts],
            color=rgba(line.color, 0.18),
            name=f"{label} 95% CI",
            legendgroup=line.group,
            meta={**meta, "kind": "ci"},
        )
        batch.add(band, row=facet.row, col=facet.col)
    batch.add(_mean_trace(line, pts, xs, legend=label not in legend_done), row=facet.row, col=facet.col)
    legend_done.add(label)
    sel = [(x_, s) for x_, r in zip(xs, pts) if finite(s := r.get("selectivity"))]
    if show_selectivity and sel:
        trace = _selectivity_trace(line, sel, legend=f"{label} selectivity" not in legend_done)
        batch.add(trace, row=facet.row, col=facet.col)
        legend_done.add(f"{label} selectivity")


def _seed_trace(lines: Lines, facet: Facet, line: _Line, by_depth: bool) -> go.Scatter | None:
    """Every seed of the line in one trace (gaps between seeds): fast with 1,000 runs. None
    without seed rows."""
    sx: list = []
    sy: list = []
    stext: list = []
    seeds_here = []
    for (t2, l2, k2, seed), srows in sorted(lines.seed_groups.items(), key=lambda kv: str(kv[0])):
        if (t2, l2, k2) != (facet.task, facet.length, line.key):
            continue
        srows = sorted(srows, key=lambda r: int(r["layer"]))
        seeds_here.append(seed)
        sx += [x_value(r, by_depth) for r in srows] + [None]
        sy += [r["accuracy"] for r in srows] + [None]
        stext += [f"seed {esc(seed)}"] * len(srows) + [None]
    if not seeds_here:
        return None
    return go.Scatter(
        x=sx,
        y=sy,
        text=stext,
        mode="lines",
        connectgaps=False,
        line={"color": rgba(line.color, 0.45), "width": 1},
        name=f"{line.label} seeds",
        legendgroup=line.group,
        showlegend=False,
        hovertemplate=f"{line.label} · %{{text}}<br>%{{y:.1%}}<extra></extra>",
        meta={**line.meta, "kind": "seed", "seeds": seeds_here},
    )


def _mean_trace(line: _Line, pts: Sequence[dict[str, Any]], xs: Sequence[Any], *, legend: bool) -> go.Scatter:
    """The seed-mean curve with markers; the hover gives layer, depth, CI, n and the seeds.

    A line that includes untrained runs is drawn faint with open markers, so it cannot be read as a
    trained model's curve at a glance (the legend suffix says how many)."""
    custom = [
        [
            esc(r.get("layer_name") or layer_name(int(r["layer"]))),
            r.get("lo") if finite(r.get("lo")) else r.get("mean"),
            r.get("hi") if finite(r.get("hi")) else r.get("mean"),
            esc_or(r.get("n"), "?"),
            ", ".join(esc(s) for s in (r.get("seeds") or [])),
            f"{r['depth']:.2f}" if finite(r.get("depth")) else "–",
        ]
        for r in pts
    ]
    key, label, color, n_untrained = line.key, line.label, line.color, line.n_untrained
    symbol = family_symbol(key[0])
    if n_untrained and not symbol.endswith("-open"):
        symbol += "-open"
    return go.Scatter(
        x=xs,
        y=[r.get("mean") if finite(r.get("mean")) else None for r in pts],
        mode="lines+markers",
        opacity=UNTRAINED_OPACITY if n_untrained else 1.0,
        line={"color": color, "width": 2.5, "dash": "dash" if key[2] else "solid"},
        marker={
            "symbol": symbol,
            "size": 8 if not key[1] or key[1] <= 12 else 5,
            "color": color,
            "line": {"width": 1, "color": "white"},
        },
        name=label,
        legendgroup=line.group,
        showlegend=legend,
        customdata=custom,
        hovertemplate=(
            f"<b>{label}</b> · layer %{{customdata[0]}} (depth %{{customdata[5]}})"
            "<br>probe accuracy %{y:.1%} [95% CI %{customdata[1]:.1%}, %{customdata[2]:.1%}]"
            "<br>n = %{customdata[3]} seeds (%{customdata[4]})"
            + (f"<br>⚠ {n_untrained} untrained run(s): held-out accuracy below the criterion" if n_untrained else "")
            + "<extra></extra>"
        ),
        meta={**line.meta, "kind": "mean"},
    )


def _selectivity_trace(line: _Line, sel: Sequence[tuple[Any, float]], *, legend: bool) -> go.Scatter:
    """The probe's selectivity (accuracy − control-task accuracy), dotted, where stored."""
    return go.Scatter(
        x=[p[0] for p in sel],
        y=[p[1] for p in sel],
        mode="lines",
        line={"color": line.color, "width": 1.5, "dash": "dot"},
        name=f"{line.label} selectivity",
        legendgroup=line.group,
        showlegend=legend,
        hovertemplate=f"<b>{line.label}</b> selectivity %{{y:.1%}}<extra></extra>",
        meta={**line.meta, "kind": "selectivity"},
    )


def add_facet_extras(
    batch: TraceBatch,
    facet: Facet,
    control_rows: Sequence[dict[str, Any]],
    type_rows: Sequence[dict[str, Any]],
    lines: Lines,
    *,
    by_depth: bool,
    legend_done: set[str],
) -> None:
    """One facet's control lines ("at initialisation", dashed, a line per family) and
    per-token-type lines (thin, a line per family and token type)."""

    def add(key: LineKey, label: str, make: Callable[..., go.Scatter]) -> None:
        fam = key[0]
        trace = make(
            color=family_color(fam),
            x_of=lambda r: x_or_none(r, by_depth),
            legend=label not in legend_done,
            group=f"{fam}-{key[1]}-{key[2]}",
            meta={"family": fam, "task": facet.task, "eval_length": facet.length, "n_layers": key[1]},
        )
        batch.add(trace, row=facet.row, col=facet.col)
        legend_done.add(label)

    ctrl = _on_facet(control_rows, facet, lambda r: line_key(r, lines.multi_depth))
    for key in sorted(ctrl, key=lines.order):
        pts = sorted(ctrl[key], key=lambda r: int(r["layer"]))
        add(key, control_label(key[0]), partial(control_trace, pts, family=key[0]))
    types = _on_facet(type_rows, facet, lambda r: (line_key(r, lines.multi_depth), r["token_type"]))
    for key, tt in sorted(types, key=lambda kt: (lines.order(kt[0]), kt[1])):
        name = line_label(key)
        pts = sorted(types[(key, tt)], key=lambda r: int(r["layer"]))
        add(key, f"{name} · {esc(tt)} tokens", partial(type_trace, pts, family_name=name, token_type=tt))


def _on_facet(
    rows: Sequence[dict[str, Any]], facet: Facet, key_of: Callable[[dict[str, Any]], Any]
) -> dict[Any, list[dict]]:
    """The rows of ``facet``'s task and eval length, grouped by ``key_of``."""
    groups: dict[Any, list[dict]] = defaultdict(list)
    for r in rows:
        if r["task"] == facet.task and int(r["eval_length"]) == facet.length:
            groups[key_of(r)].append(r)
    return groups
