"""The study's six claims → verdicts from stored results (docs/SCIENCE.md#claims).

Input: plain lists of dicts as the API serves them — no DB access, numpy/scipy only:

- ``runs``: ``{id, task, family, seed, n_layers, pretrained (None = trained from scratch),
  heldout_acc, early_stop_acc, behaviour: {"40": {"token_acc", "last_acc", "n"}, …}}``
- ``probes``: ``{run_id, layer, eval_length, accuracy, majority_baseline, …}``
- ``interventions``: ``{run_id, method, layer, eval_length, delta_pp, drop_rel_chance, refit_acc,
  refit_majority, p_value, p_holm, significant, …}`` (``conv1d_removal`` uses layer −2 for
  "every layer")
- ``patching``: ``{run_id, site, layer, position, eval_length, recovery, …}``

Output of :func:`evaluate_claims`: one dict per claim ``{id, verdict, numbers, why}`` with
``verdict`` ∈ {"supported", "contradicted", "not enough data"}, ``numbers`` every number the
verdict rests on, and ``why`` the case it came from (``{"case": ..., ...}``, documented per claim
module). Data only: the title, the sentences (``detail``) and the links to the dashboard's views
are the presentation's (``backend.claims_text.present_claims``, what ``GET /api/claims`` serves).

Rules shared by every claim (every threshold is a module constant):

- **Trained runs only.** A run is read only when it is trained for its task
  (:func:`science.trained.is_trained`: held-out token accuracy at the training length reached
  its early-stop criterion). Every claim lists the runs it left out and why
  (``numbers.runs_left_out``).
- **Seeds.** A *cell* is a (task, family) of from-scratch runs. A claim reads every cell the
  study is meant to have for the tasks and families it is about (the study's lists,
  ``layerscope_core.registry`` FAMILIES × STUDY_TASKS, restricted to the claim's), stored or not. A verdict needs at least ``MIN_SEEDS`` trained
  seeds in every one of them; otherwise "not enough data", naming each short cell
  ("transformer × parity: 1 of 3 trained seeds"; a cell with no run at all: "mamba × dyck: 0 of
  3 trained seeds (no runs trained from scratch stored)"), so no verdict is given with a family or task missing.
- Profiles are computed at the training length ``EVAL_LENGTH`` (40) from each run's probe curve
  (:mod:`science.profiles`); a cell's class is the class of its seed-mean curve.
- **Against the control.** With random-init controls stored, claims 1–3 read each cell against
  its seeds' controls (the learned gain, ``science.profiles.summarise_against_controls``; a cell
  whose gain stays under the control margin is ``not above control``) and carry the verdict
  against the majority rate beside it (``numbers.majority_floor``). A cell without its controls
  falls back to the majority floor and is named (``numbers.cells_without_controls``).
- **Fragility.** Each cell row carries the stability of its class (the rule's thresholds moved by
  ``science.profiles.STABILITY_MARGINS``); ``numbers.fragile`` is True when a class read flips
  within them, ``numbers.class_condition_agreement`` counts the threshold settings under which the
  class condition comes out the same.
- **Not learned.** A cell whose every seed (≥ ``MIN_SEEDS``) stopped at a plateau below the
  criterion is "not learned by this architecture at this size within N steps"; it leaves claims
  1–3 as a named untestable part (``numbers.untestable``): in claims 1–2 a task whose Transformer
  cell is not learned is not tested, another family's cell leaves the class condition and the
  statistic; in claim 3 the family is not placed (docs/SCIENCE.md#plateau).

Per claim:

- **Claims 1 and 2 test the contrast.** Claim 1 (Parity, S3): Transformer ``gradual``,
  LSTM/GRU/Mamba/Mamba-2 ``late``; claim 2 (Dyck): Transformer ``early``, the others ``gradual``.
  Per task: the *class condition* holds when the Transformer cell has its expected class and at
  least ``MATCH_FRACTION`` of the other cells have theirs; the *statistic condition* holds when a
  one-sided permutation test of the per-seed statistic (late concentration, others >
  Transformer, for claim 1; AUC, Transformer > others, for claim 2) gives p < ``ALPHA`` after
  Holm's adjustment across all the tests of claims 1 and 2 together. Per task: both hold →
  supported, neither → contradicted, one without the other → not enough data (mixed). The
  claim: supported when every task read supports it, contradicted when one contradicts it,
  else not enough data. All five families identical → contradicted.
- **Claim 3**: per family with all of S3, Parity and Dyck, ``d(S3, Parity) < d(S3, Dyck)``
  (seed-mean normalised curves); supported when that holds in ≥ ``MATCH_FRACTION`` of the
  families.
- **Claim 4 (readable ≠ necessary), a necessity test.** Per trained run with a probe curve and
  an edit from ``DECOUPLING_METHODS`` (the first present): an edit *removed* the variable only
  where its refit probe is at or under the row's ``refit_line`` (measurement version 2), or within
  ``REFIT_TOL`` of the majority rate on a version 1 row without one; other edits are reported as
  "not removed" and never count as damage. A run is evaluable when the edit removed the
  variable at one of its near-best probe layers; it is *decoupled* when the most damaging layer
  among the removed ones is not near-best, is at least ``DECOUPLING_MARGIN_PP`` more damaging
  than the near-best layers, and (when stored) significant after Holm; every drop is read beyond its
  rank-matched random removal (``delta_pp − random_delta_pp`` where stored). The decoupled share, per
  group (from scratch / pretrained), carries a Wilson 95 % interval: a group supports the claim
  when the interval's lower end is above ``DECOUPLED_SHARE_MIN``, contradicts it when its upper
  end is below, and is inconclusive otherwise; a pretrained group needs ``MIN_SEEDS`` evaluable
  runs. Supported when a group supports; contradicted when every group with runs contradicts.
  Beside it, descriptive and not part of the verdict: state-site patching recovery at the last
  block, middle position, mean and t-interval over trained runs (or "no state patching
  stored"), and per family the layer whose state patch at the middle position recovers most.
  In stacked recurrent models the last block alone can read ~0: the blocks below it still
  carry the corrupted state.
- **Claim 5 (Conv1D)**: ``conv1d_removal`` of every layer (layer −2) on trained Mamba/Mamba-2
  runs, read as ``drop_rel_chance`` (share of the gain over chance lost; > 0 = a drop), with a
  t-interval over seeds per task. Conditions: S3 drop > 0 (interval above 0); Parity drop > 0;
  S3 drop > Parity drop (one-sided permutation test, p < ``ALPHA``); Dyck drop not significant
  (interval reaches 0). Needs conv1d_removal on two of the three tasks and ``MIN_SEEDS`` trained
  seeds in each of the six SSM cells;
  supported when every evaluated condition holds.
- **Claim 6 (behaviour)**, trained runs, seed means of token accuracy per stored length:
  (a) LSTM and GRU ≥ ``PERFECT_ACC`` at every stored length on Parity and S3; (b) on Parity and
  on S3 the mean accuracy at the lengths beyond training is ordered recurrent > SSM >
  Transformer; (c) Mamba on Parity falls with length (longest length ≥ ``FALL_PP`` below 40 and
  a negative least-squares slope). Names the lengths it used. Supported when every sub-claim
  that can be evaluated holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from layerscope_core.registry import STACKED_VARIANTS, STUDY_TASKS
from science.claims.behaviour import claim_6
from science.claims.claim3 import claim_3
from science.claims.common import (  # noqa: F401 - the rules' constants, re-exported for callers
    CONTRADICTED,
    DECOUPLING_MARGIN_PP,
    DECOUPLING_METHODS,
    EVAL_LENGTH,
    FAMILIES,
    MIN_SEEDS,
    NOT_ENOUGH,
    PREFIX_TASKS,
    REFIT_TOL,
    SSM,
    STACK_TASK,
    STATE_SITE,
    SUPPORTED,
    Cell,
    Data,
    _ci,
    _clean,
    _curve_cells,
    _summary,
    expected_cells,
    not_learned_cells,
    stop_length,
)
from science.claims.contrast import CONTRAST, claims_1_2
from science.claims.conv1d import _conv1d_rows, claim_5
from science.claims.necessity import beyond_random, claim_4, edit_removed, run_decouplings

__all__ = [
    "CONTRADICTED",
    "DECOUPLING_METHODS",
    "MIN_SEEDS",
    "NOT_ENOUGH",
    "SUPPORTED",
    "beyond_random",
    "edit_removed",
    "evaluate_claims",
    "not_learned_cells",
    "run_decouplings",
    "stop_length",
]

# ----------------------------------------------------------------------------- descriptive


CLAIM_SCOPE: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {  # claim → (tasks, families) it reads
    1: (PREFIX_TASKS, FAMILIES),
    2: ((STACK_TASK,), FAMILIES),
    3: (("s3", "parity", STACK_TASK), FAMILIES),
    4: (tuple(STUDY_TASKS), FAMILIES),
    5: (("s3", "parity", STACK_TASK), SSM),
    6: (PREFIX_TASKS, FAMILIES),
}


def trained_cells(
    data: Data, tasks: Iterable[str], families: Iterable[str], expected: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """What the trained from-scratch runs of each cell show, whatever their number: the class of
    the seed-mean probe curve at L = EVAL_LENGTH and the late concentration (mean, t-interval,
    n seeds). Descriptive: no seed minimum, no test; never part of a verdict."""
    cells = _curve_cells(data, tuple(tasks))
    out = []
    for cell in expected_cells(tasks, families):
        rs = cells.get(cell)
        if not rs:
            continue
        s = _summary(data, rs)
        lc = s["metrics"]["late_concentration"]
        row = {
            "task": cell[0],
            "family": cell[1],
            "n": s["n"],
            "profile_class": s["profile_class"],
            "class_votes": s["class_votes"],
            "late_concentration": {k: lc[k] for k in ("mean", "lo", "hi", "n")},
        }
        if expected:
            row["expected"] = expected.get(cell[1])
        out.append(row)
    return out


def trained_conv1d_cells(data: Data) -> list[dict[str, Any]]:
    """Claim 5's descriptive block: per Mamba/Mamba-2 cell of S3, Parity and Dyck, the Conv1D
    removal drop (``drop_rel_chance``: mean, t-interval, n) over its trained runs that have one,
    whatever their number. Never part of a verdict."""
    rows = _conv1d_rows(data)
    trained = {r["id"]: r for r in data.trained}
    by_cell: dict[Cell, list[float]] = defaultdict(list)
    for rid, row in rows.items():
        if rid in trained and row.get("drop_rel_chance") is not None:
            by_cell[(trained[rid]["task"], trained[rid]["family"])].append(float(row["drop_rel_chance"]))
    return [
        {"task": t, "family": f, "n": len(by_cell[(t, f)]), "drop_rel_chance": _ci(by_cell[(t, f)])}
        for t, f in expected_cells(("s3", "parity", STACK_TASK), SSM)
        if by_cell.get((t, f))
    ]


def _describe_when_short(claims: list[dict[str, Any]], data: Data) -> list[dict[str, Any]]:
    """Add ``numbers.trained_cells`` (descriptive) to each "not enough data" claim."""
    for c in claims:
        if c["verdict"] == NOT_ENOUGH:
            tasks, fams = CLAIM_SCOPE[c["id"]]
            spec = CONTRAST.get(c["id"])
            c["numbers"]["trained_cells"] = _clean(
                trained_conv1d_cells(data)
                if c["id"] == 5
                else trained_cells(data, tasks, fams, spec["expected"] if spec else None)
            )
    return claims


def evaluate_claims(
    runs: Sequence[Mapping[str, Any]] | None = None,
    probes: Sequence[Mapping[str, Any]] | None = None,
    interventions: Sequence[Mapping[str, Any]] | None = None,
    patching: Sequence[Mapping[str, Any]] | None = None,
    controls: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """All six claims, in order. Missing inputs count as empty (→ "not enough data").

    ``controls``: the random-init control curves ``{task, family, seed, n_layers, curve: {layer:
    accuracy}}`` at ``EVAL_LENGTH``. With them, claims 1–3 read each cell against its seeds'
    controls (``numbers.floor`` "random-init control"; docs/SCIENCE.md#controls) and carry the
    majority-floor verdict beside it (``numbers.majority_floor``: verdict, cells, and the whole
    claim against the majority rate as ``claim``).

    Only trained runs (:func:`science.trained.is_trained`) are read; each claim lists the runs it
    left out (``numbers.runs_left_out``) with the reason. A "not enough data" claim also carries
    ``numbers.trained_cells``: what the trained cells it reads show (:func:`trained_cells`),
    descriptive only."""
    data = Data(runs or [], probes or [], interventions or [], patching or [], controls)
    first = [*claims_1_2(data), claim_3(data)]
    if data.use_controls:  # the same claims against the majority rate, side by side
        data.use_controls = False
        plain = [*claims_1_2(data), claim_3(data)]
        data.use_controls = True
        for c, p in zip(first, plain):
            c["numbers"]["majority_floor"] = _clean(
                {
                    "verdict": p["verdict"],
                    "claim": p,  # the whole claim against the majority rate, for its explanation
                    "cells": p["numbers"].get("cells") or p["numbers"].get("families"),
                }
            )
    stacked = _claim_1_with_stacked_rnns(runs or [], probes or [], interventions or [], patching or [], controls)
    if stacked is not None:
        first[0]["numbers"]["stacked_rnns"] = stacked
    out = [*first, claim_4(data), claim_5(data), claim_6(data)]
    return _describe_when_short(out, data)


def _claim_1_with_stacked_rnns(
    runs: Sequence[Mapping[str, Any]],
    probes: Sequence[Mapping[str, Any]],
    interventions: Sequence[Mapping[str, Any]],
    patching: Sequence[Mapping[str, Any]],
    controls: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any] | None:
    """Claim 1 again with the plain stacked LSTM/GRU (``lstm_stack``, ``gru_stack``) in the place
    of the residual ones (docs/SCIENCE.md#stacked-rnns): ``{verdict, claim (the whole claim 1 of
    the stacked runs), cells, families}``, or None when no stacked run is stored."""
    if not any(r.get("family") in STACKED_VARIANTS for r in runs):
        return None
    swap = {v: k for k, v in STACKED_VARIANTS.items()}  # lstm → lstm_stack

    def relabel(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            fam = r.get("family")
            if fam in swap:
                continue  # the residual run steps aside
            out.append({**r, "family": STACKED_VARIANTS.get(fam, fam) if isinstance(fam, str) else fam})
        return out

    claim = claims_1_2(Data(relabel(runs), probes, interventions, patching, relabel(controls or [])))[0]
    explained = _clean(claim)  # a copy as read, under the stacked families' own names
    for row in claim["numbers"].get("cells", []):
        row["family"] = swap.get(row["family"], row["family"])
    return _clean(
        {
            "verdict": claim["verdict"],
            "claim": explained,
            "cells": claim["numbers"].get("cells"),
            "families": [swap.get(f, f) for f in FAMILIES],
        }
    )
