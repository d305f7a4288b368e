"""Suite presets: families × tasks × seeds with training and measurement budgets.

- ``smoke``: tiny widths, a few steps; the whole suite in under 2 minutes here (tests, CI).
- ``quick``: study-sized models (~830K parameters) on parity, s3, dyck, one seed, a step
  budget so the suite fits about 10 minutes on a 2-core CPU. The training recipe's warm-up,
  cosine decay and clipping, but no length curriculum (150 steps are too few to climb from
  length 8 to 40 in evaluated stages). Not trained to 99%: a first look, not a claim.
- ``paper``: the study: 3 seeds, 4 tasks, the full training recipe (docs/SCIENCE.md#training-recipe),
  train to 99% held-out token accuracy, at most 10,000 steps and ``max_seconds`` of wall time per
  run (so a whole study on one GPU is bounded), every intervention, patching.

Every preset's runs use :class:`worker.params.TrainParams`' recipe defaults unless its
``train`` entry says otherwise; ``family_train`` overrides per family (e.g. a learning rate).
- ``pretrained``: Pythia-160M/410M and Mamba-130M fine-tuned with a token head (one GPU).
"""

from __future__ import annotations

from typing import Any

from layerscope_core.registry import PRESETS as PRESET_NAMES
from layerscope_core.registry import family_names
from worker.params import EVAL_LENGTHS, FAMILIES, TASKS, MeasureParams, SuiteParams, TrainParams

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {
        "families": list(FAMILIES),
        "tasks": ["parity", "s3", "dyck"],
        "seeds": [0],
        "train": {"param_target": 50_000, "max_steps": 12, "batch_size": 32, "eval_every": 6,
                  "n_eval_sequences": 64, "warmup_steps": 3, "curriculum_start": None},
        "measure": {"eval_lengths": [40, 60], "n_probe_sequences": 48, "n_permutations": 200,
                    "n_patch_pairs": 16, "pca_k": 4, "inlp_max_rounds": 3},
        # code_depth's 256-token vocabulary alone outgrows 50K parameters (no transformer or
        # mamba2 width fits ±10%); 60K fits all five families.
        "task_train": {"code_depth": {"param_target": 60_000}},
    },
    "quick": {
        "families": list(FAMILIES),
        "tasks": ["parity", "s3", "dyck"],
        "seeds": [0],
        # A step budget, not a time budget, so the results do not depend on the machine's load:
        # ~150 steps is where LSTM/GRU solve parity at L=40 (measured: ~19 s at ~170 ms/step).
        "train": {"max_steps": 150, "eval_every": 25, "n_eval_sequences": 256, "warmup_steps": 15,
                  "curriculum_start": None},
        # In- and out-of-distribution (40 = train length, 120 = the longest) rather than all five
        # lengths, and 64 held-out sequences: the whole suite fits ~10 minutes on 2 CPU cores
        # (BENCHMARKS.md).
        "measure": {"eval_lengths": [40, 120], "n_probe_sequences": 64, "n_permutations": 1000,
                    "n_patch_pairs": 32, "inlp_max_rounds": 5},
    },
    "paper": {
        "families": list(FAMILIES),
        "tasks": list(TASKS),
        "seeds": [0, 1, 2],
        # Early stop at 99% held-out token accuracy at L=40 usually ends a run well before the
        # cap; max_seconds bounds the rest (a cell that does not learn its task) so that 60 runs,
        # several at a time on one GPU, finish in a bounded time.
        "train": {"max_steps": 10_000, "max_seconds": 240.0, "eval_every": 50, "n_eval_sequences": 500},
        "measure": {"eval_lengths": list(EVAL_LENGTHS), "n_probe_sequences": 500,
                    "n_permutations": 2000, "n_patch_pairs": 128},
    },
    "pretrained": {
        "families": ["transformer", "transformer", "mamba"],
        "pretrained": ["EleutherAI/pythia-160m", "EleutherAI/pythia-410m", "state-spaces/mamba-130m-hf"],
        "tasks": ["parity", "s3", "dyck"],
        "seeds": [0],
        "train": {"max_steps": 1000, "batch_size": 32, "lr": 1e-4, "eval_every": 50,
                  "n_eval_sequences": 256},
        "measure": {"eval_lengths": list(EVAL_LENGTHS), "n_probe_sequences": 300,
                    "n_permutations": 1000, "n_patch_pairs": 64},
    },
}


if tuple(PRESETS) != PRESET_NAMES:  # the registry names the presets; this table defines them
    raise RuntimeError(f"worker.presets defines {tuple(PRESETS)}, layerscope_core.registry names {PRESET_NAMES}")


def expand_suite(params: SuiteParams) -> list[TrainParams]:
    """The train jobs of a suite (each also runs its measurements).

    Raises:
        ValueError: a family/task filter that leaves nothing to run. ``families`` picks from the
            preset's families for ``pretrained``, from every registered family otherwise.
    """
    preset = PRESETS[params.preset]
    suite_name = params.name or params.preset
    tasks = params.tasks or preset["tasks"]
    seeds = params.seeds if params.seeds is not None else preset["seeds"]
    if params.pretrained:  # any transformers model, its family from its blocks
        from models_store.any_model import pretrained_family

        models = [(pretrained_family(p), p) for p in params.pretrained]
        if params.families:
            models = [(f, p) for f, p in models if f in params.families]
    elif "pretrained" in preset:
        models = list(zip(preset["families"], preset["pretrained"]))
        if params.families:
            models = [(f, p) for f, p in models if f in params.families]
    elif params.families:  # any registered family, in registry order (a scratch preset trains any)
        models = [(f, None) for f in family_names() if f in params.families]
    else:
        models = [(f, None) for f in preset["families"]]
    overrides = {k: v for k, v in (("max_steps", params.max_steps), ("max_seconds", params.max_seconds))
                 if v is not None}
    out = []
    for task in tasks:
        for family, pretrained in models:
            for seed in seeds:
                short = pretrained.rsplit("/", 1)[-1] if pretrained else family
                out.append(TrainParams(
                    family=family, task=task, seed=seed, pretrained=pretrained, suite=suite_name,
                    name=f"{short}-{task}-s{seed}", measure=MeasureParams(**preset["measure"]),
                    force=params.force, rebuild_weights=params.rebuild_weights,
                    **{**preset["train"], **preset.get("task_train", {}).get(task, {}),
                       **preset.get("family_train", {}).get(family, {}), **overrides},
                ))
    if not out:
        raise ValueError("the suite's family/task/seed filters leave no run")
    return out
