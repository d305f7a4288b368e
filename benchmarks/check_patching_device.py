"""Activation patching on an accelerator: the step-wise state engine against the models' own
forward on that device (e.g. CUDA with transformers' plain-PyTorch Mamba paths, no mamba_ssm).

For each recurrent family, START token on and off: (1) the engine's full run equals
``model(tokens)``; (2) every residual-stream patch from the suffix re-runs equals a full hooked
forward; (3) one layer: the clean state injected after t equals the model's forward on the
spliced sequence clean[:t+1] + corrupted[t+1:]. Prints one line per check; exit 1 on a failure.
With ``--trained``: an LSTM trained like the quick preset (~830K, 4 layers, parity, L 40,
150 steps) and its full patching grid: mean ``state`` recovery per layer before and after the
corrupted token, and the grid's wall time.

Usage::

    python benchmarks/check_patching_device.py --device cuda [--trained]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerscope_core.registry import families_where
from models_store import ModelConfig, build_model
from models_store.states import StatefulModel
from science.context import SilentContext
from science.patching import _cells_hooks, cell_logit_differences, patching_grid
from science.tasks import get_task
from science.training import TrainConfig, train_model

TOL = 2e-4


def _check(family: str, start_token: bool, dev: str) -> float:
    g = torch.Generator().manual_seed(0)
    model = (
        build_model(
            ModelConfig(family=family, vocab_size=3, n_classes=3, n_layers=2, d_model=32, start_token=start_token),
            seed=1,
        )
        .to(dev)
        .eval()
    )
    L, p = 12, 3
    clean = torch.randint(0, 3, (8, L), generator=g)
    corr = clean.clone()
    corr[:, p] = (clean[:, p] + 1) % 3
    clean, corr = clean.to(dev), corr.to(dev)
    labels = (torch.zeros(8, dtype=torch.long), torch.ones(8, dtype=torch.long))
    sm = StatefulModel.from_model(model)
    with torch.no_grad():
        worst = float((sm.trace(clean).last - model(clean)[:, -1]).abs().max())
    cells = [("input", j, t) for j in range(3) for t in range(L)]
    _, _, fast = cell_logit_differences(model, clean, corr, labels, cells)
    _, _, ref = _cells_hooks(model, clean, corr, labels, cells, SilentContext())
    worst = max(worst, max(float(np.abs(fast[c] - ref[c]).max()) for c in cells))
    one = (
        build_model(
            ModelConfig(family=family, vocab_size=3, n_classes=3, n_layers=1, d_model=32, start_token=start_token),
            seed=2,
        )
        .to(dev)
        .eval()
    )
    s1 = StatefulModel.from_model(one)
    tc, tx = s1.trace(clean), s1.trace(corr)
    with torch.no_grad():  # the state after t injected = the model on clean[:t+1] + corrupted[t+1:]
        spliced = {t: one(torch.cat([clean[:, : t + 1], corr[:, t + 1 :]], dim=1))[:, -1] for t in (0, 5, 10)}
    worst = max(
        worst, *(float((s1.with_state(tc, tx, 0, t + one.n_prefix) - want).abs().max()) for t, want in spliced.items())
    )
    return worst


def trained_band(dev: str) -> None:
    """The quick preset's LSTM on parity: state recovery before / after the corruption per layer."""
    task = get_task("parity")
    model = build_model(
        ModelConfig(family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, start_token=True), seed=0
    ).to(dev)
    res = train_model(
        model,
        task,
        TrainConfig(train_length=40, max_steps=150, eval_every=25, n_eval_sequences=256, curriculum_start=None),
        seed=0,
        device=dev,
    )
    print(f"lstm {model.n_params:,} params: {res.steps} steps, held-out acc {res.final_heldout_acc}")
    t0 = time.perf_counter()
    rows = patching_grid(model, task, run_seed=0, eval_length=40, n_pairs=128, device=dev)
    print(
        f"full grid: {len(rows)} cells in {time.perf_counter() - t0:.1f} s; "
        f"corrupt position {rows[0]['corrupt_position']}, usable pairs {rows[0]['n_pairs']}, "
        f"dropped {rows[0]['n_dropped']}, LD clean {rows[0]['ld_clean']:.2f}, corrupted {rows[0]['ld_corrupted']:.2f}"
    )
    p = rows[0]["corrupt_position"]
    for site in ("state", "resid_pre", "resid_post"):
        for ly in sorted({r["layer"] for r in rows if r["site"] == site}):
            rec = {r["position"]: r["recovery"] for r in rows if r["site"] == site and r["layer"] == ly}
            before = [rec[t] for t in range(p) if rec[t] is not None]
            after = [rec[t] for t in range(p, 39) if rec[t] is not None]
            mean = lambda v: sum(v) / len(v) if v else float("nan")  # noqa: E731
            print(
                f"{site:10s} layer {ly:2d}: before {mean(before):+.3f}  after (t={p}..38) {mean(after):+.3f}  "
                f"min after {min(after, default=float('nan')):+.3f}  t=39 {rec[39]}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--trained", action="store_true", help="also train the quick-preset LSTM and patch it")
    args = ap.parse_args(argv)
    import transformers

    print(f"device {args.device}, torch {torch.__version__}, transformers {transformers.__version__}")
    failed = 0
    for fam in families_where(kind="rnn") + families_where(kind="ssm"):  # the families with a state
        for st in (False, True):
            try:
                worst = _check(fam, st, args.device)
                ok = worst < TOL
                print(f"{fam:7s} start_token={st!s:5s} max |diff| {worst:.2e} {'ok' if ok else 'FAIL'}", flush=True)
            except Exception:  # noqa: BLE001 - report every family
                ok = False
                print(f"{fam:7s} start_token={st!s:5s} ERROR\n{traceback.format_exc()}", flush=True)
            failed += not ok
    if args.trained:
        trained_band(args.device)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
