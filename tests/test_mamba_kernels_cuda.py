"""Our Mamba / Mamba-2 models on CUDA: mamba-ssm / causal-conv1d kernels against transformers'
pure-PyTorch path (``models_store.mamba_kernels.torch_path``) on the same weights and tokens —
logits and every layer's states, in float32 and under bfloat16 autocast. The comparison skips
only where no CUDA device exists; on a CUDA machine without the kernels (the ``gpu`` extra) it
fails (``tests.compiled_kernels``). The swap itself is checked everywhere."""

from __future__ import annotations

import pytest
import torch
from transformers.models.mamba import modeling_mamba
from transformers.models.mamba2 import modeling_mamba2

from models_store import ModelConfig, build_model
from models_store.capture import run_with_states
from models_store.mamba_kernels import mixer_path, torch_path
from science.tasks import get_task
from tests.compiled_kernels import require_cuda_kernels


def _model(family: str):
    task = get_task("dyck")
    cfg = ModelConfig(family=family, vocab_size=task.vocab_size, n_classes=task.n_classes, n_layers=2, d_model=64)
    return build_model(cfg, seed=0).eval(), task


def test_torch_path_swaps_each_kernel_function_for_its_pytorch_one_and_back() -> None:
    before = {(m, n): getattr(m, n) for m in (modeling_mamba, modeling_mamba2) for n in ("causal_conv1d_fn",)}
    with torch_path() as swapped:
        assert swapped >= 4  # conv and scan functions of both modules
        for (module, name), f in before.items():
            assert getattr(module, name) is f.__wrapped__
    for (module, name), f in before.items():
        assert getattr(module, name) is f


def test_mixer_path_names_the_cpu_fast_path_here_and_none_without_mixers() -> None:
    assert mixer_path(_model("mamba")[0]) == "cpu fast path"
    assert mixer_path(_model("lstm")[0]) is None
    # under bf16 autocast the compiled path steps aside (docs/SCIENCE.md#precision): transformers' ops run
    assert mixer_path(_model("mamba")[0], "bf16") == "pure PyTorch"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("family", ["mamba", "mamba2"])
@pytest.mark.parametrize("autocast", [False, True])
def test_cuda_kernels_match_the_pure_pytorch_path(family: str, autocast: bool) -> None:
    require_cuda_kernels()  # a CUDA device without the kernels is a failure, not a skip
    model, task = _model(family)
    model = model.cuda()
    assert mixer_path(model) == "mamba-ssm kernels"
    tokens = task.generate(40, 8, 0, split="test").tokens.cuda()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        logits, states = run_with_states(model, tokens)
        with torch_path():
            ref_logits, ref_states = run_with_states(model, tokens)
    tol = dict(rtol=5e-2, atol=5e-2) if autocast else dict(rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(logits.float(), ref_logits.float(), **tol)
    for layer in states:
        torch.testing.assert_close(states[layer].float(), ref_states[layer].float(), **tol)
