"""The study's claims in words: what ``GET /api/claims``, the dashboard's /claims page and
docs/RESULTS.md show.

``science.claims.evaluate_claims`` decides each verdict and returns data only (``{id, verdict,
numbers, why}``); :func:`present_claims` adds what a reader sees: the claim's ``title``, the
sentence that explains its verdict (``detail``, one module per claim's rule, mirroring
``science.claims``), the links to the dashboard views that show it (``views``), and the rows of
``numbers`` the science gives as records (cells short of seeds, cells not learned, fragile
cells, ...) as sentences. Output per claim: ``{id, title, verdict, numbers, detail, views}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backend.claims_text.behaviour import behaviour_detail
from backend.claims_text.claim3 import claim3_detail
from backend.claims_text.common import text_numbers, with_left_out
from backend.claims_text.contrast import contrast_detail
from backend.claims_text.conv1d import conv1d_detail
from backend.claims_text.necessity import necessity_detail
from science.claims.common import EVAL_LENGTH, PREFIX_TASKS, STACK_TASK

__all__ = ["TITLES", "VIEWS", "detail", "present_claim", "present_claims"]

TITLES = {
    1: "Prefix-update tasks: recurrent models and SSMs readable only at the last layer, Transformers gradual",
    2: "Bounded Dyck flips the pattern: Transformers early, recurrent models and SSMs gradual",
    3: "S3 groups with Parity, not with Dyck: computational structure, not commutativity",
    4: "The most readable layer is not always the causally necessary one",
    5: "Conv1D importance is task dependent: S3 > Parity > Dyck (n.s.)",
    6: "Behaviour: recurrent models length-generalise; recurrent > SSM > Transformer; Mamba fails on Parity",
}

# the dashboard pages that show each claim (paths with their query)
VIEWS: dict[int, list[str]] = {
    1: [f"/reversal?task={t}" for t in PREFIX_TASKS]
    + [f"/curves?task={t}&eval_length={EVAL_LENGTH}" for t in PREFIX_TASKS],
    2: [f"/reversal?task={STACK_TASK}", f"/curves?task={STACK_TASK}&eval_length={EVAL_LENGTH}"],
    3: ["/reversal?task=s3", "/curves?task=s3", "/curves?task=parity", "/curves?task=dyck"],
    4: ["/probe-vs-causal", "/patching"],
    5: [
        "/probe-vs-causal?method=conv1d_removal&family=mamba",
        "/probe-vs-causal?method=conv1d_removal&family=mamba2",
    ],
    6: ["/?task=parity", "/?task=s3", "/curves?task=parity&view=behaviour"],
}

DETAIL: dict[int, Callable[[Mapping[str, Any]], str]] = {
    1: contrast_detail,
    2: contrast_detail,
    3: claim3_detail,
    4: necessity_detail,
    5: conv1d_detail,
    6: behaviour_detail,
}


def detail(claim: Mapping[str, Any]) -> str:
    """The sentence that explains a claim's verdict (``science.claims`` output), ending with the
    untrained runs it left out.

    Raises:
        KeyError: an unknown claim id, or a claim without the ``why`` / ``numbers`` its rule gives.
    """
    return with_left_out(DETAIL[claim["id"]](claim), claim["numbers"].get("runs_left_out") or [])


def present_claim(claim: Mapping[str, Any]) -> dict[str, Any]:
    """One claim of ``science.claims.evaluate_claims`` as it is shown: ``{id, title, verdict,
    numbers, detail, views}`` (a new dict; the input is left as it is)."""
    return {
        "id": claim["id"],
        "title": TITLES[claim["id"]],
        "verdict": claim["verdict"],
        "numbers": text_numbers(claim["numbers"], detail),
        "detail": detail(claim),
        "views": list(VIEWS[claim["id"]]),
    }


def present_claims(claims: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every claim of ``science.claims.evaluate_claims``, in order, as :func:`present_claim` shows it."""
    return [present_claim(c) for c in claims]
