"""The fit-size rule (docs/SCIENCE.md#fit-size) fits an edit again on more sequences only where more
data could remove what its refit still reads: an INLP that spent its round budget without reaching
chance is kept at the base fit size (a larger fit set stops at the same budget), while one with
rounds left, and LEACE, are still fitted on doubled sets."""

from __future__ import annotations

import torch

from models_store import ModelConfig, build_model
from science import measure
from science.context import SilentContext
from science.edit_methods import Inlp
from science.edits import Edit
from science.tasks import get_task


def _edit(**info) -> Edit:
    return Edit(method="inlp", rank_removed=0, center=torch.zeros(4, dtype=torch.float64), info=info)


def test_inlp_wants_more_data_unless_its_budget_is_spent():
    inlp = Inlp()
    assert not inlp.more_data_helps(_edit(reached_chance=False, n_rounds=3, max_rounds=3))
    assert inlp.more_data_helps(_edit(reached_chance=True, n_rounds=3, max_rounds=3))
    assert inlp.more_data_helps(_edit(reached_chance=False, n_rounds=2, max_rounds=3))  # no new direction left
    assert inlp.more_data_helps(_edit())  # an edit without INLP's record: as before


class _Logged(SilentContext):
    """A silent context that keeps the log lines."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def log(self, line: str) -> None:
        self.lines.append(line)


def test_a_capped_inlp_is_not_fitted_on_more_sequences():
    task = get_task("dyck")
    model = build_model(
        ModelConfig(family="gru", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=1, d_model=32), seed=0
    ).eval()
    ctx = _Logged()
    rows = measure.measure_interventions(
        model,
        task,
        run_seed=0,
        eval_lengths=[12],
        n_sequences=40,
        methods=["inlp", "leace"],
        layers=[0],
        inlp_max_rounds=1,
        conv1d=False,
        fit_length=12,
        n_permutations=50,
        ctx=ctx,
    )
    logged = ctx.lines
    inlp = next(r for r in rows if r.method == "inlp")
    leace = next(r for r in rows if r.method == "leace")
    assert inlp.inlp_converged is False and inlp.inlp_rounds == 1  # the budget spent, chance not reached
    assert any(line.startswith("inlp at layer 0") and "budget is spent" in line for line in logged)
    assert not any(line.startswith("inlp at layer 0") and "fitting on" in line for line in logged)
    assert leace.n_fit_sequences >= inlp.n_fit_sequences  # LEACE keeps the rule (doubled where it leaks)
