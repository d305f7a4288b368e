"""The reversal page's S3 question uses claim 3's distance (science.profiles.profile_distance), not a
copy of it that could drift."""

from __future__ import annotations

import pytest

from dashboard.figures import reversal, s3_distance
from science import profiles as P
from tests.dashboard_data import curve_rows


def _curve(rows: list[dict], family: str, task: str) -> tuple[dict[int, float], float]:
    mine = [r for r in rows if r["family"] == family and r["task"] == task]
    return {r["layer"]: r["mean"] for r in mine}, mine[0]["majority_baseline"]


def test_s3_distances_are_claim_3s_profile_distance() -> None:
    rows = curve_rows(lengths=(40,))
    dist = s3_distance.s3_distances(rows, eval_length=40)
    assert dist
    for d in dist:
        s3, b3 = _curve(rows, d["family"], "s3")
        for task in ("parity", "dyck"):
            other, bo = _curve(rows, d["family"], task)
            assert d[f"to_{task}"] == pytest.approx(P.profile_distance(s3, other, b3, bo), abs=1e-12)
    assert any(d["to_parity"] != d["to_dyck"] for d in dist)  # the fixture's shapes differ somewhere


def test_the_dashboard_keeps_no_copy_of_the_distance() -> None:
    for module in (reversal, s3_distance):
        assert not hasattr(module, "_normalised_curve") and not hasattr(module, "_interp")
    assert s3_distance.profile_distance is P.profile_distance


def test_a_family_with_a_missing_layer_gets_no_distance() -> None:
    assert "lstm" in {d["family"] for d in s3_distance.s3_distances(curve_rows(lengths=(40,)), eval_length=40)}
    rows = [
        r for r in curve_rows(lengths=(40,)) if not (r["family"] == "lstm" and r["task"] == "s3" and r["layer"] == 1)
    ]
    assert "lstm" not in {d["family"] for d in s3_distance.s3_distances(rows, eval_length=40)}
