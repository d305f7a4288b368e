"""Names, orders and colours shared by every figure and page.

Family colours are the Okabe–Ito palette (safe for the common forms of colour blindness); every
family also gets its own marker symbol and dash pattern so a figure stays readable in grey.
"""

from __future__ import annotations

from layerscope_core.layers import depth, layer_name  # the one definition (docs/SCIENCE.md#layers)

FAMILIES: tuple[str, ...] = ("transformer", "mamba", "mamba2", "lstm", "gru")
FAMILY_LABELS = {
    "transformer": "Transformer",
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "lstm": "LSTM",
    "gru": "GRU",
}
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
FAMILY_DASH = {"transformer": "solid", "mamba": "solid", "mamba2": "dash", "lstm": "solid", "gru": "dot"}

TASKS: tuple[str, ...] = ("parity", "s3", "dyck", "code_depth")
TASK_LABELS = {"parity": "Parity", "s3": "S3", "dyck": "Dyck", "code_depth": "Code-Depth"}
TASK_SYMBOLS = {"parity": "circle", "s3": "square", "dyck": "diamond", "code_depth": "triangle-up"}

METHODS: tuple[str, ...] = ("project_out", "inlp", "leace", "pca_top_k", "mean", "conv1d_removal")
METHOD_LABELS = {
    "project_out": "project-out",
    "inlp": "INLP",
    "leace": "LEACE",
    "pca_top_k": "PCA top-k",
    "mean": "mean ablation",
    "conv1d_removal": "Conv1D removal",
}

TRAIN_LENGTH = 40
EVAL_LENGTHS: tuple[int, ...] = (40, 60, 80, 100, 120)

PROFILE_CLASSES: tuple[str, ...] = ("early", "gradual", "late")
PROFILE_COLORS = {"early": "#56B4E9", "gradual": "#999999", "late": "#D55E00"}

VERDICT_CLASS = {
    "supported": "badge-supported",
    "contradicted": "badge-contradicted",
    "not enough data": "badge-nodata",
}

JOB_KINDS: tuple[str, ...] = ("train", "probe", "intervene", "patch", "suite")
JOB_STATES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled")


def family_label(family: str) -> str:
    return FAMILY_LABELS.get(family, family)


def task_label(task: str) -> str:
    return TASK_LABELS.get(task, task)


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def family_color(family: str) -> str:
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
