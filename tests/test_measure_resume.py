"""A run's interventions resume where a killed process left them (science/resume_folder.py): the
finished fits and eval lengths are read back, the rest computed, and the rows equal an unbroken
measurement's. Why: they take most of an hour a run on a 2-core CPU and were stored only whole,
so a session's end lost all of a run's work."""

from __future__ import annotations

import dataclasses

import pytest

from models_store import ModelConfig, build_model
from science.context import SilentContext
from science.measure import measure_interventions
from science.resume_folder import ResumeFolder, weights_digest
from science.tasks import get_task


class KilledAt(SilentContext):
    """Stops the measurement (as a kill would) at the first progress message holding ``at``."""

    def __init__(self, at: str) -> None:
        super().__init__()
        self.at = at

    def progress(self, fraction: float, message: str = "") -> None:
        if self.at in message:
            raise KeyboardInterrupt(message)


def _model(seed: int = 0):
    task = get_task("parity")
    cfg = ModelConfig(family="mamba", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=8)
    return task, build_model(cfg, seed=seed).eval()


def _measure(resume=None, ctx=None):
    task, model = _model()
    return measure_interventions(
        model,
        task,
        run_seed=0,
        eval_lengths=[12, 16],
        n_sequences=40,
        methods=["mean", "leace", "inlp"],
        inlp_max_rounds=3,
        fit_length=12,
        n_permutations=100,
        ctx=ctx,
        resume=resume,
    )


def _edit_matrix(row):
    edit = getattr(row, "edit", None)
    return None if edit is None else (edit.method, edit.rank_removed, edit.center.tolist())


def _plain(rows):
    return [dataclasses.asdict(r) for r in rows]


@pytest.mark.parametrize("killed_at", ["fitting inlp at layer 1", "L=16"])
def test_a_killed_measurement_resumes_to_the_rows_of_an_unbroken_one(tmp_path, monkeypatch, killed_at) -> None:
    import science.measure as measure

    unbroken_rows = _measure()
    unbroken = _plain(unbroken_rows)
    folder = ResumeFolder(tmp_path / "pieces")
    with pytest.raises(KeyboardInterrupt):
        _measure(resume=folder, ctx=KilledAt(killed_at))
    done = sorted(p.name for p in folder.path.glob("*.pt"))
    assert "fit-mean-0.pt" in done and "rows-L16.pt" not in done  # some pieces finished, not all
    fits: list[str] = []
    real_fit = measure.fit_edit
    monkeypatch.setattr(measure, "fit_edit", lambda method, *a, **k: fits.append(method) or real_fit(method, *a, **k))
    resumed_rows = _measure(resume=folder)
    resumed = _plain(resumed_rows)
    assert resumed == unbroken
    # each row keeps its fitted edit (the worker stores the directions it removed), read back too
    unbroken_edits = [_edit_matrix(r) for r in unbroken_rows]
    assert [_edit_matrix(r) for r in resumed_rows] == unbroken_edits and any(e is not None for e in unbroken_edits)
    assert "fit-mean-0.pt" in done and fits.count("mean") == 0  # the finished fits were not redone
    if killed_at == "L=16":
        assert fits == [] and "rows-L12.pt" in done  # every fit and the first length were read back


def test_the_folder_is_named_by_the_weights() -> None:
    _, a = _model(seed=0)
    _, b = _model(seed=1)
    assert weights_digest(a) == weights_digest(_model(seed=0)[1]) != weights_digest(b)


def test_a_piece_that_is_not_plain_data_is_neither_kept_nor_read_back(tmp_path) -> None:
    """Pieces travel in bundles and are read with ``weights_only=True``: unpickling an object
    from someone else's file would run code. A piece of an older layerscope (a pickled ``Edit``)
    is measured again."""
    import torch

    from science.interventions import Edit

    folder = ResumeFolder(tmp_path / "pieces")
    edit = Edit(method="mean", rank_removed=4, center=torch.zeros(4))
    folder.save("fit-mean-0", edit)
    assert not (folder.path / "fit-mean-0.pt").exists()
    folder.path.mkdir(parents=True, exist_ok=True)
    torch.save((edit, 40, None), folder.path / "fit-mean-1.pt")  # as the first version kept them
    assert folder.load("fit-mean-1") is None and not (folder.path / "fit-mean-1.pt").exists()
    folder.save("fit-mean-2", {"edit": dataclasses.asdict(edit), "n": 40, "refit": None})
    assert Edit(**folder.load("fit-mean-2")["edit"]).rank_removed == 4
    with pytest.raises(ValueError, match="not a measurement piece name"):
        folder.save("../escape", {})


def test_a_refit_kept_without_its_removal_line_is_measured_again(tmp_path) -> None:
    """Pieces kept before each refit stored its removal line hold (accuracy, majority): resumed,
    the fits are read back and the refits measured again, giving the unbroken rows (a 2-tuple read
    as a 3-tuple would fail at the row)."""
    unbroken = _plain(_measure())
    folder = ResumeFolder(tmp_path / "pieces")
    with pytest.raises(KeyboardInterrupt):
        _measure(resume=folder, ctx=KilledAt("inlp at layer 0, L=12"))  # every fit kept, no row
    old = 0
    for piece in folder.path.glob("fit-*.pt"):
        got = folder.load(piece.stem)
        if got["refit"] is not None:
            folder.save(piece.stem, {**got, "refit": got["refit"][:2]})
            old += 1
    assert old > 0  # LEACE and INLP kept their refits at the fit length
    assert _plain(_measure(resume=folder)) == unbroken
