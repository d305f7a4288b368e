"""The registry: the study's vocabularies, defined once (docs/SCIENCE.md#tasks, #models).

Every layer above reads these names from here — the CLI's choices, the API's ``GET /api/meta``,
the dashboard's pickers and colours, the presets and the benchmarks.
"""

from __future__ import annotations

FAMILIES: tuple[str, ...] = ("transformer", "mamba", "mamba2", "lstm", "gru")
TASKS: tuple[str, ...] = ("parity", "s3", "dyck", "code_depth")
METHODS: tuple[str, ...] = ("project_out", "inlp", "leace", "pca_top_k", "mean")
PRESETS: tuple[str, ...] = ("smoke", "quick", "paper", "pretrained")
EVAL_LENGTHS: tuple[int, ...] = (40, 60, 80, 100, 120)
# activation-patching sites (docs/SCIENCE.md#activation-patching): the default set, and every
# accepted one ("state:ssm" / "state:conv" are one part of a Mamba state)
PATCH_SITES: tuple[str, ...] = ("resid_pre", "resid_post", "state")
ALL_PATCH_SITES: tuple[str, ...] = ("resid_pre", "resid_post", "state", "state:ssm", "state:conv")
