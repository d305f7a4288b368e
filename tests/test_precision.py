"""Forward precision (docs/SCIENCE.md#precision): at fp32 the measurement is the code without the
setting, bit for bit (no autocast entered, the same rows, the same params and hashes); at bf16 the
forward passes run under bfloat16 autocast, edits run in float32 inside their hooks, and the rows
of a small trained model stay within the tolerances docs/SCIENCE.md states."""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import pytest
import torch

import models_store.capture as capture_mod
import science.captured as captured_mod
import science.patching as patching_mod
from models_store import ModelConfig, build_model
from models_store.capture import edit_layer
from science.measure import measure_interventions, measure_probes
from science.patching import patching_grid
from science.precision import forward_precision, forwards
from science.tasks import get_task
from science.training import TrainConfig, train_model
from worker.job_params import InterveneParams, MeasureParams, PatchParams, ProbeParams

# docs/SCIENCE.md#precision: |bf16 − fp32| per row, at most
TOLERANCES = {
    "accuracy": 0.02,  # probe accuracy (0..1)
    "control_accuracy": 0.02,
    "base_acc": 0.01,  # unedited behaviour (0..1)
    "delta_pp": 5.0,  # edited − base (pp)
    "random_delta_pp": 1.0,
    "refit_acc": 0.08,
    "recovery": 0.05,  # patching
    "ld_clean": 0.1,  # logits
}


def trained_transformer():
    """A 2-layer d 32 transformer trained 100 steps on dyck, and its task."""
    task = get_task("dyck")
    cfg = ModelConfig(
        family="transformer", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=32
    )
    model = build_model(cfg, seed=0)
    recipe = TrainConfig(
        max_steps=100, train_length=12, curriculum_start=None, warmup_steps=10, eval_every=50, batch_size=32
    )
    train_model(model, task, recipe, seed=0)
    return model.eval(), task


@pytest.fixture(scope="module")
def trained():
    return trained_transformer()


def _measure(model, task, precision: str | None) -> dict[str, list[dict]]:
    kw = {} if precision is None else {"precision": precision}
    probes = measure_probes(model, task, run_seed=0, eval_lengths=[12], n_sequences=100, config_hash="h", **kw)
    edits = measure_interventions(
        model,
        task,
        run_seed=0,
        eval_lengths=[12],
        n_sequences=100,
        methods=["mean", "project_out"],
        fit_length=12,
        n_permutations=100,
        **kw,
    )
    grid = patching_grid(model, task, run_seed=0, eval_length=8, n_pairs=32, **kw)
    return {k: [dataclasses.asdict(r) for r in v] for k, v in (("p", probes), ("i", edits), ("g", grid))}


def test_fp32_rows_are_those_of_the_code_without_the_setting(trained, monkeypatch) -> None:
    model, task = trained
    seen: list[bool] = []
    hook = model.hook_module(0).register_forward_hook(lambda *_: seen.append(torch.is_autocast_enabled("cpu")))
    try:
        fp32 = _measure(model, task, "fp32")
        assert seen and not any(seen)  # no forward pass ran under autocast
        # the code before the setting: no precision context anywhere, edits called straight
        plain = lambda *a, **k: contextlib.nullcontext()  # noqa: E731
        for mod in (captured_mod, patching_mod):
            monkeypatch.setattr(mod, "forwards", plain)
        monkeypatch.setattr(capture_mod, "_autocast_off", plain)
        before = _measure(model, task, None)
    finally:
        hook.remove()
    assert fp32 == before


def test_fp32_params_dump_and_hash_as_before_and_bf16_is_stored() -> None:
    for cls, kw in (
        (MeasureParams, {}),
        (ProbeParams, {"run_id": 1}),
        (InterveneParams, {"run_id": 1}),
        (PatchParams, {"run_id": 1}),
    ):
        fp32, bf16 = cls(**kw), cls(**kw, precision="bf16")
        assert "precision" not in fp32.model_dump() and cls(**kw, precision="fp32").model_dump() == fp32.model_dump()
        assert bf16.model_dump(mode="json")["precision"] == "bf16" and bf16.config_hash() != fp32.config_hash()
        assert cls.model_validate(bf16.model_dump()).precision == "bf16"
    with pytest.raises(ValueError, match="precision"):
        ProbeParams(run_id=1, precision="fp16")


