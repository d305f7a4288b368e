"""The eval lengths a page offers come from the runs it shows (``GET /api/suites``'s
``eval_lengths`` / ``patch_lengths`` / ``train_lengths``): a file task of 20-token rows offers 20,
a URL length never measured gives way to the suite's own, and /patching says why a grid is empty."""

from __future__ import annotations

from dashboard import lengths
from dashboard.pages import patching
from dashboard.theme import EVAL_LENGTHS

SUITES = [
    {
        "name": "paper",
        "n_runs": 60,
        "eval_lengths": [40, 60, 80, 100, 120],
        "train_lengths": [40],
        "patch_lengths": [40],
    },
    {"name": "byo_mod3", "n_runs": 3, "eval_lengths": [20], "train_lengths": [20], "patch_lengths": [20]},
    {"name": "fresh", "n_runs": 1},  # nothing probed yet
]


class Api:
    def suites(self):
        return SUITES

    def runs(self, **kw):
        return {"items": [], "total": 0, "limit": 1, "offset": 0}


def test_a_file_tasks_suite_offers_its_own_length_marked_train():
    api = Api()
    assert lengths.length_options(api, "byo_mod3") == [{"label": "L=20 (train)", "value": 20}]
    assert [o["value"] for o in lengths.length_options(api, "paper")] == [40, 60, 80, 100, 120]
    assert lengths.length_options(api, None)[0] == {"label": "L=40 (train)", "value": 40}  # the default suite
    # a suite with nothing probed yet: the study's lengths, as before
    assert [o["value"] for o in lengths.length_options(api, "fresh")] == list(EVAL_LENGTHS)


def test_a_length_never_measured_gives_way_to_the_suites_own():
    api = Api()
    assert lengths.resolve_length(api, {"suite": "byo_mod3", "length": 40})["length"] == 20
    assert lengths.resolve_length(api, {"suite": "byo_mod3", "length": None})["length"] == 20  # never "L=None"
    assert lengths.resolve_length(api, {"suite": "paper", "length": 80})["length"] == 80
    assert lengths.resolve_lengths(api, {"suite": "byo_mod3", "lengths": [40]})["lengths"] == [20]
    assert lengths.resolve_lengths(api, {"suite": "paper", "lengths": [40, 20, 120]})["lengths"] == [40, 120]
    assert lengths.resolve_lengths(api, {"suite": "paper", "lengths": []})["lengths"] == []  # every length


class PatchApi:
    def __init__(self, rows):
        self.rows = rows

    def run_patching(self, rid, eval_length=None, site=None):
        return [r for r in self.rows if site is None or r["site"] == site]


def test_patching_names_why_a_runs_grid_is_empty():
    grid = {"run_id": 7, "family": "gru", "title": "#7"}
    at_20 = PatchApi([{"site": "state", "eval_length": 20}])
    assert patching.missing_reason(at_20, grid, {"site": "state", "length": 40}) == "patched at L=20 only"
    other_site = PatchApi([{"site": "resid_post", "eval_length": 20}])
    assert "resid_post only" in patching.missing_reason(other_site, grid, {"site": "state", "length": 20})
    none = PatchApi([])
    assert "not patched" in patching.missing_reason(none, grid, {"site": "state", "length": 20})
    tf = {**grid, "family": "transformer"}
    assert patching.missing_reason(none, tf, {"site": "state", "length": 20}) == "Transformer has no recurrent state"


def test_the_suites_list_says_the_lengths_each_suite_was_measured_at(api):
    from tests.conftest import seed_runs

    seed_runs(api.factory, families=("gru",), tasks=("parity",), seeds=(0,), eval_lengths=(20, 60), suite="mine")
    (suite,) = api.client.get("/api/suites").json()
    assert suite["name"] == "mine" and suite["eval_lengths"] == [20, 60]
    assert all(isinstance(L, int) for L in suite["train_lengths"] + suite["patch_lengths"])
