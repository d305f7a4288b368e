"""Is a transformers backbone causal? One forward pass tells: a causal model's output at position
t depends on tokens 0..t only, so two inputs that differ only after position t give the same
output up to t. A bidirectional encoder (BERT, RoBERTa, DistilBERT, …) reads later tokens too,
which makes every per-position probe and every state-tracking result meaningless; layerscope
refuses it (docs/BRING_YOUR_OWN.md).

The test, rather than a list of model types or config flags: it judges what the model computes
(BERT built with ``is_decoder=True`` is causal and passes; an architecture no list knows is
judged too). Two sequences of :data:`TEST_LENGTH` random tokens share their first half; the
model's last hidden state over that half must agree within float noise (``torch.allclose``,
rtol 1e-4, atol 1e-5; a bidirectional model with random weights moves it by ~1e-2).

- :func:`causal_problem`: the test on a built backbone (``load_pretrained`` runs it on every model
  it loads, before any training: the authority);
- :func:`config_causal_problem`: the test at submit, from a config alone, on a one-block copy of
  the architecture with a small vocabulary and random weights (no weights read); None when no such
  copy can be built or it would be larger than :data:`COPY_MAX_PARAMS` (then the worker's load decides).
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel

TEST_LENGTH = 8  # tokens per test sequence; the two differ in the second half only
COPY_VOCAB = 64  # the vocabulary of the submit-time copy (its ids 0..63 are the test's tokens)
COPY_MAX_PARAMS = 50_000_000  # a larger one-block copy (200 MB) is not built at submit


@torch.no_grad()
def causal_problem(backbone: PreTrainedModel) -> str | None:
    """Why ``backbone`` (a transformers base model) is not causal, or None when it is: its last
    hidden state at positions 0..3 must not change when only positions 4..7 of the input do (one
    forward pass of two sequences, eval mode, on the backbone's device)."""
    weight = backbone.get_input_embeddings().weight
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(backbone).__name__}: its input embedding has no weight tensor")
    vocab = min(int(weight.shape[0]), COPY_VOCAB)
    half = TEST_LENGTH // 2
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, vocab, (1, TEST_LENGTH), generator=g)
    b = a.clone()
    b[:, half:] = (a[:, half:] + 1) % vocab
    was_training = backbone.training
    # this test forward runs transformers' own Mamba path, whose "install mamba_ssm … much slower"
    # notice would read as if the run used it: on CPU the run's mixers take our compiled path
    kernels_log = logging.getLogger("transformers.integrations.hub_kernels")
    level = kernels_log.level
    try:
        backbone.eval()
        kernels_log.setLevel(logging.ERROR)
        out = backbone(input_ids=torch.cat([a, b]).to(weight.device), use_cache=False)
    finally:
        kernels_log.setLevel(level)
        backbone.train(was_training)
    h = (out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]).float()
    if torch.allclose(h[0, :half], h[1, :half], rtol=1e-4, atol=1e-5):
        return None
    model_type = getattr(backbone.config, "model_type", "?")
    return (
        f"model type {model_type!r} is not causal: its output at positions 0..{half - 1} changed when only "
        f"tokens {half}..{TEST_LENGTH - 1} did (a bidirectional encoder reads later tokens: per-position "
        "probes and state tracking would be meaningless); only causal models (decoder-only "
        "transformers, state-space models) are supported"
    )


def _one_block_copy(hf_cfg: Any) -> Any:
    """``hf_cfg`` with one block and a :data:`COPY_VOCAB`-token vocabulary (special token ids
    outside it dropped), for the submit-time test only."""
    small = copy.deepcopy(hf_cfg)
    small.num_hidden_layers = 1
    small.vocab_size = min(int(small.vocab_size), COPY_VOCAB)
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        token = getattr(small, name, None)
        if isinstance(token, int) and token >= small.vocab_size:
            setattr(small, name, None)
    return small


def config_causal_problem(hf_cfg: Any) -> str | None:
    """:func:`causal_problem` of a random-weight one-block copy of ``hf_cfg``'s architecture (no
    weights read, no hub). None also when the copy cannot be built or run, or has more than
    :data:`COPY_MAX_PARAMS` parameters: the test then runs when the worker loads the model."""
    from transformers import AutoModel

    try:
        small = _one_block_copy(hf_cfg)
        with torch.device("meta"):
            size = sum(p.numel() for p in AutoModel.from_config(small, trust_remote_code=False).parameters())
        if size > COPY_MAX_PARAMS:
            return None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            backbone = AutoModel.from_config(small, dtype=torch.float32, trust_remote_code=False)
        return causal_problem(backbone)
    except Exception:  # noqa: BLE001 - an architecture whose copy does not build or run: left to the worker
        return None
