"""ModelConfig: validation, width solving to the parameter budget, serialisation."""

import subprocess
import sys
from pathlib import Path

import pytest

from models_store import FAMILIES, ModelConfig, build_model
from models_store.model_config import count_params, width_problem

# Measured widths for ~830K parameters at 4 layers, vocab 16. The transformer differs
# (a measured 132): with 4 heads, 132 gives an odd head dim 33, which our grid excludes
# (even head dim for rotary), so the closest valid width is 128 (795,650 params, -4.1%).
EXPECTED_WIDTH = {"transformer": 128, "mamba": 176, "mamba2": 176, "lstm": 160, "gru": 185}


@pytest.mark.parametrize("family", FAMILIES)
def test_default_budget_is_met_within_ten_percent(family):
    cfg = ModelConfig(family=family, vocab_size=16, n_classes=2)
    assert cfg.d_model == EXPECTED_WIDTH[family]
    assert abs(cfg.n_params - 830_000) <= 0.10 * 830_000
    model = build_model(cfg)
    assert model.n_params == cfg.n_params  # the closed form counts the real module exactly
    assert model.n_layers == 4 and model.d_model == cfg.d_model


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("vocab,classes,layers,d", [(7, 3, 3, 32), (40, 11, 2, 64)])
def test_closed_form_count_matches_built_model(family, vocab, classes, layers, d):
    cfg = ModelConfig(family=family, vocab_size=vocab, n_classes=classes, n_layers=layers, d_model=d)
    assert count_params(cfg, d) == build_model(cfg).n_params


def test_solved_width_is_the_closest_on_the_grid():
    cfg = ModelConfig(family="gru", vocab_size=16, n_classes=2)
    for d in (cfg.d_model - 1, cfg.d_model + 1):
        assert abs(count_params(cfg, d) - 830_000) >= abs(cfg.n_params - 830_000)


def test_small_targets_solve_too():
    for family in ("mamba", "mamba2", "lstm", "gru"):
        cfg = ModelConfig(family=family, vocab_size=16, n_classes=2, param_target=20_000)
        assert abs(cfg.n_params - 20_000) <= 2_000


def test_grids():
    t = ModelConfig(family="transformer", vocab_size=4, n_classes=2, d_model=32)
    assert width_problem(t, 30) and width_problem(t, 132) and not width_problem(t, 136)
    m2 = ModelConfig(family="mamba2", vocab_size=4, n_classes=2, d_model=16)
    assert width_problem(m2, 12) and not width_problem(m2, 24)


def test_unreachable_target_raises():
    with pytest.raises(ValueError, match="param_target"):
        ModelConfig(family="transformer", vocab_size=16, n_classes=2, param_target=20_000)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(family="rnn"), "family"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(n_classes=1), "n_classes"),
        (dict(n_layers=0), "n_layers"),
        (dict(d_model=-3), "d_model"),
        (dict(family="transformer", d_model=30), "d_model"),
        (dict(param_tolerance=1.5), "param_tolerance"),
        (dict(mamba2_chunk_size=0), "mamba2_chunk_size"),
        (dict(rotary_pct=0.0), "rotary_pct"),
        (dict(token_map=[0, 1]), "token_map"),
    ],
)
def test_invalid_fields_raise_naming_the_field(kwargs, field):
    base = dict(family="lstm", vocab_size=4, n_classes=2, d_model=16)
    with pytest.raises(ValueError, match=field):
        ModelConfig(**{**base, **kwargs})


def test_round_trip_and_unknown_keys():
    cfg = ModelConfig(family="mamba2", vocab_size=16, n_classes=6)
    d = cfg.to_dict()
    assert d["d_model"] == 176 and d["n_params"] == cfg.n_params
    assert ModelConfig.from_dict(d) == cfg
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_dict({**d, "bogus": 1})


def test_pretrained_config_needs_hf_config():
    with pytest.raises(ValueError, match="hf_config"):
        ModelConfig(family="transformer", vocab_size=4, n_classes=2, pretrained="EleutherAI/pythia-160m")


def test_models_store_imports_only_torch_and_transformers():
    code = (
        "import sys, models_store, models_store.capture, models_store.conv1d, "
        "models_store.checkpoints, models_store.pretrained\n"
        "bad = [m for m in ('fastapi', 'sqlalchemy', 'dash', 'backend', 'worker', 'requests_cache') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert r.returncode == 0, r.stdout + r.stderr
