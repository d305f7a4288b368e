"""A bidirectional encoder (BERT, RoBERTa, DistilBERT) reads later tokens: every per-position probe
and state-tracking result on it would be meaningless, so it is refused — at submit (a one-block
random copy of its config, one forward pass) and when the worker loads it, before any training —
with one line naming the model and why. Tiny configs saved to temp folders, no hub; causal models
(GPT-2, GPT-NeoX, Mamba, BERT built as a decoder) are accepted."""

from __future__ import annotations

import pytest
from transformers import (
    BertConfig,
    BertModel,
    DistilBertConfig,
    GPT2Config,
    GPT2Model,
    GPTNeoXConfig,
    MambaConfig,
    RobertaConfig,
)

from models_store import causal
from models_store.any_model import pretrained_family
from models_store.pretrained import PretrainedLoadError, load_pretrained
from tests.cli_one_line import assert_one_line_error

BERT = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
CONFIGS = {
    "bert": BertConfig(**BERT),
    "roberta": RobertaConfig(**BERT),
    "distilbert": DistilBertConfig(vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=64),
    "bert-decoder": BertConfig(**BERT, is_decoder=True),  # causal self-attention: accepted
    "gpt2": GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4),
    "gpt_neox": GPTNeoXConfig(**BERT),
    "mamba": MambaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, state_size=4, expand=2),
}
ENCODERS = ("bert", "roberta", "distilbert")


pytestmark = pytest.mark.usefixtures("hub_offline")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from transformers import AutoModel

    root = tmp_path_factory.mktemp("causal")
    for name, config in CONFIGS.items():  # tiny random weights: a pretrained folder must hold some
        AutoModel.from_config(config).save_pretrained(root / name)
    return {name: str(root / name) for name in CONFIGS}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_submit_time_check_from_the_config(folders, name):
    if name in ENCODERS:
        with pytest.raises(ValueError) as err:
            pretrained_family(folders[name], "from_config")
        msg = str(err.value)
        assert "\n" not in msg and f"from_config {folders[name]!r}" in msg
        assert f"model type {CONFIGS[name].model_type!r} is not causal" in msg and "later tokens" in msg
    else:
        assert pretrained_family(folders[name]) == ("mamba" if name == "mamba" else "transformer")


def test_the_loaded_model_is_checked_before_training(folders, tmp_path, monkeypatch):
    """The worker's load runs the test on the model itself (its weights), also when no copy could
    be judged at submit."""
    BertModel(CONFIGS["bert"]).save_pretrained(tmp_path / "bert-weights")
    monkeypatch.setattr(causal, "COPY_MAX_PARAMS", 0)  # no copy built at submit: left to the load
    assert pretrained_family(str(tmp_path / "bert-weights")) == "transformer"
    for source, weights in ((tmp_path / "bert-weights", True), (folders["distilbert"], False)):
        with pytest.raises(PretrainedLoadError, match="is not causal: its output at positions 0..3 changed"):
            load_pretrained(str(source), n_classes=2, task_vocab_size=3, weights=weights)
    GPT2Model(CONFIGS["gpt2"]).save_pretrained(tmp_path / "gpt2-weights")
    model = load_pretrained(str(tmp_path / "gpt2-weights"), n_classes=2, task_vocab_size=3)
    assert model.config.family == "transformer" and causal.causal_problem(model.backbone) is None


def test_api_refuses_an_encoder_at_submit(api, folders):
    for field in ("pretrained", "from_config"):
        params = {"family": "transformer", "task": "parity", field: folders["roberta"], "max_steps": 2}
        r = api.client.post("/api/jobs", json={"kind": "train", "params": params})
        assert r.status_code == 422, r.text
        (err,) = r.json()["detail"]
        assert err["loc"] == ["body", "params", field] and "'roberta' is not causal" in err["msg"]
    suite = {"preset": "smoke", "pretrained": [folders["gpt2"], folders["distilbert"]]}
    r = api.client.post("/api/jobs", json={"kind": "suite", "params": suite})
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"] == ["body", "params", "pretrained", 1] and "'distilbert' is not causal" in err["msg"]
    assert api.client.get("/api/jobs").json()["total"] == 0
    ok = {"family": "transformer", "task": "parity", "from_config": folders["gpt2"], "max_steps": 2}
    assert api.client.post("/api/jobs", json={"kind": "train", "params": ok}).status_code == 201


def test_cli_refuses_an_encoder_in_one_line(folders, cli_home):
    for option in ("--pretrained", "--from-config"):
        line = assert_one_line_error(
            ["suite", "--preset", "smoke", "--task", "parity", option, folders["bert"]], "'bert' is not causal"
        )
        assert repr(folders["bert"]) in line
    assert not (cli_home / "cli.db").exists()  # nothing written
