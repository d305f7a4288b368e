"""The run panel's actions: tags and notes, "rebuild weights" for a run without them, several
runs' loss curves overlaid, and the search box of `/` sent to the API."""

from __future__ import annotations

from dashboard import suites
from dashboard.figures.runs import loss_overlay
from dashboard.pages import run_actions, runs
from tests.conftest import find_component


def _run(i, family, ckpt="a" * 64, tags=None):
    return {
        "id": i,
        "name": f"{family}-{i}",
        "family": family,
        "checkpoint_id": ckpt,
        "tags": tags,
        "notes": "n",
        "loss_curve": [{"step": s, "loss": 1.0 / (s + 1)} for s in range(5)],
    }


def test_loss_overlay_one_line_per_run_in_its_family_colour() -> None:
    from dashboard.theme import family_color

    fig = loss_overlay([_run(1, "lstm"), _run(2, "lstm"), _run(3, "gru")])
    assert [t.meta["run_id"] for t in fig.data] == [1, 2, 3]
    assert fig.data[0].line.color == fig.data[1].line.color == family_color("lstm")
    assert fig.data[0].line.dash != fig.data[1].line.dash  # two runs of one family told apart
    assert fig.data[2].line.color == family_color("gru")


def test_rebuild_button_only_for_a_run_without_weights() -> None:
    assert run_actions.rebuild_section(_run(1, "lstm")) is None
    section = run_actions.rebuild_section(_run(1, "lstm", ckpt=None))
    assert find_component(section, "rn-rebuild") is not None


def test_annotations_show_the_runs_tags_and_parse_back() -> None:
    section = run_actions.annotation_section(_run(1, "lstm", tags=["a", "b c"]))
    assert find_component(section, "rn-tags").value == "a, b c"
    assert run_actions.parse_tags(" a , b c,, ") == ["a", "b c"]


def test_the_search_box_is_sent_to_the_api_and_kept_in_the_url() -> None:
    class Recorder:
        def runs(self, **kw):
            self.kw = kw
            return {"items": [], "total": 0, "limit": kw["limit"], "offset": kw["offset"]}

    api = Recorder()
    state = runs.SPEC.decode("?q=lr-sweep")
    runs.fetch_page(api, state)
    assert api.kw["q"] == "lr-sweep"
    assert "q=lr-sweep" in runs.SPEC.encode(state)


def test_a_suites_tags_show_in_the_suite_picker() -> None:
    class Api:
        def suites(self):
            return [
                {"name": "paper", "n_runs": 60, "imported": True, "tags": ["75 s"], "notes": "the study"},
                {"name": "quick", "n_runs": 15},
            ]

    opts = suites.suite_options(Api())
    assert opts[0]["label"].endswith("· 75 s") and opts[0]["title"] == "the study"
    assert "·" not in opts[1]["label"]


def test_an_intervene_on_a_run_without_weights_offers_the_rebuild_first_and_queues_both() -> None:
    """The jobs form: the API's 422 (no weights here) comes with a button that queues the rebuild
    with the intervene job after it (``then``), the form's params unchanged."""
    from dashboard.api_client import ApiError
    from dashboard.jobs_form import build_params, submit_job

    class Api:
        sent: list = []

        def create_job(self, kind, params, idempotency_key=None):
            why = f"run {params['run_id']} has no model weights here (imported from a bundle without weights)"
            raise ApiError(422, [{"loc": ["body", "params", "run_id"], "msg": why}])

        def rebuild_weights(self, run_id, then=None):
            self.sent.append((run_id, then))
            return {"id": 41, "kind": "rebuild", "state": "queued"}

    form = {"run_id": "67", "methods": ["leace"]}
    out = submit_job(Api(), 1, "intervene", form, ["", ""], 0, None)
    offer = find_component(out[2], "jb-rebuild-then")
    assert offer is not None and "then intervene" in offer.children
    then = find_component(out[2], "jb-then").data
    assert then == {"kind": "intervene", "params": build_params("intervene", form)}
    api = Api()
    line, disabled = run_actions.rebuild_then(api, 67, then)
    assert disabled and api.sent == [(67, then)] and "#41" in str(line)
    # a 422 for another reason offers nothing
    Api.create_job = lambda self, kind, params, idempotency_key=None: (_ for _ in ()).throw(  # type: ignore[method-assign]  # a stub answer
        ApiError(422, [{"loc": ["body", "params", "run_id"], "msg": "run 67 not found"}])
    )
    assert find_component(submit_job(Api(), 1, "intervene", form, ["", ""], 0, None)[2], "jb-rebuild-then") is None
