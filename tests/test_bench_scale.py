"""benchmarks/bench_scale.py on a tiny GPT-NeoX from config: one JSON object with the documented
keys, its floor and ratio computed from the same run's matmul and memory read rates."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

_spec = importlib.util.spec_from_file_location(
    "bench_scale", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scale.py"
)
bench_scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_scale)


def test_bench_scale_prints_one_object_with_the_documented_numbers(capsys, monkeypatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_MEASURE_MEMORY_GB", "0.01")
    from store.settings import get_settings

    get_settings.cache_clear()
    try:
        args = ["--layers", "2", "--d-model", "32", "--heads", "4", "--sequences", "24", "--lengths", "12"]
        assert bench_scale.main([*args, "--parts", "probes,interventions", "--interv-layers", "1", "--json"]) == 0
    finally:
        get_settings.cache_clear()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"seconds", "parts", "flops", "peak_flops", "floor_seconds", "ratio", "peak_rss_gb"} <= out.keys()
    assert set(out["parts"]) == {"probes", "interventions"} and out["memory_gb"] == pytest.approx(0.01)
    assert out["flops"] > 0 and out["peak_flops"] > 0 and out["peak_read_gbps"] > 0
    parts, fits = out["part_floor_seconds"], out["fit_floor_seconds"]
    assert out["floor_seconds"] == pytest.approx(sum(parts.values()), rel=0.01, abs=0.01)
    # an evaluation's floor is at least its FLOPs at the matmul rate (bytes may make it more)
    assert out["floor_seconds"] >= out["flops"] / out["peak_flops"] * 0.99
    assert set(fits) == set(parts) and all(0 <= fits[k] <= parts[k] + 0.01 for k in parts)
    # seconds is printed to 0.01 s: on a floor of ~0.01 s that rounding alone moves seconds/floor by ~5 %,
    # so the ratio is checked against seconds within its printed precision
    assert out["ratio"] * out["floor_seconds"] == pytest.approx(out["seconds"], rel=0.01, abs=0.006)
    assert out["peak_flops_fp32"] == out["peak_flops"]  # at fp32 the solvers' rate is the forwards'


def test_bf16_times_a_float32_rate_for_the_solvers(capsys) -> None:
    args = ["--layers", "1", "--d-model", "32", "--heads", "4", "--sequences", "24", "--lengths", "12"]
    assert bench_scale.main([*args, "--parts", "probes", "--precision", "bf16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["precision"] == "bf16" and out["peak_flops_fp32"] > 0
    assert out["peak_flops_fp32"] != out["peak_flops"]  # timed apart: a float32 and a bfloat16 product


def test_fit_floor_takes_the_larger_of_flops_and_bytes() -> None:
    from benchmarks.floors import FitCounter, Rates

    # 1,000 × 100 rows, 2 classes, 3 evaluations: 0.8 MFLOP and 0.8 MB of reads an evaluation
    fits = FitCounter([(1000, 100, 2, 3)])
    assert fits.eval_floor(Rates(gflops=1, gbps=1e6)) == pytest.approx(3 * 0.8e6 / 1e9)  # FLOPs
    assert fits.eval_floor(Rates(gflops=1, gbps=1e-3)) == pytest.approx(3 * 0.8e6 / 1e6)  # bytes
    assert fits.eval_floor(Rates(gflops=1e-3, gbps=1)) == pytest.approx(3 * 0.8e6 / 1e6)  # FLOPs


def test_bench_scale_refuses_in_one_line_what_cannot_fit(capsys, monkeypatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_MEASURE_MEMORY_GB", "0.00001")
    from store.settings import get_settings

    get_settings.cache_clear()
    try:
        args = ["--layers", "1", "--d-model", "32", "--heads", "4", "--sequences", "200", "--parts", "probes"]
        assert bench_scale.main(args) == 2
    finally:
        get_settings.cache_clear()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bench_scale: probes at L=40") and "LAYERSCOPE_MEASURE_MEMORY_GB" in line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--lengths", "abc"], "comma-separated integers"),
        (["--sequences", "0"], "must be ≥ 2"),
        (["--heads", "5"], "must divide --d-model"),
        (["--heads", "4", "--task", "nosuch"], "unknown task"),
        (["--heads", "4", "--interv-layers", "5"], "[5] out of range for a 2-layer model (-1..1)"),
        (["--heads", "4", "--interv-layers", "1,x"], "expected all or whole numbers"),
        (["--heads", "4", "--inlp-max-rounds", "-2"], "must be ≥ 0 (0: uncapped)"),
    ],
)
def test_bad_arguments_are_one_line_not_a_traceback(args, words, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        bench_scale.main(["--layers", "2", "--d-model", "64", "--parts", "probes", *args])
    assert done.value.code == 2 and words in capsys.readouterr().err


def test_a_fit_on_rows_on_disk_is_counted_with_its_rows() -> None:
    # a design on disk holds Xt [D, 0]: counted from Xt's shape, its evaluations had no floor at all
    from benchmarks.floors import counting_fits
    from science.probes.design import standardise_rows
    from science.probes.linear import fit_design, standardised
    from science.spill import SpilledRows

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (900,), generator=g)
    X = torch.randn(900, 12, generator=g) + torch.randn(3, 12, generator=g)[y]
    with SpilledRows(12) as rows, counting_fits() as fits:
        rows.append(X)
        fit_design(standardised(X), y, 3)
        fit_design(standardise_rows(rows), y, 3)
    (in_memory, on_disk) = fits.fits
    assert in_memory[:3] == on_disk[:3] == (900, 12, 3) and on_disk[3] > 0
