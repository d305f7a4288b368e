"""A transformers model whose learned position table is shorter than a run's sequences: a clear
error naming the table and the length before any training or measuring, not "index out of range
in self" from inside the forward pass (a new user's GPT-2 with n_positions 32 at train_length 40)."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from models_store.positions import check_positions, learned_position_limit


def _gpt2(folder, n_positions: int):
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=n_positions, n_embd=16, n_layer=2, n_head=2)).save_pretrained(
        folder
    )
    return folder


def test_the_limit_is_the_learned_table_and_rotary_or_recurrent_models_have_none() -> None:
    from models_store import ModelConfig, build_model

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2))
    assert learned_position_limit(gpt2) == 32
    lstm = build_model(ModelConfig(family="lstm", vocab_size=8, n_classes=2, d_model=16, n_layers=2))
    rotary = build_model(ModelConfig(family="transformer", vocab_size=8, n_classes=2, d_model=32, n_layers=2))
    assert learned_position_limit(lstm) is None and learned_position_limit(rotary) is None
    check_positions(gpt2, {"train_length": 31}, True, "m")  # 31 + START = 32: fits
    with pytest.raises(
        ValueError, match=r"learned position table of 32 positions.*train_length 32 \+ the START token\) needs 33"
    ):
        check_positions(gpt2, {"train_length": 32, "eval_length": 8}, True, "m")


def test_a_suite_on_a_model_with_a_short_table_fails_in_one_line_before_training(tmp_path, monkeypatch, capsys) -> None:
    from backend.cli import main
    from tests.resume_helpers import use_machine

    use_machine(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _gpt2(tmp_path / "tiny-gpt2-p32", 32)
    rc = main(["suite", "--preset", "smoke", "--task", "parity", "--pretrained", str(folder), "--name", "p32"])
    err = capsys.readouterr().err
    assert rc != 0 and "has a learned position table of 32 positions" in err and "Traceback" not in err, err
    assert "index out of range" not in err
    assert not list((tmp_path / "store").rglob("training/*.json"))  # no resume note for a run never started
