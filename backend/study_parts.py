"""How far a preset study has come, and which part of it was made where (the bundle manifest's
``progress``, ``partial`` and ``parts`` blocks; backend/bundle_export.py writes them).

A study made in parts — one GPU lease, then resumed on a CPU, then on another machine — is one
suite whose runs come from several places and several commits. Each export says:

- ``progress``: the preset's run count and how many runs are stored, measured (status
  ``complete``: probes, interventions and patching stored), stored but not measured, not
  started, and remaining (not measured); only for a suite named after a preset.
- ``partial``: ``progress`` again with ``complete: false`` and the reasons carried from earlier
  exports (``why``, ``notes``), while runs remain; absent once the study is complete.
- ``parts``: one entry per place the runs were made — the parts of the bundle the suite was
  imported from (kept as they were) and the part made here since (the runs not in that bundle),
  each with its code version (``git_commit``, ``layerscope``, ``torch``, ``transformers``,
  ``python``), devices (``runs.made_on``), run count and first/last run stored. A part's code
  version is the one recorded with its runs (``runs.made_with``, schema 0004); runs made before
  0004 carry none, and the part made here then takes the exporting checkout's. When every run of
  the suite records its code, the parts are read off the runs alone (one per code version).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from layerscope_core.provenance import VERSION_KEYS

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@functools.cache
def _preset_hashes(preset: str) -> frozenset[str]:
    """The config hashes of every run (controls included) the preset expands to."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    return frozenset(j.run_hash() for j in expand_suite(SuiteParams(preset=preset)))


def suite_preset(suite: str, config_hashes: Iterable[str] | None = None) -> str | None:
    """The preset a suite's runs were made from: the (scratch) preset whose runs hold most of
    ``config_hashes`` (a suite run under another name, or with a preset's earlier settings:
    the first study's runs in suite "paper" are ``paper-75s``'s), else the preset named
    ``suite``; None when neither."""
    from layerscope_core.registry import PRESETS
    from worker.presets import PRESETS as TABLE

    hashes = set(config_hashes or ())
    if hashes:
        hits = {p: len(hashes & _preset_hashes(p)) for p in PRESETS if not TABLE[p].get("pretrained")}
        best = max(hits, key=lambda p: (hits[p], p == suite))
        if hits[best]:
            return best
    return suite if suite in PRESETS else None


@functools.cache
def _preset_runs(preset: str) -> int:
    """How many runs (random-init controls not counted) ``preset`` expands to: the presets are
    fixed tables, so once per process (``GET /api/suites`` asks on every page)."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    return len(expand_suite(SuiteParams(preset=preset, controls=False)))


def planned_run_count(
    params: dict[str, Any] | None, suite: str, config_hashes: Iterable[str] | None = None
) -> int | None:
    """How many runs (controls not counted) the suite asked for: its suite job's ``params``
    (:func:`suite_job_params`) expanded — a suite made with ``--family``/``--task``/``--seed``
    filters, or with its own models, plans fewer runs than its preset (a fresh user's two-run suite
    read "2 of the preset's 15"); without such a job (runs trained one by one, an imported suite),
    a suite of controls alone, or params that no longer expand (a model folder moved), the
    preset's count (:func:`preset_run_count`)."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    if params is not None and params.get("controls") != "only":
        try:
            return len(expand_suite(SuiteParams.model_validate({**params, "controls": False})))
        except (ValueError, OSError):  # the models it named are gone: the preset's count
            pass
    return preset_run_count(suite, config_hashes)


def suite_job_params(session: Session, suite: str) -> dict[str, Any] | None:
    """The params of the latest suite job named ``suite`` (its ``name``, else its ``preset``, as
    ``backend.api.queries.queued_suites`` reads them), as stored; None when no such job is here."""
    from sqlalchemy import select

    from store.models import Job

    for stored in session.execute(select(Job.params).where(Job.kind == "suite").order_by(Job.id.desc())).scalars():
        params = stored or {}
        if (params.get("name") or params.get("preset")) == suite:
            return dict(params)
    return None


def preset_run_count(suite: str, config_hashes: Iterable[str] | None = None) -> int | None:
    """How many runs (random-init controls not counted) the suite's preset (:func:`suite_preset`)
    expands to; None when it has none."""
    preset = suite_preset(suite, config_hashes)
    return None if preset is None else _preset_runs(preset)


