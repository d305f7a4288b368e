"""How a method's rows read on /probe-vs-causal comes from what the method declares
(``EditMethod.rank_chosen_by_fit``, ``random_control_is_itself``; ``GET /api/meta``'s
``method_traits``), not from its name: a method added in a test with the traits reads like the
built-in that has them, and the built-ins read as before."""

from __future__ import annotations

from dashboard.figures.probe_causal_table import probe_causal_table
from layerscope_core.registry import register_method, unregister_method
from science.edit_methods import EditMethod, Inlp, MeanAblation
from science.methods import traits_meta
from tests.dashboard_data import probe_rows

D_MODEL = 128


class FittedRank(EditMethod):
    """A stand-in method whose rank its fit chooses and whose random control is itself."""

    name = "fitted_rank"
    rank_chosen_by_fit = True
    random_control_is_itself = True


def _row(method: str, rank: int) -> dict:
    return {
        "run_id": 1,
        "method": method,
        "layer": 1,
        "eval_length": 40,
        "delta_pp": -20.0,
        "random_delta_pp": -15.0,
        "random_delta_lo": -16.0,
        "random_delta_hi": -14.0,
        "random_draws": 5,
        "rank_removed": rank,
    }


def _drop(table: list[dict], method: str) -> dict:
    return next(r for r in table if r["measure"] == f"drop:{method}")


def test_builtins_declare_the_traits_the_pages_read():
    traits = traits_meta()
    assert Inlp.rank_chosen_by_fit and not Inlp.random_control_is_itself
    assert MeanAblation.random_control_is_itself and not MeanAblation.rank_chosen_by_fit
    assert traits["inlp"] == {"rank_chosen_by_fit": True, "random_control_is_itself": False}
    assert traits["mean"] == {"rank_chosen_by_fit": False, "random_control_is_itself": True}
    assert not any(any(traits[m].values()) for m in ("project_out", "leace", "pca_top_k"))


def test_a_new_method_with_the_traits_reads_like_the_builtin_that_has_them(api):
    register_method(FittedRank.name, FittedRank())
    try:
        traits = api.client.get("/api/meta").json()["method_traits"]
    finally:
        unregister_method(FittedRank.name)
    assert traits[FittedRank.name] == {"rank_chosen_by_fit": True, "random_control_is_itself": True}
    rows = [_row("fitted_rank", 100), _row("pca_top_k", 100), _row("inlp", 40)]
    table = probe_causal_table(probe_rows(), rows, method_traits=traits, d_model=D_MODEL)
    new, pca, inlp = _drop(table, "fitted_rank"), _drop(table, "pca_top_k"), _drop(table, "inlp")
    assert new["not_selective"] and not pca["not_selective"]  # 100 of 128, a rank its fit chose
    assert not inlp["not_selective"]  # 40 of 128: under half the width
    assert new["value"] == -20.0 and not new["beyond_random"]  # read raw, as mean ablation is
    assert pca["value"] == -5.0 and pca["beyond_random"]  # −20 − (−15): beyond random removal
    # without the traits (a method that declares none) nothing is flagged or read raw
    bare = _drop(probe_causal_table(probe_rows(), rows, method_traits={}, d_model=D_MODEL), "fitted_rank")
    assert not bare["not_selective"] and bare["value"] == -5.0
