"""/claims' table per claim (dashboard/claims_table.py): the verdict, the numbers with their
intervals, the cells read and what was left out in one table; the prose one click away."""

from __future__ import annotations

from dash import html

from dashboard.claims_table import cells_read, claim_table, left_out_summary, read_summary
from dashboard.pages import claims
from tests.test_dashboard_pages import texts, walk

CLAIM = {
    "id": 3,
    "title": "Stacked RNNs",
    "verdict": "supported",
    "detail": "A long paragraph about the stacked-RNN reading that used to fill the card.",
    "views": ["/curves?task=parity"],
    "numbers": {
        "alpha": 0.05,
        "min_seeds": 3,
        "late_gap": {"mean": 0.21, "lo": 0.1, "hi": 0.3, "n": 6},
        "test": {"p": 0.0004, "diff": 0.6},
        "test_auc": {"dyck": {"diff": -0.142, "p": 0.989}},
        "fragile": False,
        "cells": [
            {"task": "parity", "family": "lstm_stack", "matches": True},
            {"task": "s3", "family": "gru_stack", "matches": False},
            {"task": "parity", "family": "lstm_stack", "matches": True},
        ],
        "runs_left_out": [
            {"run_id": 7, "task": "s3", "family": "lstm", "seed": 2, "reason": "plateaued at 0.5"},
        ],
        "untestable": ["mamba × parity: not learned"],
    },
}


def _rows(table: html.Table) -> dict[str, str]:
    return {tr.children[0].children: " ".join(texts(tr.children[1])) for tr in walk(table) if isinstance(tr, html.Tr)}


def test_table_has_verdict_numbers_with_intervals_cells_and_left_out():
    rows = _rows(claim_table(CLAIM, claims.fmt_value))
    assert list(rows) == ["verdict", "numbers", "cells read", "left out", "rule"]
    assert rows["verdict"] == "supported"
    assert "0.21 [0.1, 0.3] (n=6)" in rows["numbers"] and "p = < 0.001 (diff=0.6)" in rows["numbers"]
    assert "test auc dyck   p = 0.989 (diff=-0.142)" in rows["numbers"]  # per-task tests one level down
    assert "fragile" not in rows["numbers"]  # the controls section's key stays with the full text
    assert rows["cells read"] == "2 cells: LSTM (stacked) × Parity, GRU (stacked) × S3"
    assert "1 untrained run (" in rows["left out"] and "seed 2: plateaued at 0.5" in rows["left out"]
    assert "untestable: mamba × parity: not learned" in rows["left out"]
    assert rows["rule"] == "alpha 0.05 · min seeds 3"


def test_cells_read_each_once_in_order_and_nothing_said_plainly():
    assert len(cells_read(CLAIM["numbers"])) == 2
    assert read_summary({}) == "none" and left_out_summary({}) == "nothing"
    assert read_summary({"tasks": {"s3": {"x": 1}, "dyck": {"x": 2}}}) == "2 tasks"
    many = [{"task": "parity", "family": f"f{i}"} for i in range(10)]
    assert read_summary({"cells": many}).endswith("and 2 more")


def test_card_puts_the_prose_one_click_away_under_the_table():
    card = claims.claim_card(CLAIM, lambda p: p)
    table = next(c for c in walk(card) if getattr(c, "id", None) == "claim-3-table")
    full = next(c for c in walk(card) if isinstance(c, html.Details))
    assert not getattr(full, "open", False)  # closed: one click away
    why, body = full.children
    assert why.children == "why / full text" and why.id == {"type": claims.WHY, "claim": "3"}
    assert body.id == {"type": claims.FULL, "claim": "3"} and body.children is None  # filled on the first click
    assert CLAIM["detail"] not in texts(card)
    assert card.children.index(table) < card.children.index(full)


def test_full_text_holds_the_prose_and_every_table_of_the_claim():
    shown = html.Div(claims.full_text_for([CLAIM], "3"))
    assert CLAIM["detail"] in texts(shown) and "cells (3 rows)" in texts(shown)
    assert "claim 9 is no longer among this suite's claims" in texts(html.Div(claims.full_text_for([CLAIM], 9)))
