"""Page state ⇄ URL query string."""

from __future__ import annotations

from dashboard.pages.curves import SPEC as CURVES
from dashboard.pages.runs import SPEC as RUNS
from dashboard.state import F, PageState, global_flags, is_embed, parse_search


def test_round_trip():
    state = CURVES.defaults() | {"tasks": ["parity", "s3"], "lengths": [40, 120], "x": "depth", "seeds": True}
    q = CURVES.encode(state)
    assert q.startswith("?") and "tasks=parity,s3" in q and "lengths=40,120" in q and "seeds=1" in q
    assert CURVES.decode(q) == state


def test_defaults_and_bad_values():
    assert CURVES.decode("") == CURVES.defaults()
    s = CURVES.decode("?x=sideways&lengths=forty&tasks=parity,nonsense")
    assert s["x"] == "layer"  # not a choice → default
    assert s["lengths"] == [40]  # unparsable → default
    assert s["tasks"] == ["parity"]  # unknown task dropped
    assert RUNS.decode("?page=-&seed=abc")["seed"] is None


def test_aliases_from_claim_links():
    s = CURVES.decode("?task=dyck&eval_length=40")
    assert s["tasks"] == ["dyck"] and s["lengths"] == [40]


def test_saved_view_base_overlaid_by_query():
    base = {"tasks": ["parity"], "x": "depth"}
    assert CURVES.decode("", base)["x"] == "depth"
    assert CURVES.decode("?x=layer", base)["x"] == "layer"
    assert CURVES.decode("?x=layer", base)["tasks"] == ["parity"]


def test_embed_flag_is_carried():
    assert is_embed("?embed=1&x=depth") and not is_embed("?x=depth") and not is_embed("?embed=0")
    spec = PageState([F("a", "int", 1)])
    assert spec.encode({"a": 2}, keep=global_flags("?embed=1")) == "?a=2&embed=1"
    assert parse_search("?a=1&a=2") == {"a": "2"}


def test_user_text_is_url_encoded():
    spec = PageState([F("suite", "str", None)])
    q = spec.encode({"suite": "<script>&x=1"})
    assert "<" not in q and "&x=1" not in q
    assert spec.decode(q)["suite"] == "<script>&x=1"
