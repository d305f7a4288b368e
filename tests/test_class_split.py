"""A cell's class is the class of its seed-mean curve (docs/SCIENCE.md#claims); wherever it is
shown, the per-seed split is shown beside it and cells where most seeds differ are flagged."""

from __future__ import annotations

from dashboard.figures.common import class_with_split, seeds_disagree
from dashboard.figures.reversal import reversal_matrix
from dashboard.pages import claims as claims_page
from dashboard.pages import reversal
from tests.dashboard_data import profile_rows


def _split_rows():
    rows = profile_rows(tasks=("dyck",))
    tf = next(p for p in rows if p["family"] == "transformer")
    tf.update(profile_class="early", class_counts={"gradual": 2, "early": 1})
    return rows, tf


def test_split_text_and_flag() -> None:
    assert (
        class_with_split("early", {"gradual": 2, "early": 1}) == "early (seeds: 1 early, 2 gradual) — most seeds differ"
    )
    assert class_with_split("gradual", {"gradual": 2, "early": 1}) == "gradual (seeds: 1 early, 2 gradual)"
    assert class_with_split("late", None) == "late"
    assert seeds_disagree("early", {"gradual": 2, "early": 1})
    assert not seeds_disagree("gradual", {"gradual": 2, "early": 1}) and not seeds_disagree("late", {"late": 3})


def test_reversal_matrix_cells_show_the_split_and_flag() -> None:
    rows, _tf = _split_rows()
    fig = reversal_matrix(rows)
    hm = fig.data[0]
    row = list(hm.y).index("Transformer")
    text = hm.text[row][0]
    assert "<b>early</b>" in text and "seeds: 1 early, 2 gradual ⚠" in text
    assert "most seeds differ" in hm.customdata[row][0][0]
    assert fig.layout.meta["seeds_disagree_cells"] == 1
    assert any("most seeds have another class" in a.text for a in fig.layout.annotations)
    other = hm.text[1 - row if row == 0 else 0][0]
    assert "⚠" not in other and "seeds: 3 " in other
    assert reversal_matrix(profile_rows()).layout.meta["seeds_disagree_cells"] == 0


def test_reversal_page_cell_text_csv_and_caption() -> None:
    rows, tf = _split_rows()
    assert "early (seeds: 1 early, 2 gradual) — most seeds differ" in reversal._cell_text(tf, "late_concentration")

    class Api:
        def profiles(self, **_):
            return rows

    csv = next(r for r in reversal.matrix_csv(Api(), reversal.SPEC.decode("", None)) if r["family"] == "transformer")
    assert csv["profile_class"] == "early" and csv["seeds_disagree"] is True
    assert csv["seed_classes"].startswith("early (seeds: 1 early, 2 gradual)")
    import inspect

    src = inspect.getsource(reversal.layout)
    assert "the profile class over seeds" not in src and "the profile class of the seed-mean probe curve" in src


def test_claims_tables_show_the_split() -> None:
    row = {
        "task": "dyck",
        "family": "transformer",
        "n": 3,
        "profile_class": "early",
        "class_votes": {"gradual": 2, "early": 1},
        "expected": "early",
    }
    shown = claims_page.with_class_split(row)
    assert shown["profile_class"] == "early (seeds: 1 early, 2 gradual) — most seeds differ"
    assert "class_votes" not in shown and row["profile_class"] == "early"
    fam = {"family": "lstm", "class_s3": "late", "class_votes_s3": {"late": 2, "gradual": 1}}
    assert claims_page.with_class_split(fam)["class_s3"] == "late (seeds: 1 gradual, 2 late)"
    csv = claims_page.claim_rows_csv([{"id": 1, "numbers": {"cells": [row]}}], "1", "cells")
    assert csv[0]["profile_class"].startswith("early (seeds:") and not any(k.startswith("class_votes") for k in csv[0])


def test_claims_rows_carry_the_votes_for_the_split() -> None:
    from tests.test_claims import EARLY, GRADUAL, LATE, NOT_ENOUGH, World

    w = World()
    for seed in (0, 1, 2):
        w.run("parity", "lstm", seed, EARLY)
    w.run("parity", "transformer", 0, GRADUAL)
    w.run("parity", "gru", 0, LATE, heldout_acc=0.5)
    c = w.claims()
    assert c[1]["verdict"] == NOT_ENOUGH
    lstm = next(x for x in c[1]["numbers"]["trained_cells"] if x["family"] == "lstm")
    assert lstm["class_votes"] == {"early": 3}
