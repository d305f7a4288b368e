"""Probe versus causal, the words under a run's heatmap: what it shows (the run, the length,
the sequence counts, how many drops are read beyond random removal) and a notice when its rows
were measured with different settings."""

from __future__ import annotations

from collections.abc import Sequence

from dashboard.figures.captions import MEASUREMENT_VERSION_SETTING, mixed_settings
from dashboard.figures.common import finite
from dashboard.figures.probe_causal_table import EDIT_SETTINGS, PROBE_SETTINGS


def _at(rows: Sequence[dict], eval_length: int | None) -> list[dict]:
    return [r for r in rows if eval_length is None or int(r["eval_length"]) == int(eval_length)]


def settings_notice(probes: Sequence[dict], interventions: Sequence[dict], eval_length: int | None) -> str | None:
    """The mixed-settings notice: probe rows and edit rows are each checked on their own
    settings (a probe and an edit legitimately use different sequence counts), and all of them
    together on their measurement version (one view, one measurement code)."""
    parts = [
        n
        for n in (
            mixed_settings(_at(probes, eval_length), PROBE_SETTINGS),
            mixed_settings(_at(interventions, eval_length), EDIT_SETTINGS),
            mixed_settings(
                [*_at(probes, eval_length), *_at(interventions, eval_length)], [MEASUREMENT_VERSION_SETTING]
            ),
        )
        if n
    ]
    if not parts:
        return None
    return " ".join(parts)


def heatmap_caption(
    prefix: str | None,
    probes: Sequence[dict],
    interventions: Sequence[dict],
    eval_length: int | None,
    n_beyond: int,
    n_drops: int,
) -> str:
    """What the heatmap shows: the caller's ``prefix`` (run, suite), the length, the probe's and
    the edits' sequence counts, and how many drops are read beyond random removal."""
    ps, es = _at(probes, eval_length), _at(interventions, eval_length)

    def counts(rows, key):
        vals = sorted({int(r[key]) for r in rows if finite(r.get(key))})
        return "/".join(str(v) for v in vals) if vals else None

    head = [prefix] if prefix else []
    if eval_length is not None:
        head.append(f"L={int(eval_length)}")
    measured = []
    tr, te = counts(ps, "n_train"), counts(ps, "n_test")
    if tr or te:
        measured.append(f"probe: {tr or '?'} training / {te or '?'} test sequences")
    if ev := counts(es, "n_sequences"):
        fit = counts(es, "n_fit_sequences")
        measured.append(f"edits: {ev} sequences" + (f", fitted on {fit}" if fit else ""))
    if n_drops:
        measured.append(
            f"{n_beyond} of {n_drops} drops read beyond rank-matched random removal"
            if n_beyond
            else "drops raw (no random-removal control stored)"
        )
    return "\n".join(" · ".join(x) for x in (head, measured) if x)
