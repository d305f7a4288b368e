"""load_pretrained on tiny GPT-NeoX and Mamba checkpoints written with save_pretrained (no hub)."""

import socket

import pytest
import torch
from transformers import (
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    MambaConfig,
    MambaForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
)

from models_store import LayerwiseModel
from models_store.capture import edit_layer, run_with_states
from models_store.checkpoints import CheckpointStore
from models_store.conv1d import remove_conv1d
from models_store.pretrained import DEFAULT_TOKEN_OFFSET, PretrainedLoadError, load_pretrained

MODEL_VOCAB, TASK_VOCAB, N_CLASSES = 64, 4, 3


def save_tiny(kind: str, folder) -> tuple[str, torch.nn.Module]:
    torch.manual_seed(0)
    if kind == "gpt_neox":
        lm = GPTNeoXForCausalLM(
            GPTNeoXConfig(
                vocab_size=MODEL_VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64
            )
        )
    else:
        lm = MambaForCausalLM(MambaConfig(vocab_size=MODEL_VOCAB, hidden_size=16, num_hidden_layers=5))
    path = folder / kind
    lm.save_pretrained(path)
    return str(path), lm


@pytest.fixture(scope="module", params=["gpt_neox", "mamba"])
def saved(request, tmp_path_factory):
    return save_tiny(request.param, tmp_path_factory.mktemp("pretrained"))


def x_tokens(length: int = 9) -> torch.Tensor:
    return torch.randint(0, TASK_VOCAB, (2, length), generator=torch.Generator().manual_seed(0))


def test_loads_through_the_same_path(saved):
    path, lm = saved
    model = load_pretrained(path, n_classes=N_CLASSES, task_vocab_size=TASK_VOCAB, seed=0)
    assert isinstance(model, LayerwiseModel)
    n = lm.config.num_hidden_layers
    assert model.n_layers == n and model.d_model == lm.config.hidden_size
    assert model.layer_names == ["emb", *map(str, range(n))]
    assert model.config.pretrained == path
    assert model.config.family == ("transformer" if lm.config.model_type == "gpt_neox" else "mamba")
    assert model.config.token_map == list(range(DEFAULT_TOKEN_OFFSET, DEFAULT_TOKEN_OFFSET + TASK_VOCAB))
    assert model.n_params == model.config.n_params
    # the backbone carries the saved weights
    base = lm.base_model.state_dict()
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, base[k]), k


def test_loading_a_causal_lm_prints_no_load_report(saved, capfd):
    # transformers listed the LM head as UNEXPECTED in a table a new user read as an error; the
    # head is dropped on purpose and missing keys are checked by us (a new user's trial)
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    path, _ = saved
    load_pretrained(path, n_classes=N_CLASSES, task_vocab_size=TASK_VOCAB, seed=0)
    out = capfd.readouterr()
    assert "LOAD REPORT" not in out.err + out.out and "UNEXPECTED" not in out.err + out.out
    assert hf_logging.get_verbosity() == before  # restored for everything else


@torch.no_grad()
def test_capture_and_token_map(saved):
    path, lm = saved
    model = load_pretrained(path, n_classes=N_CLASSES, task_vocab_size=TASK_VOCAB, seed=0).eval()
    x = x_tokens()
    logits, states = run_with_states(model, x)
    assert logits.shape == (2, 9, N_CLASSES)
    assert list(states) == list(range(-1, lm.config.num_hidden_layers))
    emb_weight = model.embedding_module().weight
    assert torch.equal(states[-1], emb_weight[x + DEFAULT_TOKEN_OFFSET])
    # the backbone's final hidden state, fed the mapped ids, is what the head reads
    ref = lm.base_model(input_ids=x + DEFAULT_TOKEN_OFFSET, use_cache=False).last_hidden_state
    assert torch.allclose(logits, model.head(ref), atol=1e-5)
    with edit_layer(model, model.n_layers - 1, torch.zeros_like):
        assert not torch.allclose(model(x), logits)


@torch.no_grad()
def test_checkpoint_round_trip(saved, tmp_path):
    path, _ = saved
    model = load_pretrained(path, n_classes=N_CLASSES, task_vocab_size=TASK_VOCAB, seed=0).eval()
    store = CheckpointStore(tmp_path)
    ckpt = store.save(model, provenance={"pretrained": path})
    loaded = store.load(ckpt)
    assert loaded.config == model.config
    x = x_tokens(12)
    assert torch.equal(loaded(x), model(x))


@torch.no_grad()
def test_conv1d_removal_on_pretrained_mamba(tmp_path):
    path, _ = save_tiny("mamba", tmp_path)
    model = load_pretrained(path, n_classes=N_CLASSES, task_vocab_size=TASK_VOCAB, seed=0).eval()
    x = x_tokens()
    base = model(x)
    with remove_conv1d(model) as n:
        assert n == 5
        assert not torch.allclose(model(x), base)
    assert torch.equal(model(x), base)


def test_explicit_token_map_and_bad_maps(saved):
    path, _ = saved
    model = load_pretrained(path, n_classes=2, task_vocab_size=3, token_map=[10, 20, 30])
    assert model.config.token_map == [10, 20, 30]
    with pytest.raises(PretrainedLoadError, match="vocabulary"):
        load_pretrained(path, n_classes=2, task_vocab_size=3, token_map=[10, 20, MODEL_VOCAB])
    with pytest.raises(PretrainedLoadError, match="distinct"):
        load_pretrained(path, n_classes=2, task_vocab_size=3, token_map=[1, 1, 2])
    with pytest.raises(PretrainedLoadError, match="vocabulary"):
        load_pretrained(path, n_classes=2, task_vocab_size=MODEL_VOCAB)


def test_unreachable_hub_name_fails_fast_and_clearly(monkeypatch):
    """HF_HUB_OFFLINE=1 (read at call time) → local files only: no network attempt at all."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args, **kwargs):
        raise AssertionError("load_pretrained tried to reach the network in offline mode")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(PretrainedLoadError) as err:
        load_pretrained("no-such-org/no-such-model-xyz", n_classes=2, task_vocab_size=2)
    msg = str(err.value)
    assert "no-such-org/no-such-model-xyz" in msg and "could not load" in msg and "cache" in msg
    assert "AssertionError" not in msg
    assert err.value.__suppress_context__  # one clear message, not a chained traceback wall
    assert isinstance(err.value, ValueError)


def test_missing_local_folder_and_unsupported_architecture(tmp_path):
    with pytest.raises(PretrainedLoadError, match="no such local folder"):
        load_pretrained(str(tmp_path / "absent"), n_classes=2, task_vocab_size=2)
    # GPT-2 loads (tests/test_any_model.py); an encoder-decoder does not
    T5ForConditionalGeneration(
        T5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)
    ).save_pretrained(tmp_path / "t5")
    with pytest.raises(PretrainedLoadError, match="'t5' is not supported: it is an encoder-decoder"):
        load_pretrained(str(tmp_path / "t5"), n_classes=2, task_vocab_size=2)
