"""The measurement's memory bound (``LAYERSCOPE_MEASURE_MEMORY_GB``, science.bounded): a bounded
measurement gives the rows of the unbounded one, bit for bit; its peak resident memory, measured
in a fresh process, stays within the bound where the unbounded one's does not; a measurement that
cannot fit is refused before it starts, in one line naming the setting."""

from __future__ import annotations

import dataclasses

import pytest

import science.bounded as bounded
from models_store import ModelConfig, build_model
from science.bounded import GIB, MEMORY_SETTING, MeasureMemoryError, MemoryBound
from science.measure import measure_interventions, measure_probes
from science.spilled_capture import SpilledCapture
from science.tasks import get_task
from tests.peak_memory import HWM, peak_growth

# small enough that no pass holds every probe layer (60 × 16 × 16 floats, 61 KB each, and a fit's copies)
PROBE_BOUND = MemoryBound(300_000)
# the interventions' smallest bound on 200 sequences: the twice-doubled fit set (800 × 12 × 16 floats)
# × INLP's fit_copies (5) beside one check layer, with room to spare
EDIT_BOUND = MemoryBound(5_300_000)


def _model(n_layers: int = 3, d_model: int = 16):
    task = get_task("parity")
    cfg = ModelConfig(
        family="lstm", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=n_layers, d_model=d_model
    )
    return build_model(cfg, seed=0).eval(), task


def _rows(records) -> list[dict]:
    return [dataclasses.asdict(r) for r in records]


def test_bounded_probes_and_interventions_equal_the_unbounded_ones(monkeypatch) -> None:
    passes: list[list[int] | None] = []
    with_preds: list[bool] = []  # whether each pass read predictions (False: states for fits, stopped early)
    real = bounded.capture

    def recording(*a, **k):
        passes.append(k.get("layers"))
        with_preds.append(k.get("preds", True))
        return real(*a, **k)

    monkeypatch.setattr(bounded, "capture", recording)
    import science.measure as measure

    monkeypatch.setattr(measure, "capture", recording)
    model, task = _model(n_layers=3)
    probes = dict(run_seed=0, eval_lengths=[12, 16], n_sequences=60, config_hash="h")
    read_back: list[list[int]] = []
    real_group = SpilledCapture.group
    monkeypatch.setattr(SpilledCapture, "group", lambda self, g: read_back.append(g) or real_group(self, g))
    bounded_probes = _rows(measure_probes(model, task, **probes, memory=PROBE_BOUND))
    # one pass per length wrote every layer to disk; the groups read back never hold every layer
    assert passes == [] and len(read_back) > 2 and all(len(g) < len(model.layers) for g in read_back)
    assert sorted(x for g in read_back for x in g) == sorted(2 * list(model.layers))  # each layer once a length
    assert bounded_probes == _rows(measure_probes(model, task, **probes))
    model, task = _model(n_layers=8)
    common = dict(
        run_seed=0,
        eval_lengths=[12, 16],
        n_sequences=200,
        methods=["project_out", "mean", "leace", "inlp", "pca_top_k"],
        pca_k=2,
        inlp_max_rounds=3,
        fit_length=12,
        n_permutations=100,
    )
    passes.clear()
    with_preds.clear()
    bounded_rows = _rows(measure_interventions(model, task, **common, memory=EDIT_BOUND))
    evals = [p for p, preds in zip(passes, with_preds) if preds]
    fits = [p for p, preds in zip(passes, with_preds) if not preds]
    # the first fit set (8 × 153,600 bytes) fits beside LEACE's copies: one pass, stopped at layer 7;
    # each doubled set is captured once, for the layers whose refit still read the variable
    assert fits[0] == list(range(8)) and fits.count(list(range(8))) == 1
    doubled = [p for p in fits[1:] if p is not None and len(p) > 1]
    assert doubled and all(p != list(range(8)) for p in doubled)
    assert evals  # this bound holds every eval layer at once (no LEACE: below)
    assert bounded_rows == _rows(measure_interventions(model, task, **common))
    # without LEACE (INLP holds 5 copies) the smallest bound is 3.4 MB, and the eval sets come in groups
    common["methods"] = ["project_out", "mean", "inlp", "pca_top_k"]
    passes.clear()
    with_preds.clear()
    small = _rows(measure_interventions(model, task, **common, memory=MemoryBound(3_600_000)))
    evals = [p for p, preds in zip(passes, with_preds) if preds]
    # at L=16 the 8 eval layers (205 KB each, twice with their kept outputs) come in two groups
    assert len(evals) > 2 and min(len(p) for p in evals if p is not None) < 8
    assert small == _rows(measure_interventions(model, task, **common))


