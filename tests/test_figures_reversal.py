"""Reversal matrix, reversal pairs and the S3 distance."""

from __future__ import annotations

import pytest

from dashboard.figures.reversal import find_reversals, reversal_matrix
from dashboard.figures.s3_distance import s3_distance_figure, s3_distances
from tests.dashboard_data import FAMILIES, curve_rows, profile_rows


def test_matrix_shape_text_and_ci():
    fig = reversal_matrix(profile_rows())
    hm = fig.data[0]
    assert hm.type == "heatmap"
    assert len(hm.z) == len(FAMILIES) and all(len(r) == 3 for r in hm.z)
    assert list(hm.x) == ["Parity", "S3", "Dyck"]
    assert list(hm.y)[0] == "Transformer"
    text = hm.text[0][0]
    assert "gradual" in text and "[0.15, 0.25]" in text and "n=3" in text
    assert fig.layout.meta["reversals"] > 0
    assert len(fig.layout.shapes) == fig.layout.meta["outlined"] > 0


def test_reversal_pairs_follow_spec():
    P = lambda f, t, c: {"family": f, "task": t, "profile_class": c}  # noqa: E731
    partial = find_reversals(
        [
            P("transformer", "parity", "gradual"),
            P("lstm", "parity", "late"),
            P("transformer", "dyck", "early"),
            P("lstm", "dyck", "gradual"),
        ]
    )
    assert len(partial) == 1 and partial[0]["kind"] == "partial" and partial[0]["shared_class"] == ["gradual"]
    full = find_reversals(
        [P("a", "parity", "late"), P("b", "parity", "early"), P("a", "dyck", "early"), P("b", "dyck", "late")]
    )
    assert full[0]["kind"] == "full"
    assert (
        find_reversals(
            [P("a", "parity", "late"), P("b", "parity", "late"), P("a", "dyck", "early"), P("b", "dyck", "late")]
        )
        == []
    )
    assert (
        find_reversals(
            [P("a", "parity", "flat"), P("b", "parity", "late"), P("a", "dyck", "late"), P("b", "dyck", "flat")]
        )
        == []
    )


def test_s3_distance_groups_with_parity():
    dist = s3_distances(curve_rows(), eval_length=40)
    assert {d["family"] for d in dist} == set(FAMILIES)
    assert all(d["closer"] == "parity" for d in dist)
    assert all(d["to_parity"] < 1e-9 for d in dist)  # S3 and Parity share the shape here
    fig = s3_distance_figure(dist)
    kinds = [(t.meta or {}).get("kind") for t in fig.data]
    assert kinds.count("to_parity") == 1 and kinds.count("to_dyck") == 1
    assert "profile distance" in fig.layout.xaxis.title.text


def test_empty_inputs():
    assert reversal_matrix([]).layout.meta == {"empty": True}
    assert s3_distance_figure([]).layout.meta == {"empty": True}
    assert s3_distances(curve_rows(tasks=("parity", "dyck"))) == []


def test_s3_distance_is_claim_3s_distance():
    """The page's distances are science.profiles.profile_distance on the cells' mean curves
    and majority baselines, the function claim 3 decides with (not a copy that could drift)."""
    from science.profiles import profile_distance

    rows = curve_rows()
    for r in rows:  # give S3 a shape of its own, so both distances are non-trivial
        if r["task"] == "s3":
            r["mean"] = r["majority_baseline"] + (0.98 - r["majority_baseline"]) * ((r["layer"] + 1) / 4) ** 2

    def curve(fam: str, task: str) -> dict[int, float]:
        return {r["layer"]: r["mean"] for r in rows if r["family"] == fam and r["task"] == task}

    def base(task: str) -> float:
        return next(r["majority_baseline"] for r in rows if r["task"] == task)

    dist = s3_distances(rows, eval_length=40)
    assert dist
    for d in dist:
        f = d["family"]
        want_p = profile_distance(curve(f, "s3"), curve(f, "parity"), base("s3"), base("parity"))
        want_d = profile_distance(curve(f, "s3"), curve(f, "dyck"), base("s3"), base("dyck"))
        # equal up to the rounding of the baseline's mean over the layers' rows
        assert (d["to_parity"], d["to_dyck"]) == pytest.approx((want_p, want_d), rel=1e-12)
        assert abs(want_p - want_d) > 0.01
