"""Names, orders and colours shared by every figure and page.

Family colours are the Okabe–Ito palette (safe for the common forms of colour blindness); every
family also gets its own marker symbol and dash pattern so a figure stays readable in grey.
"""

from __future__ import annotations

from layerscope_core.layers import depth, layer_name  # noqa: F401  (the one definition, docs/SCIENCE.md#layers)
from layerscope_core.registry import (  # noqa: F401
    BUILTIN_TASKS,
    EVAL_LENGTHS,
    FAMILIES,
    MEASURE_PARTS,
    PRESETS,
    TRAIN_LENGTH,
    family_names,
    get_family,
    task_spec,
)
from layerscope_core.registry import METHODS as EDIT_METHODS

# FAMILIES: the study's families in canonical order (figures order by it; others come after,
# sorted). Pickers list ``family_names()``: every registered family.
FAMILY_COLORS = {
    "transformer": "#0072B2",  # blue
    "mamba": "#D55E00",  # vermillion
    "mamba2": "#E69F00",  # orange
    "lstm": "#009E73",  # bluish green
    "gru": "#CC79A7",  # reddish purple
}
EXTRA_COLORS = ("#56B4E9", "#000000", "#999999", "#F0E442")
FAMILY_SYMBOLS = {
    "transformer": "circle",
    "mamba": "square",
    "mamba2": "diamond",
    "lstm": "triangle-up",
    "gru": "x",
}
# figures order tasks by this (others after, sorted); labels come from the registry (task_label),
# pickers list all_tasks()
TASK_ORDER: tuple[str, ...] = BUILTIN_TASKS

METHODS: tuple[str, ...] = (*EDIT_METHODS, "conv1d_removal")  # the edits, then Conv1D removal
METHOD_LABELS = {
    "project_out": "project-out",
    "inlp": "INLP",
    "leace": "LEACE",
    "pca_top_k": "PCA top-k",
    "mean": "mean ablation",
    "conv1d_removal": "Conv1D removal",
}

PROFILE_CLASSES: tuple[str, ...] = ("early", "gradual", "late")

VERDICT_CLASS = {
    "supported": "badge-supported",
    "contradicted": "badge-contradicted",
    "not enough data": "badge-nodata",
}

JOB_KINDS: tuple[str, ...] = ("train", "probe", "intervene", "patch", "suite")


def family_label(family: str) -> str:
    """The family's registry label ("Mamba-2"); the name itself for an unregistered one."""
    return get_family(family).label if family in family_names() else family


_API_TASKS: list[str] = []  # the tasks GET /api/meta last listed (file tasks live where the API's store is)


def all_tasks() -> tuple[str, ...]:
    """Every task the pickers and the URL state accept: built-in, plugin (entry points), and the
    file tasks the API listed last (``remember_tasks``)."""
    from layerscope_core.plugins import task_names

    return tuple(dict.fromkeys([*task_names(), *_API_TASKS]))


def remember_tasks(names: list[str]) -> None:
    """Keep the API's task list (``GET /api/meta``'s ``tasks``) for ``all_tasks``."""
    _API_TASKS[:] = [str(n) for n in names]


def task_label(task: str) -> str:
    """The task's registry label ("Code-Depth"); the name itself for a file task or an unknown one."""
    spec = task_spec(task)
    return spec.label if spec is not None else task


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def family_color(family: str) -> str:
    """The family's Okabe–Ito colour; any other family a deterministic one of ``EXTRA_COLORS``
    (the same name → the same colour in every process)."""
    if family in FAMILY_COLORS:
        return FAMILY_COLORS[family]
    return EXTRA_COLORS[sum(map(ord, family)) % len(EXTRA_COLORS)]


def family_symbol(family: str) -> str:
    return FAMILY_SYMBOLS.get(family, "circle-open")


def rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def ordered(values, order) -> list:
    """Known values in their canonical order first, then the rest sorted."""
    vals = list(dict.fromkeys(values))
    known = [v for v in order if v in vals]
    return known + sorted(v for v in vals if v not in order)


def length_label(length: int) -> str:
    tag = "in-distribution" if int(length) <= TRAIN_LENGTH else "out-of-distribution"
    return f"L={length} ({tag})"