def test_bf16_forwards_run_under_autocast_and_edits_in_float32(trained) -> None:
    model, task = trained
    tokens = task.generate(12, 4, 0, split="test").tokens
    got: dict[str, object] = {}

    def edit(h: torch.Tensor) -> torch.Tensor:
        got["autocast_in_edit"] = torch.is_autocast_enabled("cpu")
        got["matmul"] = (h.float() @ torch.eye(h.shape[-1])).dtype  # float32 unless autocast were on
        return h

    with forward_precision("bf16"), forwards("cpu"), edit_layer(model, 0, edit):
        got["autocast_outside"] = torch.is_autocast_enabled("cpu")
        model(tokens)
    assert got == {"autocast_outside": True, "autocast_in_edit": False, "matmul": torch.float32}
    with pytest.raises(ValueError, match="precision 'fp16'"):
        measure_probes(model, task, run_seed=0, eval_lengths=[12], n_sequences=20, config_hash="", precision="fp16")


def test_bf16_forwards_keep_no_bfloat16_copy_of_the_weights(trained) -> None:
    # autocast's weight cache would hold half the model's bytes again beside the memory bound
    model, task = trained
    tokens = task.generate(12, 4, 0, split="test").tokens
    with forward_precision("bf16"), forwards("cpu"):
        cache_on = torch.is_autocast_cache_enabled()
        uncached = model(tokens)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the cache on: the same bits
        cached = model(tokens)
    assert cache_on is False
    assert torch.equal(uncached, cached)


def test_bf16_rows_stay_within_the_stated_tolerances(trained) -> None:
    model, task = trained
    fp32, bf16 = _measure(model, task, "fp32"), _measure(model, task, "bf16")
    assert fp32 != bf16  # bfloat16 forwards do change some number
    for kind in ("p", "i", "g"):
        assert len(fp32[kind]) == len(bf16[kind])
        for a, b in zip(fp32[kind], bf16[kind], strict=True):
            assert {k: a[k] for k in ("layer", "eval_length")} == {k: b[k] for k in ("layer", "eval_length")}
            for field, tol in TOLERANCES.items():
                if a.get(field) is not None and b.get(field) is not None:
                    assert abs(a[field] - b[field]) <= tol, (kind, a["layer"], field, a[field], b[field])


def test_a_suite_at_bf16_measures_every_run_at_it(tmp_path, monkeypatch, capsys) -> None:
    # a new user's trial: `suite` had no --precision, so a large model's suite could not run at bf16
    from backend.cli import main
    from store.models import Job
    from store.session import make_engine, make_sessionmaker
    from store.settings import get_settings
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    fp32, bf16 = SuiteParams(preset="smoke"), SuiteParams(preset="smoke", precision="bf16")
    assert "precision" not in fp32.model_dump(mode="json") and bf16.model_dump(mode="json")["precision"] == "bf16"
    assert fp32.config_hash() == SuiteParams.model_validate(fp32.model_dump(mode="json")).config_hash()
    assert fp32.config_hash() != bf16.config_hash()
    runs32, runs16 = expand_suite(fp32), expand_suite(bf16)
    assert {j.measure.precision for j in runs16} == {"bf16"} and {j.measure.precision for j in runs32} == {"fp32"}
    assert [j.run_hash() for j in runs16] == [j.run_hash() for j in runs32]  # the same runs, measured otherwise
    monkeypatch.setenv("LAYERSCOPE_HOME", str(tmp_path))
    monkeypatch.setenv("LAYERSCOPE_DB_URL", f"sqlite:///{tmp_path / 'r.db'}")
    monkeypatch.setenv("LAYERSCOPE_QUEUE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    get_settings.cache_clear()
    try:
        args = ["suite", "--preset", "smoke", "--task", "parity", "--family", "gru", "--precision", "bf16", "--submit"]
        assert main(args) == 0, capsys.readouterr().err
    finally:
        get_settings.cache_clear()
    with make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'r.db'}"))() as s:
        (job,) = s.query(Job).all()
    assert job.kind == "suite" and job.params["precision"] == "bf16"


@pytest.mark.parametrize(("flags", "warned"), [("flags\t: fpu avx2 fma", True), ("flags\t: avx2 avx512_bf16", False)])
def test_bf16_on_a_cpu_without_bfloat16_units_says_it_is_slower(flags, warned, monkeypatch, caplog) -> None:
    import models_store.compiled_ops as compiled_ops
    import science.precision as precision

    monkeypatch.setattr(compiled_ops, "cpu_flags", lambda: flags)
    precision._warn_if_slow_on_this_cpu.cache_clear()
    caplog.set_level(logging.WARNING, logger="science.precision")
    with precision.forward_precision("bf16"):
        for _ in range(2):  # said once a process
            with precision.forwards("cpu"):
                pass
    with precision.forwards("cpu"):  # fp32: nothing to say
        pass
    said = [r.getMessage() for r in caplog.records if "slower than at fp32" in r.getMessage()]
    assert len(said) == (1 if warned else 0)
    precision._warn_if_slow_on_this_cpu.cache_clear()
