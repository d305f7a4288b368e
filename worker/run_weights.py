"""Whether a stored run's weights can be loaded here, and, when not, the one command that makes
them again. Shared by the CLI (probe/intervene/patch), ``POST /api/jobs`` and the job runner, so
a job that could only fail is refused up front with the same words. Imports no torch."""

from __future__ import annotations

from pathlib import Path

from layerscope_core.registry import PRESETS
from store.models import Run

# Overrides of ``layerscope suite`` that a stored run's train_config can differ from its preset by.
_FLAGS = {"max_seconds": "--max-seconds", "max_steps": "--max-steps"}


def _preset_diff(preset: str, run: Run) -> tuple[list[str], list[str]] | None:
    """(``suite`` flags for the overrides, other train_config keys that differ) of ``run`` against
    ``preset``'s config of its cell; None when the preset has no such cell."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    try:
        (job,) = expand_suite(
            SuiteParams(
                preset=preset,
                families=[run.family],
                tasks=[run.task],
                seeds=[run.seed],
                controls="only" if run.control else False,
            )
        )
    except ValueError:
        return None
    stored, made = run.train_config or {}, job.run_config()
    flags = [
        f"{flag} {stored[key]:g}"
        for key, flag in _FLAGS.items()
        if key in stored and stored[key] is not None and stored[key] != made.get(key)
    ]
    others = sorted(k for k in set(stored) | set(made) if k not in _FLAGS and stored.get(k) != made.get(k))
    return flags, others


def _preset_of(run: Run) -> tuple[str, tuple[list[str], list[str]]] | None:
    """(preset, (flags, other differing keys)) that makes ``run``'s cell, or None."""
    if run.pretrained:
        return None
    # the preset whose config of the cell is the run's (its own name first)
    order = sorted(PRESETS, key=lambda p: p != run.suite)
    found = next(((p, d) for p in order if (d := _preset_diff(p, run)) is not None and not d[1]), None)
    if found is None and run.suite is not None and run.suite in PRESETS:  # its own preset, differences named below
        own = _preset_diff(run.suite, run)
        found = None if own is None else (run.suite, own)
    return found


def rebuild_params(run: Run):
    """The suite job that rebuilds ``run``'s weights (what :func:`retrain_command` prints, as
    params): its preset and suite name, its cell, the budget overrides it was made with,
    ``rebuild_weights``. None when no preset makes its config (then only its own job can)."""
    from worker.job_params import SuiteParams

    found = _preset_of(run)
    if found is None or found[1][1]:
        return None
    preset, _ = found
    stored = run.train_config or {}
    from worker.presets import expand_suite

    controls = "only" if run.control else False
    (job,) = expand_suite(
        SuiteParams(preset=preset, families=[run.family], tasks=[run.task], seeds=[run.seed], controls=controls)
    )
    made = job.run_config()
    overrides = {k: stored[k] for k in _FLAGS if stored.get(k) is not None and stored[k] != made.get(k)}
    return SuiteParams(
        preset=preset,
        name=run.suite if run.suite and run.suite != preset else None,
        families=[run.family],
        tasks=[run.task],
        seeds=[run.seed],
        rebuild_weights=True,
        controls=controls,
        **overrides,
    )


def retrain_command(run: Run) -> str:
    """``layerscope suite --preset P [--name SUITE] --family F --task T --seed S [overrides]
    --rebuild-weights``: rebuilds this run's weights under its own config hash, within its
    recorded step budget (docs/SCIENCE.md#rebuilding-weights; the overrides it was made with are
    read off its train_config). A suite under another name (``--name paper-240s``) is matched to
    the preset its runs' configs come from; for a run no preset makes, the words for what cannot
    be read off."""
    found = _preset_of(run)
    if found is None:
        return (
            "the job that made it, with the same settings (its train_config) and `rebuild_weights: true` "
            "(CLI: `--rebuild-weights`)"
        )
    preset, (flags, others) = found
    name = f" --name {run.suite}" if run.suite and run.suite != preset else ""
    only = " --only-controls" if run.control else ""
    cmd = (
        f"`layerscope suite --preset {preset}{name} --family {run.family} --task {run.task} --seed {run.seed}"
        f"{''.join(' ' + f for f in flags)}{only} --rebuild-weights`"
    )
    return cmd + (f" (its train_config also differs from the preset in {', '.join(others)})" if others else "")


def missing_weights(run: Run, store_dir: Path | str | None = None) -> str | None:
    """Why ``run``'s weights cannot be loaded here (one line naming the command that trains it
    again), or None when its checkpoint is in ``store_dir`` (not checked when None)."""
    if run.checkpoint_id and (store_dir is None or (Path(store_dir) / run.checkpoint_id).is_dir()):
        return None
    return (
        f"run {run.id} has no model weights here (imported from a bundle without weights, or its checkpoint "
        f"was not kept): rebuild them (same seed, data and schedule; recorded: {run.steps} steps) with "
        f"`layerscope runs rebuild-weights {run.id}` (checked against its record, its results kept), or with "
        f"{retrain_command(run)} (its results measured again on the rebuilt model), or import a bundle exported "
        "with --weights"
    )
