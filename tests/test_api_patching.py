"""GET /api/runs/{id}/patching: sites stored side by side, filtered by ``site``, validated."""

import pytest

from tests.conftest import seed_runs
from worker import persist


@pytest.fixture
def seeded(api):
    api.run_ids = seed_runs(api.factory, families=("lstm",), tasks=("parity",), seeds=(0,))
    return api


def _rows(site, n_layers=2, positions=(0, 5, 9)):
    first = -1 if site == "resid_post" else 0
    return [
        dict(
            site=site,
            layer=ly,
            position=p,
            eval_length=40,
            recovery=None if site == "state" and p == 0 else 0.5,
            recovery_lo=0.4,
            recovery_hi=0.6,
            ld_clean=3.0,
            ld_corrupted=-3.0,
            n_pairs=120,
            n_dropped=8,
            corrupt_position=4,
            note=None,
            config_hash="h",
        )
        for ly in range(first, n_layers)
        for p in positions
    ]


def test_patching_rows_by_site(seeded) -> None:
    c, rid = seeded.client, seeded.run_ids[0]
    with seeded.factory() as s:
        persist.replace_patching_results(
            s, rid, [r for site in ("resid_pre", "resid_post", "state") for r in _rows(site)]
        )
    rows = c.get(f"/api/runs/{rid}/patching", params={"site": "state"}).json()
    assert len(rows) == 2 * 3 and {r["site"] for r in rows} == {"state"}
    assert {r["corrupt_position"] for r in rows} == {4} and {r["n_dropped"] for r in rows} == {8}
    assert sum(r["recovery"] is None for r in rows) == 2
    both = c.get(f"/api/runs/{rid}/patching", params={"site": ["resid_pre", "state"], "eval_length": 40}).json()
    assert {r["site"] for r in both} == {"resid_pre", "state"} and len(both) == 12
    all_rows = c.get(f"/api/runs/{rid}/patching").json()
    assert {r["site"] for r in all_rows} == {"resid_pre", "resid_post", "state"}


def test_patching_rejects_an_unknown_site(seeded) -> None:
    r = seeded.client.get(f"/api/runs/{seeded.run_ids[0]}/patching", params={"site": "attn"})
    assert r.status_code == 422 and "site" in r.text
