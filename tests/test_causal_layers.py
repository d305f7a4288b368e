"""Interventions and patching on deep models (docs/SCIENCE.md#causal-layers): the ``pretrained``
preset probes every layer and edits and patches every block up to 12 blocks, every 2nd block and
the last beyond; a measurement with ``max_causal_layers`` stores rows at exactly those blocks,
and one without it keeps the hashes of every measurement made before the setting existed."""

from __future__ import annotations

import pytest
import torch

from layerscope_core.hashing import config_hash
from models_store import ModelConfig, build_model
from science.causal_layers import causal_layers, downstream_share
from science.tasks import get_task
from store.models import InterventionResult, MeasureSettings, PatchingResult, ProbeResult
from worker import persist
from worker.job_params import MeasureParams
from worker.pipeline import local_env
from worker.presets import PRESETS
from worker.run_measurement import MeasuredRun, measure_run


def test_every_block_up_to_the_bound_then_a_stride_with_the_last_block():
    assert causal_layers(12, 12) is None and causal_layers(4, None) is None  # Pythia-160M: every block
    assert causal_layers(24, 12) == [*range(0, 24, 2), 23]  # Pythia-410M, Mamba-130M: 13 blocks
    assert causal_layers(16, 12) == [0, 2, 4, 6, 8, 10, 12, 14, 15]
    assert causal_layers(36, 12) == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 35]
    with pytest.raises(ValueError, match="at least 1"):
        causal_layers(24, 0)


def test_the_cost_is_the_downstream_block_passes_kept():
    assert downstream_share(12, None) == 1.0
    # 24 blocks every 2nd and the last: (24 + 22 + … + 2 + 1) / (24·25/2) = 157 / 300
    assert downstream_share(24, causal_layers(24, 12)) == pytest.approx(157 / 300)
    assert downstream_share(4, [3]) == pytest.approx(1 / 10)


def test_the_pretrained_preset_bounds_its_causal_layers_and_other_presets_do_not():
    assert MeasureParams(**PRESETS["pretrained"]["measure"]).max_causal_layers == 12
    assert all("max_causal_layers" not in p.get("measure", {}) for n, p in PRESETS.items() if n != "pretrained")


def test_a_measurement_without_the_setting_keeps_its_hash():
    m = MeasureParams()
    assert "max_causal_layers" not in m.model_dump(mode="json")
    assert m.config_hash() == config_hash({k: v for k, v in m.model_dump(mode="json").items()})
    assert MeasureParams(max_causal_layers=12).config_hash() != m.config_hash()
    assert MeasureParams.model_validate(MeasureParams(max_causal_layers=3).model_dump()).max_causal_layers == 3


def test_a_deep_model_is_probed_at_every_layer_and_edited_and_patched_at_the_stride(tmp_path):
    env = local_env(f"sqlite:///{tmp_path / 'o.db'}", tmp_path / "store", device="cpu")
    task = get_task("parity")
    torch.manual_seed(0)
    model = build_model(ModelConfig(family="gru", vocab_size=task.vocab_size, n_classes=2, n_layers=5, d_model=16))
    with env.session_factory() as s:
        run_id = persist.save_run(
            s, name="deep", family="gru", task="parity", seed=0, n_layers=5, d_model=16, n_params=1, config_hash="h"
        )
    measure = MeasureParams(
        eval_lengths=[20],
        n_probe_sequences=40,
        methods=["mean"],
        conv1d=False,
        n_permutations=100,
        patch_sites=["resid_post"],
        patch_eval_length=20,
        patch_stride=19,
        n_patch_pairs=16,
        max_causal_layers=2,  # 5 blocks: every 3rd block and the last
    )
    measure_run(MeasuredRun(run_id, 0, 20, task, model), measure, env)
    with env.session_factory() as s:
        probed = sorted({r.layer for r in s.query(ProbeResult)})
        edited = sorted({r.layer for r in s.query(InterventionResult)})
        patched = sorted({r.layer for r in s.query(PatchingResult)})
        (settings,) = s.query(MeasureSettings).all()
    assert probed == [-1, 0, 1, 2, 3, 4]
    assert edited == [0, 3, 4] == causal_layers(5, 2)
    assert patched == [-1, 0, 3, 4]  # the embedding output is block 0's input, kept with it
    assert settings.intervention_layers == [0, 3, 4] and settings.params["max_causal_layers"] == 2
