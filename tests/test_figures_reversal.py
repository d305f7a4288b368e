"""Reversal matrix, reversal pairs and the S3 distance."""

from __future__ import annotations

from dashboard.figures.reversal import find_reversals, reversal_matrix, s3_distance_figure, s3_distances
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
