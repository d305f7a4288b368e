"""The worker's log line after training says a held-out accuracy as the run pages do (4 decimals):
it printed a float32's full repr (0.5249999761581421)."""

from worker.pipeline import _acc


def test_a_held_out_accuracy_is_logged_with_four_decimals_or_a_dash():
    assert _acc(0.5249999761581421) == "0.5250"
    assert _acc(1.0) == "1.0000"
    assert _acc(None) == "-"
