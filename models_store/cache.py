"""``run_with_cache``: named activations of one forward pass, in TransformerLens's style.

>>> logits, cache = run_with_cache(model, tokens, names=["embed", "blocks.2.resid_post"])
>>> cache["blocks.2.resid_post"].shape            # [B, L, D]

Names are ``layerscope_core.sites``'s (``embed``, ``blocks.{i}.resid_pre``,
``blocks.{i}.resid_post``, ``blocks.{i}.state[.{part}]``). Residual-stream names come from one
hooked forward (``models_store.capture.run_with_states``); state names from the family's
step-wise twin (``models_store.states``), which recomputes the blocks with the same parameters.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from layerscope_core.sites import all_site_names, parse_site, residual_layer
from models_store.base import LayerwiseModel
from models_store.capture import run_with_states
from models_store.states import StatefulModel


class ActivationCache(dict):
    """``{site name: tensor}`` (a dict, read-only by convention), in the order the names were asked."""

    def __repr__(self) -> str:
        return "ActivationCache(" + ", ".join(f"{k}: {tuple(v.shape)}" for k, v in self.items()) + ")"


def _state_parts(model: LayerwiseModel) -> tuple[str, ...]:
    from layerscope_core.registry import get_family

    return get_family(model.config.family).state_parts


@torch.no_grad()
def run_with_cache(
    model: LayerwiseModel, tokens: torch.Tensor, names: Iterable[str] | None = None
) -> tuple[torch.Tensor, ActivationCache]:
    """Logits and the named activations of ``model`` on ``tokens``.

    Args:
        model: any ``LayerwiseModel``.
        tokens: LongTensor [B, L] of task token ids.
        names: site names; None = every residual-stream name (and, for a recurrent family,
            every state name).

    Returns:
        (logits [B, L, C], cache). Residual names → [B, L, D]. ``blocks.{i}.state.{part}`` →
        the part after each real position t, [B, L, *part shape] (Mamba: ``ssm`` [B, L, E, N],
        ``conv`` [B, L, k-1, E]; LSTM ``h``/``c`` and GRU ``h`` [B, L, D]); ``blocks.{i}.state``
        → every part under its own ``.{part}`` key.

    Raises:
        ValueError: a name outside the scheme, a block past the last one, or a state name on
            a family without a recurrent state.
    """
    n = model.n_layers
    parts = _state_parts(model)
    wanted = all_site_names(n, parts) if names is None else list(dict.fromkeys(names))
    resid: dict[str, int] = {}
    states: dict[str, tuple[int, str]] = {}
    for name in wanted:
        site, layer = parse_site(name, n)
        if site.startswith("state"):
            if not parts:
                raise ValueError(f"site name {name!r}: family {model.config.family!r} has no recurrent state")
            asked = parts if site == "state" else (site.split(":")[1],)
            for p in asked:
                if p not in parts:
                    raise ValueError(
                        f"site name {name!r}: the state of {model.config.family!r} has parts {list(parts)}"
                    )
                states[f"blocks.{layer}.state.{p}"] = (layer, p)
        else:
            resid[name] = residual_layer(name, n)
    logits, by_layer = run_with_states(model, tokens, layers=set(resid.values()) or [-1])
    cache = ActivationCache({name: by_layer[layer] for name, layer in resid.items()})
    if states:
        twin = StatefulModel.from_model(model)
        trace = twin.trace(tokens)
        p0, L = model.n_prefix, tokens.shape[1]
        for name, (layer, part) in states.items():
            cache[name] = torch.stack([twin.state_after(trace, layer, p0 + t)[part] for t in range(L)], dim=1)
    return logits, cache
