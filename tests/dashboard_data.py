"""Small synthetic API-shaped rows for the dashboard's unit tests (no DB, no network)."""

from __future__ import annotations

FAMILIES = ("transformer", "mamba", "mamba2", "lstm", "gru")
SHAPE = {
    "late": (0.0, 0.05, 0.1, 0.15, 1.0),
    "gradual": (0.0, 0.3, 0.55, 0.8, 1.0),
    "early": (0.0, 0.95, 0.98, 1.0, 1.0),
}
MAJ = {"parity": 0.5, "s3": 0.17, "dyck": 0.42}


def cls(fam: str, task: str) -> str:
    if task in ("parity", "s3"):
        return "gradual" if fam == "transformer" else "late"
    return "early" if fam == "transformer" else "gradual"


def curve_rows(tasks=("parity", "s3", "dyck"), families=FAMILIES, lengths=(40,), n_layers=4, pretrained=None):
    rows = []
    for t in tasks:
        for f in families:
            for L in lengths:
                for i, layer in enumerate(range(-1, n_layers)):
                    frac = SHAPE[cls(f, t)][min(i, 4)]
                    m = MAJ[t] + (0.98 - MAJ[t]) * frac
                    rows.append(
                        {
                            "task": t,
                            "family": f,
                            "pretrained": pretrained,
                            "eval_length": L,
                            "layer": layer,
                            "layer_name": "emb" if layer == -1 else str(layer),
                            "depth": (layer + 1) / n_layers,
                            "n_layers": n_layers,
                            "mean": m,
                            "lo": m - 0.02,
                            "hi": m + 0.02,
                            "n": 3,
                            "seeds": [0, 1, 2],
                            "majority_baseline": MAJ[t],
                            "run_ids": [1, 2, 3],
                        }
                    )
    return rows


def profile_rows(tasks=("parity", "s3", "dyck"), families=FAMILIES):
    out = []
    for t in tasks:
        for f in families:
            lc = 0.85 if cls(f, t) == "late" else 0.2
            out.append(
                {
                    "task": t,
                    "family": f,
                    "pretrained": None,
                    "eval_length": 40,
                    "n_layers": 4,
                    "n": 3,
                    "seeds": [0, 1, 2],
                    "profile_class": cls(f, t),
                    "class_counts": {cls(f, t): 3},
                    "metrics": {
                        "late_concentration": {"mean": lc, "lo": lc - 0.05, "hi": lc + 0.05, "n": 3},
                        "auc": {"mean": 0.5, "lo": 0.4, "hi": 0.6, "n": 3},
                    },
                    "per_seed": [
                        {
                            "seed": sd,
                            "run_id": 100 + sd,
                            "best_layer": 3,
                            "damaging_layer": 1 if f == "transformer" else 3,
                            "decoupling_method": "leace",
                        }
                        for sd in (0, 1, 2)
                    ],
                }
            )
    return out


def probe_rows(run_id=1, n_layers=4, L=40, best=3):
    return [
        {
            "run_id": run_id,
            "layer": ly,
            "eval_length": L,
            "accuracy": 0.5 + 0.1 * (ly + 1) if ly <= best else 0.6,
            "majority_baseline": 0.5,
            "per_position": [0.9] * L,
        }
        for ly in range(-1, n_layers)
    ]


def intervention_rows(run_id=1, n_layers=4, L=40, damaging=1, conv1d=True):
    rows = []
    for m in ("project_out", "inlp", "leace", "pca_top_k", "mean"):
        for ly in range(n_layers):
            d = -20.0 if ly == damaging else -1.0
            rows.append(
                {
                    "run_id": run_id,
                    "method": m,
                    "layer": ly,
                    "eval_length": L,
                    "delta_pp": d,
                    "refit_acc": 0.9 if m == "project_out" else 0.5,
                    "refit_majority": 0.5,
                    "p_holm": 0.001 if ly == damaging else 0.5,
                    "significant": ly == damaging,
                }
            )
    if conv1d:
        for ly in (-2, *range(n_layers)):
            rows.append(
                {
                    "run_id": run_id,
                    "method": "conv1d_removal",
                    "layer": ly,
                    "eval_length": L,
                    "delta_pp": -12.0 if ly == -2 else -3.0,
                    "refit_acc": None,
                    "p_holm": 0.01,
                    "significant": True,
                }
            )
    return rows


def patching_rows(run_id=1, n_layers=4, L=40, positions=None):
    positions = list(range(L)) if positions is None else positions
    return [
        {
            "run_id": run_id,
            "layer": ly,
            "position": p,
            "eval_length": L,
            "recovery": (ly + 1) / n_layers * (p / L),
            "recovery_lo": 0.0,
            "recovery_hi": 1.0,
            "ld_clean": 4.0,
            "ld_corrupted": -4.0,
            "n_pairs": 64,
        }
        for ly in range(-1, n_layers)
        for p in positions
    ]
