"""Large float32 linear layers of a measurement's CPU forward passes through oneDNN
(models_store.cpu_matmul): the same product within float rounding, a row's output independent of
its batch, the route decided by the setting and the layer alone, and the relations a measurement
relies on (an edited forward started at its layer equals the full one; bounded rows equal
unbounded ones) still exact with every linear layer routed."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from models_store import ModelConfig, build_model, cpu_matmul
from models_store.capture import edit_layer, module_outputs, start_at_layer
from science.precision import forward_precision, forwards

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


@pytest.fixture
def routed_calls(monkeypatch):
    """oneDNN on; the weight shapes of the calls it takes, in order."""
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "onednn")
    calls: list[tuple[int, ...]] = []
    real = cpu_matmul.onednn_linear

    def counted(x, weight, bias=None):
        calls.append(tuple(weight.shape))
        return real(x, weight, bias)

    monkeypatch.setattr(cpu_matmul, "onednn_linear", counted)
    return calls


@pytest.fixture
def every_layer_routed(routed_calls, monkeypatch):
    """As ``routed_calls``, for layers of any size."""
    monkeypatch.setattr(cpu_matmul, "MIN_WEIGHT_ELEMENTS", 0)
    return routed_calls


@pytest.mark.parametrize(
    ("vendor", "flags", "want"),
    [
        ("AuthenticAMD", "flags : fpu avx2 avx512f avx512bw", True),
        ("AuthenticAMD", "flags : fpu avx2 fma", False),  # Zen 3: MKL's AVX2 path is the core's rate
        ("GenuineIntel", "flags : fpu avx2 avx512f", False),  # MKL runs its own AVX-512 path there
    ],
)
def test_auto_routes_through_onednn_on_amd_cpus_with_avx512_only(monkeypatch, vendor, flags, want):
    monkeypatch.delenv(cpu_matmul.ENV_VAR, raising=False)
    monkeypatch.setattr(cpu_matmul, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(cpu_matmul, "cpu_flags", lambda: flags)
    cpu_matmul.amd_with_avx512.cache_clear()  # read once a process: this test's CPU, then the real one
    try:
        assert cpu_matmul.uses_onednn() is (want and torch.backends.mkldnn.is_available())
    finally:
        cpu_matmul.amd_with_avx512.cache_clear()
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "blas")
    assert cpu_matmul.uses_onednn() is False
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "onednn")
    assert cpu_matmul.uses_onednn() is torch.backends.mkldnn.is_available()


def test_the_settings_class_declares_the_same_choices():
    from typing import get_args

    from store.settings import Settings

    assert get_args(Settings.model_fields["cpu_matmul"].annotation) == cpu_matmul.CHOICES


def test_a_route_set_for_a_block_is_undone_after_it(monkeypatch):
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "blas")
    with cpu_matmul.route("onednn"):
        assert os.environ[cpu_matmul.ENV_VAR] == "onednn"
    assert os.environ[cpu_matmul.ENV_VAR] == "blas"
    monkeypatch.delenv(cpu_matmul.ENV_VAR)
    with pytest.raises(RuntimeError), cpu_matmul.route("onednn"):
        raise RuntimeError("inside")
    assert cpu_matmul.ENV_VAR not in os.environ
    with pytest.raises(ValueError, match="expected one of"), cpu_matmul.route("mkl"):
        pass
    assert cpu_matmul.ENV_VAR not in os.environ


def test_an_unknown_setting_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "openblas")
    said = r"LAYERSCOPE_CPU_MATMUL='openblas': expected one of \['auto', 'onednn', 'blas'\]"
    with pytest.raises(ValueError, match=said), forwards("cpu"):
        pass


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_the_onednn_product_is_the_blas_product_within_rounding(bias):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 41, 96, generator=g)  # [batch, seq, in]
    w = torch.randn(160, 96, generator=g)
    b = torch.randn(160, generator=g) if bias else None
    got = cpu_matmul.onednn_linear(x, w, b)
    want = F.linear(x, w, b)
    assert got.shape == want.shape == (3, 41, 160) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    assert torch.equal(x, torch.randn(3, 41, 96, generator=torch.Generator().manual_seed(0)))  # input untouched


@needs_onednn
def test_a_rows_output_does_not_depend_on_its_batch_or_the_threads():
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(700, 256, generator=g), torch.randn(512, 256, generator=g), torch.randn(512, generator=g)
    full = cpu_matmul.onednn_linear(x, w, b)
    for start, stop in [(0, 2), (0, 41), (5, 69), (100, 700), (699 - 63, 699)]:
        assert torch.equal(cpu_matmul.onednn_linear(x[start:stop], w, b), full[start:stop]), (start, stop)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(cpu_matmul.onednn_linear(x, w, b), full)
    finally:
        torch.set_num_threads(threads)


@needs_onednn
def test_the_route_depends_on_the_setting_the_weight_and_gradients(routed_calls, monkeypatch):
    calls = routed_calls
    big, small = torch.nn.Linear(512, 512), torch.nn.Linear(64, 64)
    x_big, x_small = torch.randn(4, 512), torch.randn(4, 64)
    with torch.no_grad(), forwards("cpu"):
        big(x_big), small(x_small), big(x_big.double().float())
    assert calls == [(512, 512), (512, 512)]  # the small layer (< 512 × 512) keeps BLAS
    calls.clear()
    with forwards("cpu"):
        out = big(x_big)  # gradients on: oneDNN's op has none
    assert calls == [] and out.requires_grad
    with torch.no_grad():
        want = F.linear(x_big, big.weight, big.bias)
        assert torch.equal(big(x_big), want)  # outside a measurement's forwards: BLAS
        with forward_precision("bf16"), forwards("cpu"):
            big(x_big)  # bf16 is autocast's matmul, not this route
    assert calls == []
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "blas")
    with torch.no_grad(), forwards("cpu"):
        assert torch.equal(big(x_big), want)  # bit for bit the BLAS product
    assert calls == []


@needs_onednn
@pytest.mark.parametrize("family", ["transformer", "mamba"])
@torch.no_grad()
def test_an_edited_forward_started_at_its_layer_is_still_the_full_one(family, every_layer_routed):
    cfg = ModelConfig(family=family, vocab_size=3, n_classes=2, n_layers=3, d_model=32, d_state=4)
    model = build_model(cfg, seed=0).eval()
    tokens = torch.randint(0, 3, (4, 11), generator=torch.Generator().manual_seed(1))
    with forwards("cpu"):
        _, outputs = module_outputs(model, tokens)
        for layer in model.layers:
            shift = lambda h: h * 0.5 + 0.25  # noqa: E731
            with edit_layer(model, layer, shift):
                want = model(tokens)
            with edit_layer(model, layer, shift), start_at_layer(model, layer, {layer: outputs[layer]}):
                assert torch.equal(model(tokens), want), (family, layer)
    assert every_layer_routed  # the linear layers did run through oneDNN
    with forwards("cpu"):
        routed = model(tokens)
    torch.testing.assert_close(routed, model(tokens), rtol=1e-4, atol=1e-5)  # BLAS's within rounding


@needs_onednn
def test_intervention_rows_started_at_their_layer_still_equal_full_forwards(every_layer_routed, monkeypatch):
    from tests.test_start_at_layer import test_the_intervention_rows_are_those_of_full_forward_passes

    test_the_intervention_rows_are_those_of_full_forward_passes("transformer", monkeypatch)
    assert every_layer_routed


@needs_onednn
def test_bounded_rows_still_equal_unbounded_ones(every_layer_routed, monkeypatch):
    from tests.test_measure_memory_bound import test_bounded_probes_and_interventions_equal_the_unbounded_ones

    test_bounded_probes_and_interventions_equal_the_unbounded_ones(monkeypatch)
    assert every_layer_routed  # the LSTM's classifier head, at least


@needs_onednn
def test_the_benchmark_prints_both_tables_and_leaves_the_setting_as_it_was(monkeypatch, capsys):
    from benchmarks.bench_cpu_matmul import main

    monkeypatch.setenv(cpu_matmul.ENV_VAR, "blas")
    assert main(["--widths", "64", "--layers", "1", "--batch", "2", "--length", "5", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| [10, 64] × [64, 192] |" in out and "| GPT-NeoX 1 × 64, 2 × 5 tokens |" in out
    assert out.count("\n|") == 2 + 4 + 2 + 1  # two headers with rules, 4 layers, 1 model
    assert os.environ[cpu_matmul.ENV_VAR] == "blas"


@needs_onednn
def test_a_trained_models_rows_through_onednn_stay_within_the_version_tolerances(every_layer_routed, monkeypatch):
    """docs/SCIENCE.md#measurement-versions: probes ±0.5 pp, refits ±1 pp, patching ±0.01, every
    edit's significance unchanged — on a trained model, whose predictions are not near ties (on a
    random-weight model at chance a rounding change can flip tied predictions: BENCHMARKS.md)."""
    from science.measurement_version import TOLERANCES
    from tests.test_precision import _measure, trained_transformer

    model, task = trained_transformer()
    routed = _measure(model, task, "fp32")
    assert every_layer_routed
    monkeypatch.setenv(cpu_matmul.ENV_VAR, "blas")
    blas = _measure(model, task, "fp32")
    assert routed != blas  # oneDNN's products did change some number
    pp = lambda a, b, field: abs(a[field] - b[field]) * 100  # noqa: E731  (0..1 → pp)
    for a, b in zip(routed["p"], blas["p"], strict=True):
        assert pp(a, b, "accuracy") <= TOLERANCES["probe_accuracy_pp"]
        assert pp(a, b, "control_accuracy") <= TOLERANCES["probe_accuracy_pp"]
    for a, b in zip(routed["i"], blas["i"], strict=True):
        assert (a["method"], a["layer"], a["significant"]) == (b["method"], b["layer"], b["significant"])
        if a["refit_acc"] is not None:
            assert pp(a, b, "refit_acc") <= TOLERANCES["refit_accuracy_pp"]
    for a, b in zip(routed["g"], blas["g"], strict=True):
        assert abs(a["recovery"] - b["recovery"]) <= 0.01
