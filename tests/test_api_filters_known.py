"""A filter that names no family, task or method is a 422 naming the allowed values — not an
empty 200 that reads as "no results" (a new user's `?family=foo` returned `[]`)."""

from __future__ import annotations

import pytest

from tests.conftest import seed_runs


@pytest.mark.parametrize(
    "url, field",
    [
        ("/api/runs?family=foo", "family"),
        ("/api/runs?family=lstm&family=bogus", "family"),
        ("/api/curves?task=nope", "task"),
        ("/api/profiles?family=Transformer", "family"),
        ("/api/export/interventions.json?method=ablate", "method"),
    ],
)
def test_unknown_names_are_422_naming_the_field(api, url, field) -> None:
    r = api.client.get(url)
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"][:2] == ["query", field] and "one of" in err["msg"]


def test_known_names_still_filter(api) -> None:
    seed_runs(api.factory, families=("lstm", "gru"), tasks=("parity",), seeds=(0,), suite="s")
    r = api.client.get("/api/runs?family=lstm")
    assert r.status_code == 200 and {x["family"] for x in r.json()["items"]} == {"lstm"}
    assert api.client.get("/api/curves?task=parity&suite=s").status_code == 200
