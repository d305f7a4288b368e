"""layerscope.results: DataFrames over a DB URL and over a bundle, with the REST API's filters
(the same numbers as the API's JSON)."""

from __future__ import annotations

from pathlib import Path

import pytest

import layerscope.results as lr
from backend.bundle import BundleError
from backend.bundle_export import export_bundle
from tests.conftest import seed_runs

BUNDLE = Path(__file__).resolve().parents[1] / "examples" / "paper.layerscope.zip"


@pytest.fixture
def seeded(api):
    seed_runs(api.factory, suite="t")
    seed_runs(api.factory, families=("gru",), tasks=("dyck",), seeds=(0,), suite="other")
    return api


def test_runs_filters_match_the_rest_api(seeded) -> None:
    with lr.open(seeded.settings.resolved_db_url) as res:
        df = res.runs(suite="t", family="lstm", task=["dyck"])
        api = seeded.client.get("/api/runs", params={"suite": "t", "family": "lstm", "task": "dyck"}).json()
        assert sorted(df["id"]) == sorted(r["id"] for r in api["items"])
        assert set(df["family"]) == {"lstm"} and len(df) == 3
        assert set(res.runs()["suite"]) == {"t", "other"}
        assert set(res.runs(seed=[0, 1], suite="t")["seed"]) == {0, 1}
        assert list(res.suites().sort_values("suite")["n_runs"]) == [1, 12]


def test_result_tables_are_tidy_and_filtered(seeded) -> None:
    with lr.open(seeded.settings.resolved_db_url) as res:
        p = res.probes(suite="t", task="dyck", family="lstm", eval_length=40)
        assert set(p["eval_length"]) == {40} and set(p["family"]) == {"lstm"}
        assert len(p) == 3 * 3  # 3 seeds × (emb + 2 blocks)
        assert set(p["layer"]) == {-1, 0, 1} and set(p[p["layer"] == -1]["layer_name"]) == {"emb"}
        iv = res.interventions(suite="t", method="mean", eval_length=[60])
        assert set(iv["method"]) == {"mean"} and set(iv["eval_length"]) == {60}
        pt = res.patching(suite="t", run_id=p["run_id"].iloc[0])
        assert len(pt) == 3 * 2 and pt["recovery"].between(0, 1).all()
        grid = pt.pivot_table(index="layer", columns="position", values="recovery")
        assert grid.shape == (3, 2)


def test_curves_profiles_and_claims_are_the_apis(seeded) -> None:
    with lr.open(seeded.settings.resolved_db_url) as res:
        curves = res.curves(suite="t", task="parity", eval_length=40)
        api = seeded.client.get("/api/curves", params={"suite": "t", "task": "parity", "eval_length": 40}).json()
        assert sorted(curves["mean"].round(12)) == sorted(round(c["mean"], 12) for c in api)
        prof = res.profiles(suite="t", task="dyck")
        assert {"auc", "first_95"} <= set(prof["metric"]) and set(prof["suite"]) == {"t"}
        claims = res.claims(suite="t")
        api_claims = seeded.client.get("/api/claims", params={"suite": "t"}).json()
        assert list(claims["verdict"]) == [c["verdict"] for c in api_claims]


def test_a_bundle_opens_without_a_database_and_reads_its_claim(tmp_path, seeded) -> None:
    path = tmp_path / "t.layerscope.zip"
    with seeded.factory() as s:
        export_bundle(s, "t", path)
    res = lr.open(path)
    folder = Path(res._factory.kw["bind"].url.database).parent
    assert res.default_suite == "t" and len(res.runs()) == 12
    assert list(res.claims()["id"]) == [1, 2, 3, 4, 5, 6]
    res.close()
    assert not folder.exists()  # the temporary database went with close()


def test_the_shipped_bundles_claim_2_cells() -> None:
    with lr.open(BUNDLE) as res:
        cells = res.claim_cells(2).set_index("family")
        # read against the random-init controls: the SSMs' learned gain builds over the blocks, the
        # recurrent models' is there at once, the Transformer's builds (docs/RESULTS.md)
        assert cells.loc["transformer", "profile_class"] == "gradual"
        assert dict(cells["profile_class"]) == {
            "transformer": "gradual",
            "mamba": "gradual",
            "mamba2": "gradual",
            "lstm": "early",
            "gru": "early",
        }
        assert (cells["majority_class"] == "early").sum() == 4  # against the majority rate: all four early
        assert res.claims().set_index("id").loc[2, "verdict"] == "contradicted"
        assert len(res.runs(suite="paper", trained=True)) == 42


def test_not_a_bundle_is_a_bundle_error(tmp_path) -> None:
    with pytest.raises(BundleError, match="no such file"):
        lr.open(tmp_path / "missing.zip")
    with pytest.raises(BundleError, match="a folder, not a results bundle"):
        lr.open(tmp_path)  # found by a fresh user: a folder read "no such file"
    bad = tmp_path / "bad.zip"
    bad.write_text("not a zip")
    with pytest.raises(BundleError, match="not a layerscope bundle"):
        lr.open(bad)


def test_a_mistyped_database_path_is_refused_not_created(seeded, tmp_path, monkeypatch) -> None:
    """``lr.open("sqlite:///<typo>")`` once made a new empty database and every frame was empty."""
    typo = tmp_path / "layerscop.db"
    for url in (f"sqlite:///{typo}", "sqlite:///no-such-results.db", "sqlite:///~/no-such-dir/layerscope.db"):
        with pytest.raises(FileNotFoundError, match="no such file") as got:
            lr.open(url)
        assert "layerscope db upgrade" in str(got.value)
    assert not typo.exists() and not (tmp_path / "layerscop.db.migrate.lock").exists()
    assert not Path("no-such-results.db").exists()
    real = Path(seeded.settings.resolved_db_url.removeprefix("sqlite:///"))
    monkeypatch.setenv("HOME", str(real.parent))
    with lr.open(f"sqlite:///~/{real.name}") as res:  # ~ is the home folder, as the docstring shows
        assert len(res.runs()) > 0


def test_unknown_filters_are_errors_not_empty_frames(seeded) -> None:
    with lr.open(seeded.settings.resolved_db_url) as res:
        with pytest.raises(ValueError, match="family 'rnn' unknown; one of transformer"):
            res.runs(family="rnn")
        with pytest.raises(ValueError, match="task 'chess' unknown"):
            res.probes(task=["dyck", "chess"])
        with pytest.raises(LookupError, match="suite 'nope' not found; suites here: 'other', 't'"):
            res.curves(suite="nope")
        with pytest.raises(ValueError, match="controls 'exlude' unknown; one of exclude, include, only"):
            res.runs(controls="exlude")
