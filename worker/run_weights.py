"""Whether a stored run's weights can be loaded here, and, when not, the one command that makes
them again. Shared by the CLI (probe/intervene/patch), ``POST /api/jobs`` and the job runner, so
a job that could only fail is refused up front with the same words. Imports no torch."""

from __future__ import annotations

from pathlib import Path

from layerscope_core.registry import PRESETS
from store.models import Run

# Overrides of ``layerscope suite`` that a stored run's train_config can differ from its preset by.
_FLAGS = {"max_seconds": "--max-seconds", "max_steps": "--max-steps"}


def retrain_command(run: Run) -> str:
    """``layerscope suite --preset P --family F --task T --seed S [overrides] --rebuild-weights``:
    rebuilds this run's weights under its own config hash, within its recorded step budget
    (docs/SCIENCE.md#rebuilding-weights; the overrides it was made with are read off its
    train_config); for a suite that is no preset, the words for what cannot be read off."""
    if run.suite not in PRESETS or run.pretrained:
        return ("the job that made it, with the same settings (its train_config) and `rebuild_weights: true` "
                "(CLI: `--rebuild-weights`)")
    from worker.params import SuiteParams
    from worker.presets import expand_suite

    (job,) = expand_suite(SuiteParams(preset=run.suite, families=[run.family], tasks=[run.task], seeds=[run.seed]))
    stored, preset = run.train_config or {}, job.run_config()
    flags = [f"{flag} {stored[key]:g}" for key, flag in _FLAGS.items()
             if key in stored and stored[key] is not None and stored[key] != preset.get(key)]
    others = sorted(k for k in set(stored) | set(preset) if k not in _FLAGS and stored.get(k) != preset.get(k))
    cmd = (f"`layerscope suite --preset {run.suite} --family {run.family} --task {run.task} --seed {run.seed}"
           f"{''.join(' ' + f for f in flags)} --rebuild-weights`")
    return cmd + (f" (its train_config also differs from the preset in {', '.join(others)})" if others else "")


def missing_weights(run: Run, store_dir: Path | str | None = None) -> str | None:
    """Why ``run``'s weights cannot be loaded here (one line naming the command that trains it
    again), or None when its checkpoint is in ``store_dir`` (not checked when None)."""
    if run.checkpoint_id and (store_dir is None or (Path(store_dir) / run.checkpoint_id).is_dir()):
        return None
    return (f"run {run.id} has no model weights here (imported from a bundle without weights, or its checkpoint "
            f"was not kept): rebuild them (same seed, data and schedule; recorded: {run.steps} steps) with "
            f"{retrain_command(run)} (its results "
            f"are measured again on the rebuilt model), or import a bundle exported with --weights")
