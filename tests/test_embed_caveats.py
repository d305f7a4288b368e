"""?embed=1 keeps the honesty caveats: the S3 figure carries claim 3's verdict line in the
figure itself, and the page's answer section stays visible in embed mode."""

from __future__ import annotations

from pathlib import Path

from dashboard.app import render_page
from dashboard.figures.s3_distance import s3_caveat, s3_distance_figure, s3_distances
from dashboard.pages import reversal
from tests.dashboard_data import curve_rows, profile_rows


class Api:
    def __init__(self, verdict="not enough data"):
        self.verdict = verdict

    def suites(self):
        return [{"name": "paper", "n_runs": 60, "imported": True}]

    def profiles(self, **_):
        return profile_rows()

    def curves(self, **_):
        return curve_rows(lengths=(40,))

    def claims(self, suite=None):
        return [{"id": 3, "verdict": self.verdict, "title": "S3", "numbers": {}, "detail": "", "views": []}]


def _annotations(fig) -> str:
    return " ".join(a.text for a in fig.layout.annotations)


def test_s3_figure_carries_the_claim_3_caveat() -> None:
    dist = s3_distances(curve_rows(lengths=(40,)), eval_length=40)
    text = _annotations(s3_distance_figure(dist, caveat=s3_caveat({"verdict": "not enough data"})))
    assert "closer to Parity" in text and "Not enough data (claim 3" in text and "descriptively only" in text
    assert "Claim 3 on /claims: supported." in _annotations(
        s3_distance_figure(dist, caveat=s3_caveat({"verdict": "supported"}))
    )
    assert s3_caveat(None) is None


def test_reversal_build_puts_the_verdict_in_the_embedded_figure() -> None:
    state = reversal.SPEC.decode("?suite=paper&embed=1", None)
    _matrix, _listing, s3, answer, err = reversal.build(Api(), state)
    assert err is None and "descriptively only" in _annotations(s3) and answer is not None


def test_embed_page_keeps_the_answer_section_visible() -> None:
    body, _ = render_page("/reversal", "?suite=paper&embed=1", api=Api(), path_for=lambda p: p)
    stack, found = [body], None
    while stack:
        c = stack.pop()
        if getattr(c, "id", None) == "rv-s3-answer":
            found = c
            break
        kids = getattr(c, "children", None)
        stack.extend(
            k for k in (kids if isinstance(kids, (list, tuple)) else [kids]) if k is not None and not isinstance(k, str)
        )
    assert found is not None and "card-caveat" in found.className.split()
    css = (Path(__file__).resolve().parents[1] / "dashboard/assets/layerscope.css").read_text()
    assert ".page-embed .card-section.card-caveat { display: block; }" in css
