"""Any transformers model: tiny random configs of GPT-2, GPT-NeoX, Llama,
Qwen2, Mistral, Mamba, Mamba-2 and Falcon-Mamba are ``save_pretrained`` to a temp folder and
loaded through ``load_pretrained`` (no hub): blocks found from the loaded model, the ``emb``
state is block 0's input, edits act, the recurrent state of the SSMs is read exactly, checkpoints
round-trip; Llama and Mamba-2 go through the real pipeline (train → probes → interventions →
patching); unsupported architectures are refused with one line.
"""

from __future__ import annotations

import socket

import pytest
import torch
from sqlalchemy import select
from torch import nn
from transformers import (
    FalconMambaConfig,
    FalconMambaForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Mamba2Config,
    Mamba2ForCausalLM,
    MambaConfig,
    MambaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
)

from models_store.any_model import UnsupportedModel, block_family, find_blocks
from models_store.capture import edit_layer, run_with_states
from models_store.checkpoints import CheckpointStore
from models_store.pretrained import PretrainedLoadError, load_pretrained
from models_store.states import stateful

V = 64
ATT = dict(vocab_size=V, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)
SSM = dict(vocab_size=V, hidden_size=16, num_hidden_layers=2, state_size=4, expand=2)
# model type → (builder of a tiny random *ForCausalLM, family layerscope finds, block-list attribute)
ARCHS = {
    "gpt2": (
        lambda: GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=3, n_head=4, n_positions=64)),
        "transformer",
        "h",
    ),
    "gpt_neox": (lambda: GPTNeoXForCausalLM(GPTNeoXConfig(**ATT)), "transformer", "layers"),
    "llama": (lambda: LlamaForCausalLM(LlamaConfig(**ATT, num_key_value_heads=2)), "transformer", "layers"),
    "qwen2": (lambda: Qwen2ForCausalLM(Qwen2Config(**ATT, num_key_value_heads=2)), "transformer", "layers"),
    "mistral": (lambda: MistralForCausalLM(MistralConfig(**ATT, num_key_value_heads=2)), "transformer", "layers"),
    "mamba": (lambda: MambaForCausalLM(MambaConfig(**SSM)), "mamba", "layers"),
    "mamba2": (
        lambda: Mamba2ForCausalLM(Mamba2Config(**SSM, head_dim=8, num_heads=4, n_groups=1, chunk_size=8)),
        "mamba2",
        "layers",
    ),
    "falcon_mamba": (lambda: FalconMambaForCausalLM(FalconMambaConfig(**SSM)), "mamba", "layers"),
}


def _no_network(*args, **kwargs):
    raise AssertionError("tried to reach the network")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("any_model")
    out = {}
    for model_type, (make, _, _) in ARCHS.items():
        torch.manual_seed(0)
        make().save_pretrained(root / model_type)
        out[model_type] = root / model_type
    return out


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)


def _load(folder, **kw):
    return load_pretrained(str(folder), n_classes=3, task_vocab_size=5, seed=0, **kw).eval()


@pytest.mark.parametrize("model_type", list(ARCHS))
@torch.no_grad()
def test_layers_found_from_the_loaded_model(folders, model_type):
    _, family, path = ARCHS[model_type]
    model = _load(folders[model_type])
    n = model.backbone.config.num_hidden_layers
    assert model.config.family == family and model.blocks_path == path
    assert model.n_layers == n == model.config.n_layers
    assert model.block_modules() == list(model.backbone.get_submodule(path))
    tokens = torch.randint(0, 5, (2, 10))
    logits, states = run_with_states(model, tokens)
    assert logits.shape == (2, 10, 3) and list(states) == list(range(-1, n))
    ids = model.backbone_ids(tokens)
    emb = model.backbone.get_input_embeddings()(ids)
    if model_type == "gpt2":  # the emb state is block 0's input: learned positions added
        emb = emb + model.backbone.wpe(torch.arange(10))
    torch.testing.assert_close(states[-1], emb)
    # the last block's state, through the backbone's final norm, is what the head reads
    final = model.backbone(input_ids=ids).last_hidden_state
    norm = {"gpt2": "ln_f", "gpt_neox": "final_layer_norm"}.get(
        model_type, "norm_f" if "mamba" in model_type else "norm"
    )
    torch.testing.assert_close(getattr(model.backbone, norm)(states[n - 1]), final)


@pytest.mark.parametrize("model_type", list(ARCHS))
@torch.no_grad()
def test_edits_act_at_emb_and_blocks(folders, model_type):
    model = _load(folders[model_type])
    tokens = torch.randint(0, 5, (2, 8))
    base = model(tokens)
    for layer in (-1, model.n_layers - 1):
        with edit_layer(model, layer, lambda h: h.clone()):
            assert torch.allclose(model(tokens), base, atol=1e-6)
        with edit_layer(model, layer, lambda h: torch.zeros_like(h)):
            assert not torch.allclose(model(tokens), base, atol=1e-4)
    assert torch.equal(model(tokens), base)  # hooks removed