def progress(runs: list[dict[str, Any]], preset_runs: int | None, in_flight: int = 0) -> dict[str, Any] | None:
    """Counts of ``runs`` (rows with ``status``) against the preset's ``preset_runs``; random-init
    control runs (``control`` set) are counted apart (``controls_stored``). ``in_flight``: runs not
    stored whose training state the bundle carries (``export --in-flight``): started, so not
    counted as ``runs_not_started`` (``runs_in_flight``)."""
    if preset_runs is None:
        return None
    controls = [r for r in runs if r.get("control")]
    runs = [r for r in runs if not r.get("control")]
    measured = sum(r.get("status") == "complete" for r in runs)
    return {
        "complete": measured >= preset_runs,
        "preset_runs": preset_runs,
        "runs_stored": len(runs),
        "runs_measured": measured,
        "runs_stored_not_measured": len(runs) - measured,
        **({"runs_in_flight": in_flight} if in_flight else {}),
        "runs_not_started": max(preset_runs - len(runs) - in_flight, 0),
        "runs_remaining": max(preset_runs - measured, 0),
        **({"controls_stored": len(controls)} if controls else {}),
    }


def partial_block(
    now: dict[str, Any] | None, imported: dict[str, Any] | None, note: str | None
) -> dict[str, Any] | None:
    """The ``partial`` block: today's ``progress`` plus the reasons of earlier exports
    (``why``, ``notes``) and ``note``. None once the preset study is complete; for a suite that
    is no preset (nothing to count) the imported bundle's block is kept as it was."""
    before = (imported or {}).get("partial") or {}
    if now is None:
        out = dict(before)
    elif now["complete"]:
        return None
    else:
        out = {**now, **({"why": before["why"]} if before.get("why") else {})}
    notes = [*before.get("notes", []), *([note] if note else [])]
    if notes:
        out["notes"] = notes
    return out or None


def _part(runs: list[dict[str, Any]], versions: dict[str, Any], source: str) -> dict[str, Any]:
    stamps = [str(r["created_at"]) for r in runs if r.get("created_at")]
    return {
        "source": source,
        **{k: versions.get(k) for k in VERSION_KEYS},
        "devices": sorted({r.get("made_on") or "unknown" for r in runs}),
        "runs": len(runs),
        "made_between": [min(stamps), max(stamps)] if stamps else None,
    }


def _by_code(runs: list[dict[str, Any]], default: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """One part per code version: each run's ``made_with``, ``default`` for runs without one."""
    groups: dict[tuple, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for r in runs:
        versions = r.get("made_with") or default
        key = tuple(versions.get(k) for k in VERSION_KEYS)
        groups.setdefault(key, (versions, []))[1].append(r)
    return [
        _part(rs, versions, source)
        for versions, rs in sorted(groups.values(), key=lambda g: min(str(r.get("created_at") or "") for r in g[1]))
    ]


def parts(
    runs: list[dict[str, Any]], exporter: dict[str, Any], imported: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Where the runs were made. When every run records the code that made it (``made_with``):
    one part per code version, read off the runs. Otherwise the imported bundle's parts (or the
    bundle as one part when it has none), then the runs not in it, one part per code version
    (the exporter's for runs that record none); each part's ``source`` names the export it first
    went out with. (The imported parts keep the counts they had: a run of theirs trained again
    here counts in both, and ``runs`` of the manifest says where each run now comes from.)

    Args:
        runs: the suite's run rows (``config_hash``, ``train_seconds``, ``made_on``, ``made_with``,
            ``created_at``).
        exporter: the exporter's versions (keys of ``VERSION_KEYS``).
        imported: the manifest of the bundle the suite was imported from, or None.
    """
    if runs and all(r.get("made_with") for r in runs):
        return _by_code(runs, exporter, "code recorded with each run (runs.made_with)")
    out: list[dict[str, Any]] = []
    # a run came in with the bundle when its config hash and training time are the bundle's: a
    # run of the bundle trained again here (it was stored without weights) belongs to this part
    came_in = {(r.get("config_hash"), r.get("train_seconds")) for r in (imported or {}).get("runs", [])}
    if imported:
        if imported.get("parts"):
            out += imported["parts"]
        else:
            mine = [r for r in runs if (r.get("config_hash"), r.get("train_seconds")) in came_in]
            out.append(_part(mine, imported, f"made for the export of {imported.get('created_at', '?')}"))
    here = [r for r in runs if (r.get("config_hash"), r.get("train_seconds")) not in came_in]
    if here:
        out += _by_code(here, exporter, f"made for the export of {exporter.get('created_at', '?')}")
    return out