def test_a_measurement_that_cannot_fit_is_refused_before_it_starts(monkeypatch) -> None:
    model, task = _model()
    ran: list[object] = []
    monkeypatch.setattr(bounded, "capture", lambda *a, **k: ran.append(1))
    with pytest.raises(MeasureMemoryError) as probes:
        measure_probes(
            model, task, run_seed=0, eval_lengths=[12], n_sequences=5000, config_hash="", memory=MemoryBound(10_000)
        )
    with pytest.raises(MeasureMemoryError) as edits:
        measure_interventions(
            model,
            task,
            run_seed=0,
            eval_lengths=[12],
            n_sequences=500,
            methods=["leace"],
            fit_length=12,
            memory=MemoryBound(100_000),
        )
    assert ran == []
    for exc in (probes.value, edits.value):
        line = str(exc)
        assert "\n" not in line and f"{MEMORY_SETTING}=" in line
        assert f"set {MEMORY_SETTING} to at least" in line
    # LEACE's doubled sets add the new sequences' statistics to its kept ones: its largest fit is the first set
    assert "fitting an edit on 500 sequences at L=12" in str(edits.value)


@pytest.mark.parametrize(("gib", "said"), [(1e-6, "1e-06"), (0.011, "0.011"), (0.75, "0.75"), (1e-30, "9.31e-10")])
def test_a_setting_is_said_back_as_it_was_set(gib, said) -> None:
    # 1e-6 read back as 9.99e-07 (bytes truncated), 1e-30 as 0 — which the README calls unbounded
    bound = MemoryBound.of_gib(gib)
    assert bound.limit is not None and bound.limit >= 1
    with pytest.raises(MeasureMemoryError) as err:
        bound.require(10 * GIB, "everything")
    assert f"over {MEMORY_SETTING}={said};" in str(err.value)
    assert MemoryBound.of_gib(0).limit is None and MemoryBound.of_gib(-1).limit is None


def test_the_bound_a_refusal_names_is_enough_for_every_part() -> None:
    """The refusal names the first part over the bound and a bound at which every part fits (not
    the first part's need: a second part may need more), rounded up; set to it, the same check
    passes, and at half of it the check refuses."""
    import re

    from science.bounded import GIB, gib_up
    from science.measure import check_memory

    model, task = _model()
    kw = {"eval_lengths": [12, 40], "n_sequences": 400, "methods": ["leace", "inlp"], "fit_length": 12}
    with pytest.raises(MeasureMemoryError) as refused:
        check_memory(model, task, MemoryBound(1_000), **kw)
    enough = float(re.search(rf"set {MEMORY_SETTING} to at least ([0-9.]+)", str(refused.value)).group(1))
    assert refused.value.need <= enough * GIB
    check_memory(model, task, MemoryBound.of_gib(enough), **kw)  # passes
    with pytest.raises(MeasureMemoryError):
        check_memory(model, task, MemoryBound(refused.value.need // 2), **kw)  # not far above the least
    got = [gib_up(x * GIB) for x in (0.05849, 1.5, 2.5e-6, 1000.5, 120)]
    assert got == ["0.0585", "1.5", "0.0000025", "1010", "120"]


# The peak, measured: a fresh process whose states (8 layers of 600 sequences × 40 × 128: 12 MB a
# layer, an eval layer with its kept output 25 MB; ~300 MB held unbounded) dwarf the rest it
# holds; VmHWM is its high-water mark.
_PEAK = (
    HWM
    + """
import json, sys, torch
torch.set_num_threads(1)
from models_store import ModelConfig, build_model
from science.bounded import MemoryBound
from science.measure import measure_interventions
from science.tasks import get_task
task = get_task("parity")
cfg = ModelConfig(family="transformer", vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=8, d_model=128)
model = build_model(cfg, seed=0).eval()
measure_interventions(model, task, run_seed=0, eval_lengths=[8], n_sequences=40, methods=["mean"], fit_length=8,
                      n_permutations=10)  # warm: libraries loaded, allocator primed
before = hwm()
gib = float(sys.argv[1])
measure_interventions(model, task, run_seed=0, eval_lengths=[40], n_sequences=600, methods=["mean"],
                      fit_length=40, n_permutations=10, memory=MemoryBound.of_gib(gib))
print(json.dumps({"before": before, "peak": hwm()}))
"""
)


def _peak_growth(gib: float) -> int:
    return peak_growth(_PEAK, gib)


def test_the_measured_peak_stays_within_the_bound() -> None:
    """Bound 0.08 GiB (86 MB): the peak grows by less than the bound plus 40 MB for what the bound
    does not count (one 256-sequence batch's forward work, the solvers' working rows beyond
    FIT_COPIES), and by at least 100 MB less than the unbounded measurement's. With glibc's mmap
    threshold pinned (tests/peak_memory.py) measured 87.6-87.9 MB against 251 MB unbounded, over
    4 runs each; without it the heap's fragmentation spread the bounded peak over 131-280 MB."""
    limit = 0.08
    grown = _peak_growth(limit)
    unbounded = _peak_growth(0)
    assert grown < limit * GIB + 40e6, (grown, unbounded)
    assert unbounded - grown > 100e6, (grown, unbounded)
