"""One run per seed in a suite's cell: the runs a suite would add next to runs of the same seeds
made with other settings, and the refusal the CLI, the API and the suite runner share
(docs/SCIENCE.md#suites). Imports no torch: the API calls it when a suite is submitted."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import sessionmaker

from science.measurement_version import MEASUREMENT_VERSION
from store.models import InterventionResult, PatchingResult, ProbeResult, Run
from store.session import session_scope
from worker.job_params import TrainParams, config_folder_depth


def stored_with_other_settings(jobs: list[TrainParams], factory: sessionmaker) -> list[dict[str, Any]]:
    """The runs of ``jobs`` that are not stored under their config hash but whose suite already
    holds a run of the same cell — family, task, pretrained model (and depth), any seed — made
    with other settings (a study imported or made with other overrides, e.g. ``--max-seconds
    75``): a new seed must be trained as the cell's other seeds were, or the seed statistics would
    pool two recipes. A model built from a transformers config (``from_config``) is in the cell of
    its family, task and depth, as the pages and claims group runs: another config of that depth
    (another width, say) is another setting, refused here rather than pooled with the cell's seeds
    in every curve and profile. The seed itself is not a setting. One group per suite and set of differing
    settings: ``{"suite", "count", "diffs": [(key, stored, now), …]}`` (``diffs`` empty when the
    stored run has no training config to compare)."""
    jobs = [j for j in jobs if j.suite]
    if not jobs:
        return []
    with session_scope(factory) as s:
        rows = s.execute(
            select(
                Run.suite,
                Run.family,
                Run.task,
                Run.seed,
                Run.pretrained,
                Run.n_layers,
                Run.config_hash,
                Run.train_config,
                Run.control,
            ).where(Run.suite.in_({j.suite for j in jobs}))
        ).all()
    by_key: dict[tuple, list] = {}
    for r in rows:  # the cell as the aggregates key it (backend.api.across_seeds), controls apart
        by_key.setdefault((r.suite, r.family, r.task, r.pretrained or None, r.control), []).append(r)
    groups: dict[tuple, dict[str, Any]] = {}
    for job in jobs:
        # a random-init control is the seed's twin, not a second run of it
        key = (job.suite, job.family, job.task, job.pretrained or None, job.control)
        stored = by_key.get(key, [])
        if any(r.config_hash == job.run_hash() for r in stored):
            continue  # this very run is stored: resumed as usual
        now = {k: v for k, v in job.run_config().items() if k != "seed"}
        # a run of another depth is a depth sweep, not a second run of this seed (a pretrained
        # model's depth comes from the hub; a config's from its config.json, None: unknown)
        depth = _depth(job)
        if depth is None and job.from_config:  # a hub name's config, not read here: its own runs only
            stored = [r for r in stored if (r.train_config or {}).get("from_config") == job.from_config]
        else:
            stored = [r for r in stored if depth is None or r.n_layers is None or r.n_layers == depth]
        for r in stored:
            before = {k: v for k, v in (r.train_config or {}).items() if k != "seed"}
            if not before and r.seed != job.seed:
                continue  # another seed with no recorded settings: nothing to compare
            diffs = tuple(
                (k, before.get(k), now.get(k))
                for k in sorted(set(before) | set(now))
                if before and before.get(k) != now.get(k)
            )
            if before and not diffs:
                continue  # another seed trained as this one will be
            g = groups.setdefault((job.suite, repr(diffs)), {"suite": job.suite, "count": 0, "diffs": list(diffs)})
            g["count"] += 1
            break  # one conflict per run asked for
    return list(groups.values())


def _depth(job: TrainParams) -> int | None:
    """The depth a job's model will have, where it is known before building it (a pretrained
    model's comes from the hub: None; a config's from its config.json)."""
    if job.pretrained:
        return None
    return config_folder_depth(job.from_config) if job.from_config else job.n_layers


def pooled_models(jobs: list[TrainParams]) -> list[str]:
    """One line per cell in which ``jobs`` themselves would put runs of two different models —
    two transformers configs (``from_config``) of one family and depth, or one beside a built-in
    model of that depth — for a seed of one suite: the curves, profiles and claims would pool them
    as seeds of one cell (a suite holds one run per seed in each cell)."""
    cells: dict[tuple, dict[str, TrainParams]] = {}
    for job in jobs:
        depth = _depth(job)
        if not job.suite or job.pretrained or depth is None:
            continue  # a pretrained model's cell is keyed by its name; a depth not known here: not compared
        key = (job.suite, job.family, job.task, job.control, depth, job.seed)
        cells.setdefault(key, {}).setdefault(job.from_config or "", job)
    lines = []
    for (suite, family, task, _control, depth, _seed), models in cells.items():
        if len(models) > 1:
            names = " and ".join(repr(m) if m else f"the built-in {family}" for m in sorted(models))
            line = (
                f"{names} make the same cell of suite {suite!r} ({family} × {task}, {depth} layers): "
                "their runs would be pooled as seeds of one cell"
            )
            if line not in lines:
                lines.append(line)
    return lines


def stored_in_other_suites(jobs: list[TrainParams], factory: sessionmaker) -> dict[str, int]:
    """Suite name → how many of ``jobs`` are stored, under their own config hash, in that other
    suite. A run is stored once, keyed by its settings (the suite name is a label, not a setting):
    running it again under another name would move it out of the suite it belongs to."""
    jobs = [j for j in jobs if j.suite]
    if not jobs:
        return {}
    wanted = {j.run_hash(): j.suite for j in jobs}
    with session_scope(factory) as s:
        rows = s.execute(select(Run.config_hash, Run.suite).where(Run.config_hash.in_(list(wanted)))).all()
    out: dict[str, int] = {}
    for h, suite in rows:
        if suite and suite != wanted[h]:
            out[suite] = out.get(suite, 0) + 1
    return out


class SuiteSettingsConflict(ValueError):
    """A suite would get a second run of a seed, made with other settings: one suite holds one run
    per seed in each cell (docs/SCIENCE.md#suites), else its statistics count a seed twice."""


def check_one_run_per_seed(jobs: list[TrainParams], factory: sessionmaker) -> None:
    """Raise :class:`SuiteSettingsConflict` (one line per group, naming the differing settings)
    when ``jobs`` would pool two models in one cell (:func:`pooled_models`), when
    :func:`stored_with_other_settings` finds any, or when runs of ``jobs`` are stored, with
    the same settings, in another suite (:func:`stored_in_other_suites`)."""
    pooled = pooled_models(jobs)
    if pooled:
        raise SuiteSettingsConflict(
            "; ".join(pooled) + ": run each model as a suite of its own (--name), or models of different depths"
        )
    lines = []
    for g in stored_with_other_settings(jobs, factory):
        shown = ", ".join(f"{k} {_short(a)} vs {_short(b)}" for k, a, b in g["diffs"][:4]) + (
            f", +{len(g['diffs']) - 4} more" if len(g["diffs"]) > 4 else ""
        )
        lines.append(
            f"{g['count']} run(s) of suite {g['suite']!r} are stored with other settings "
            f"({shown or 'settings not recorded'})"
        )
    if lines:
        raise SuiteSettingsConflict(
            "; ".join(lines) + ": a suite holds one run per seed, so pass the same overrides "
            "to resume them, or run these settings under another suite name (--name)"
        )
    elsewhere = stored_in_other_suites(jobs, factory)
    if elsewhere:
        shown = ", ".join(f"{n} in suite {name!r}" for name, n in sorted(elsewhere.items()))
        raise SuiteSettingsConflict(
            f"{sum(elsewhere.values())} of these runs are stored already with the same "
            f"settings ({shown}): a run is stored once, keyed by its settings, so resume that "
            "suite, or change a setting (e.g. --seed) to make new runs"
        )


def other_measurement_versions(jobs: list[TrainParams], factory: sessionmaker) -> dict[str, dict[int, int]]:
    """Suite → ``{measurement_version: result rows}`` of the versions other than this code's
    (:data:`~science.measurement_version.MEASUREMENT_VERSION`) stored in the suites of ``jobs``."""
    suites = {j.suite for j in jobs if j.suite}
    out: dict[str, dict[int, int]] = {}
    if not suites:
        return out
    with session_scope(factory) as s:
        for model in (ProbeResult, InterventionResult, PatchingResult):
            q = (
                select(Run.suite, model.measurement_version, func.count())
                .join(Run, Run.id == model.run_id)
                .where(Run.suite.in_(suites), model.measurement_version != MEASUREMENT_VERSION)
                .group_by(Run.suite, model.measurement_version)
            )
            for suite, version, n in s.execute(q):
                if suite is None:  # the WHERE holds named suites only
                    continue
                counts = out.setdefault(suite, {})
                counts[int(version)] = counts.get(int(version), 0) + int(n)
    return out


def mixed_versions_warning(jobs: list[TrainParams], factory: sessionmaker) -> str | None:
    """The warning of a suite resume whose measurements would be stored next to rows of another
    measurement version (docs/SCIENCE.md#measurement-versions): a suite is meant to be measured by
    one version, and its views say when it is not. None when every stored row is this version's.
    A warning, not a refusal: numbers of two versions agree within stated tolerances."""
    found = other_measurement_versions(jobs, factory)
    if not found:
        return None
    shown = "; ".join(
        f"suite {suite!r} holds "
        + ", ".join(f"{n} result row(s) of measurement version {v}" for v, n in sorted(counts.items()))
        for suite, counts in sorted(found.items())
    )
    return (
        f"warning: {shown}; what is measured now is version {MEASUREMENT_VERSION}, so the suite will mix "
        "measurement versions (its pages and report say so). To keep one version, measure every run again "
        "(--force), or resume it with the layerscope that made it (docs/SCIENCE.md#measurement-versions)"
    )


def _short(v: Any) -> str:
    text = str(v)
    return text if len(text) <= 40 else text[:37] + "..."