@pytest.mark.parametrize("model_type", [t for t, (_, fam, _) in ARCHS.items() if fam != "transformer"])
@torch.no_grad()
def test_recurrent_state_twin_matches_the_library(folders, model_type):
    model = _load(folders[model_type])
    twin = stateful(model)
    tokens = torch.randint(0, 5, (2, 12))
    trace = twin.trace(tokens)
    torch.testing.assert_close(trace.last, model(tokens)[:, -1], rtol=1e-4, atol=1e-5)
    # resuming from the run's own state at step 5 gives the same logits
    again = twin.resume(trace, 0, 6, trace.inputs[0][:, 6:], twin.state_at(trace, 0, 5))
    torch.testing.assert_close(again, trace.last, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model_type", list(ARCHS))
@torch.no_grad()
def test_checkpoint_round_trip_without_the_folder(folders, model_type, tmp_path):
    model = _load(folders[model_type])
    store = CheckpointStore(tmp_path / "store")
    ckpt = store.save(model)
    again = store.load(ckpt)
    assert type(again) is type(model) and again.config.hf_config["model_type"] == model_type
    tokens = torch.randint(0, 5, (3, 9))
    assert torch.equal(again(tokens), model(tokens))


def test_from_config_only_is_a_random_init(folders):
    trained = _load(folders["llama"])
    # the folder was written under seed 0: seed 1 shows the weights were not read
    scratch = load_pretrained(str(folders["llama"]), n_classes=3, task_vocab_size=5, seed=1, weights=False)
    assert scratch.config.family == "transformer" and scratch.n_layers == 3
    w1 = trained.backbone.get_input_embeddings().weight
    w2 = scratch.backbone.get_input_embeddings().weight
    assert w1.shape == w2.shape and not torch.equal(w1, w2)


def test_encoder_decoder_is_refused_in_one_line(tmp_path):
    T5ForConditionalGeneration(
        T5Config(vocab_size=V, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=2)
    ).save_pretrained(tmp_path / "t5")
    with pytest.raises(PretrainedLoadError) as err:
        _load(tmp_path / "t5")
    msg = str(err.value)
    assert "\n" not in msg and "'t5'" in msg and "encoder-decoder" in msg and "missing" in msg


def test_no_block_list_or_no_known_block_is_refused():
    class Flat(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

    with pytest.raises(
        UnsupportedModel, match=r"model type 'flat' is not supported: no block list of num_hidden_layers=2"
    ):
        find_blocks(Flat(), 2, "flat")
    with pytest.raises(UnsupportedModel, match="'mlp' is not supported: block Linear has neither attention"):
        block_family(nn.ModuleList([nn.Linear(2, 2)]), "mlp")


# ------------------------------------------------------------------- the real pipeline, two new types


@pytest.mark.parametrize("model_type", ["llama", "mamba2"])
def test_pipeline_measures_every_site(folders, model_type, tmp_path):
    from store.models import InterventionResult, PatchingResult, ProbeResult, Run
    from worker.job_params import MeasureParams, TrainParams
    from worker.pipeline import local_env, train

    family = ARCHS[model_type][1]
    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    measure = MeasureParams(
        eval_lengths=[40],
        n_probe_sequences=24,
        n_permutations=100,
        n_patch_pairs=4,
        pca_k=2,
        methods=["project_out", "mean"],
    )
    params = TrainParams(
        family=family,
        pretrained=str(folders[model_type]),
        task="parity",
        max_steps=2,
        batch_size=8,
        eval_every=2,
        n_eval_sequences=16,
        measure=measure,
    )
    run_id = train(params, env)
    n = 3 if family == "transformer" else 2
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert (
            run.status == "complete" and run.n_layers == n and run.model_config["hf_config"]["model_type"] == model_type
        )
        probes = s.scalars(select(ProbeResult).where(ProbeResult.run_id == run_id)).all()
        edits = s.scalars(select(InterventionResult).where(InterventionResult.run_id == run_id)).all()
        patches = s.scalars(select(PatchingResult).where(PatchingResult.run_id == run_id)).all()
    assert {r.layer for r in probes} == set(range(-1, n))
    assert {(r.method, r.layer) for r in edits if r.method != "conv1d_removal"} == {
        (m, ly) for m in ("project_out", "mean") for ly in range(n)
    }
    sites = {r.site for r in patches}
    assert sites == ({"resid_pre", "resid_post"} if family == "transformer" else {"resid_pre", "resid_post", "state"})
