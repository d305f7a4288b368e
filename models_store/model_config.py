"""Model configuration: one dataclass for every family, with the width solved to a parameter budget.

docs/SCIENCE.md#parameter-budget: 4 layers, a token-classification head, about 830K parameters
per family; each family's width is solved to within ±10% of the target, and the actual count is
stored with the run. ``ModelConfig(d_model=None)`` does that search; ``n_params`` holds the count.

Parameter counts are computed in closed form (``count_params``) for the architectures that
``models_store.families`` builds; ``build_model`` re-counts the real module and the tests check
that both agree for every family.

Each family's width grid and count are its own functions below, reached through its
``FamilySpec`` (``layerscope_core.registry``). Width grids (documented choices):
- ``transformer``: a multiple of ``n_heads`` with an even head dim whose rotary part
  ``int(head_dim * rotary_pct)`` is even and ≥ 2 (rotary embeddings rotate pairs of dims).
- ``mamba2``: a multiple of 8 with ``expand * d_model`` a multiple of ``mamba2_head_dim``
  (Mamba-2 splits the inner width into heads).
- ``mamba``: any width below 64, a multiple of 8 from 64 up.
- ``lstm``, ``gru`` (and a family without a ``width_problem`` hook): any positive integer.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from layerscope_core.registry import FAMILIES, families_where, family_names, get_family  # noqa: F401

MAX_WIDTH = 16_384  # upper end of the width search
# Most parameters a model trained from scratch may have (``param_target``, or the count at an
# explicit ``d_model``): AdamW trains a model with 16 bytes a parameter (weights, gradients, two
# moments: 16 GB here) before activations, what one large GPU holds. The study's models (~830K,
# docs/SCIENCE.md#parameter-budget) and the pretrained preset's largest (Pythia-410M, read from
# the hub and not bound by this) stay far within it.
MAX_PARAMS = 1_000_000_000


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass
class ModelConfig:
    """Everything needed to rebuild a model (the checkpoint store saves ``to_dict()``).

    Attributes:
        family: a registered family (``layerscope_core.registry.family_names()``).
        vocab_size: number of task token ids (the model's input alphabet).
        n_classes: number of labels of the token-classification head.
        n_layers: number of blocks (layers 0..n_layers-1; ``emb`` is layer -1).
        d_model: residual width; ``None`` → solved so the parameter count is within
            ``param_tolerance`` of ``param_target`` (the solved value is stored here).
        param_target: parameter budget used when ``d_model`` is None (about 830K, docs/SCIENCE.md#parameter-budget).
        param_tolerance: allowed relative deviation from ``param_target`` (±10%).
        d_state: SSM state size N (Mamba, Mamba-2).
        d_conv: depthwise causal conv kernel size (Mamba, Mamba-2).
        expand: SSM inner width = ``expand * d_model`` (Mamba, Mamba-2).
        n_heads: attention heads (transformer).
        rotary_pct: share of each head's dims that carry rotary positions (Pythia: 0.25).
        max_position_embeddings: rotary table length of the transformer (≥ 512 so eval
            lengths up to 120 and beyond are defined; rotary is computed on the fly anyway).
        mamba2_head_dim: Mamba-2 head dim P (measured: 16).
        mamba2_chunk_size: Mamba-2 chunked-scan block length. transformers' default 256
            pads every sequence up to 256 positions (measured: a 33× slower step at L=40).
            Default 8: divides the eval lengths 40, 80 and 120 exactly and pads 60/100 by 4
            positions; a power of two, which the mamba-ssm Triton kernels handle natively.
            Padding never changes the result, only the cost.
        pretrained: hub name or local folder the weights came from (``load_pretrained``);
            ``None`` for models trained from scratch.
        hf_config: the pretrained model's transformers config as a dict, so a checkpoint can
            be rebuilt without the hub; required when ``pretrained`` is set.
        token_map: pretrained models only: task token i → model vocabulary id
            ``token_map[i]`` (see ``models_store.pretrained``); ``len == vocab_size``.
        learned_positions: transformer only: the size of a learned absolute position table
            added to the token embedding (``emb`` = token + position), beside rotary, which is
            kept; 0 = rotary only (docs/SCIENCE.md#positions). Positions are counted with the
            START token, so inputs may be at most ``learned_positions − n_prefix`` long.
        start_token: prepend a START token (id ``vocab_size``, an extra embedding row) to every
            input inside ``forward``. Outputs and captured states cover the real positions only.
            Without it a model with relative positions only (the rotary GPT-NeoX) gives every
            position of a constant prefix the same state (docs/SCIENCE.md#start-token).
        n_params: the actual parameter count (derived; filled in by ``__post_init__`` for
            scratch models, by ``load_pretrained`` for pretrained ones).

    Raises:
        ValueError: a field is invalid (the message names it), or no width of the family's
            grid lands within the tolerance of ``param_target``.
    """

    family: str
    vocab_size: int
    n_classes: int
    n_layers: int = 4
    d_model: int | None = None
    param_target: int = 830_000
    param_tolerance: float = 0.10
    d_state: int = 16
    d_conv: int = 4
    expand: int = 2
    n_heads: int = 4
    rotary_pct: float = 0.25
    max_position_embeddings: int = 2048
    mamba2_head_dim: int = 16
    mamba2_chunk_size: int = 8
    pretrained: str | None = None
    hf_config: dict[str, Any] | None = None
    token_map: list[int] | None = None
    start_token: bool = False
    learned_positions: int = 0
    n_params: int | None = field(default=None)

    def __post_init__(self) -> None:
        if self.family not in family_names():
            raise ValueError(f"family must be one of {family_names()}, got {self.family!r}")
        _check_int("vocab_size", self.vocab_size, 1)
        _check_int("n_classes", self.n_classes, 2)
        _check_int("n_layers", self.n_layers, 1)
        _check_int("param_target", self.param_target, 1)
        if self.param_target > MAX_PARAMS:
            raise ValueError(f"param_target must be at most {MAX_PARAMS:,} (MAX_PARAMS), got {self.param_target:,}")
        if not (isinstance(self.param_tolerance, (int, float)) and 0 < self.param_tolerance < 1):
            raise ValueError(f"param_tolerance must be in (0, 1), got {self.param_tolerance!r}")
        _check_int("d_state", self.d_state, 1)
        _check_int("d_conv", self.d_conv, 1)
        _check_int("expand", self.expand, 1)
        _check_int("n_heads", self.n_heads, 1)
        if not (isinstance(self.rotary_pct, (int, float)) and 0 < self.rotary_pct <= 1):
            raise ValueError(f"rotary_pct must be in (0, 1], got {self.rotary_pct!r}")
        _check_int("max_position_embeddings", self.max_position_embeddings, 1)
        _check_int("mamba2_head_dim", self.mamba2_head_dim, 1)
        _check_int("mamba2_chunk_size", self.mamba2_chunk_size, 1)
        _check_int("learned_positions", self.learned_positions, 0)
        if self.learned_positions and get_family(self.family).kind != "attention":
            raise ValueError(f"learned_positions is for attention families, not {self.family!r}")
        if self.pretrained is not None:
            self._check_pretrained()
        else:
            for name in ("hf_config", "token_map"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is only valid for a pretrained model (pretrained=None)")
            if self.d_model is None:
                self.d_model, self.n_params = solve_width(self)
            else:
                _check_int("d_model", self.d_model, 1)
                problem = width_problem(self, self.d_model)
                if problem:
                    raise ValueError(f"d_model={self.d_model} is invalid for {self.family}: {problem}")
                n = count_params(self, self.d_model)
                if n > MAX_PARAMS:
                    raise ValueError(
                        f"d_model={self.d_model} makes a {self.n_layers}-layer {self.family} of {n:,} parameters, "
                        f"over the limit of {MAX_PARAMS:,} (MAX_PARAMS)"
                    )
                if self.n_params is None:
                    self.n_params = n
        if self.n_params is not None:
            _check_int("n_params", self.n_params, 1)

    def _check_pretrained(self) -> None:
        if not isinstance(self.pretrained, str) or not self.pretrained:
            raise ValueError(f"pretrained must be a non-empty string, got {self.pretrained!r}")
        hf_families = families_where(hf=True)
        if self.family not in hf_families:
            raise ValueError(f"family must be one of {hf_families} for a pretrained model, got {self.family!r}")
        if not isinstance(self.hf_config, dict):
            raise ValueError(
                "hf_config (the transformers config dict) is required for a pretrained model; "
                "use models_store.pretrained.load_pretrained to create one"
            )
        if self.d_model is not None:
            _check_int("d_model", self.d_model, 1)
        if self.token_map is not None:
            tm = self.token_map
            if not isinstance(tm, list) or len(tm) != self.input_vocab_size:
                raise ValueError(
                    f"token_map must be a list of {self.input_vocab_size} ids "
                    f"(vocab_size={self.vocab_size}, start_token={self.start_token})"
                )
            if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in tm):
                raise ValueError("token_map entries must be non-negative integers")
            if len(set(tm)) != len(tm):
                raise ValueError("token_map entries must be distinct")

    @property
    def width(self) -> int:
        """``d_model``, the residual width D: solved from the budget for a scratch family when not
        given, read from the transformers config for a pretrained model.

        Raises:
            ValueError: a pretrained config made without it (not through ``load_pretrained``).
        """
        if self.d_model is None:
            raise ValueError(f"{self.family} config without d_model (a pretrained one states it)")
        return self.d_model

    @property
    def input_vocab_size(self) -> int:
        """Rows of the input embedding: the task's ids, plus the START id when ``start_token``."""
        return self.vocab_size + int(self.start_token)

    @property
    def n_prefix(self) -> int:
        """Positions the model prepends to every input (1 with ``start_token``, else 0)."""
        return int(self.start_token)

    @property
    def head_dim(self) -> int | None:
        """Transformer head dim (``d_model // n_heads``), else None."""
        if get_family(self.family).kind != "attention" or self.d_model is None:
            return None
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of every field (``from_dict`` inverts it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Rebuild from ``to_dict()`` output.

        Raises:
            ValueError: unknown keys, or any invalid field.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown ModelConfig fields: {unknown}")
        return cls(**d)


def width_problem(cfg: ModelConfig, d: int) -> str | None:
    """Why width ``d`` is not on ``cfg.family``'s grid, or None if it is (the family's
    ``width_problem`` hook; a family without one accepts any positive width)."""
    check = get_family(cfg.family).hook("width_problem")
    return check(cfg, d) if check is not None else None


def count_params(cfg: ModelConfig, d: int) -> int:
    """Closed-form parameter count of the scratch model of ``cfg.family`` at width ``d`` (the
    family's ``count_params`` hook)."""
    count = get_family(cfg.family).hook("count_params")
    if count is None:
        raise ValueError(f"family {cfg.family!r} has no count_params hook")
    return int(count(cfg, d))


# --- per-family width grids (FamilySpec.width_problem) -----------------------------------------
def transformer_width(cfg: ModelConfig, d: int) -> str | None:
    """A multiple of ``n_heads``, even head dim, rotary dims even and >= 2."""
    if d % cfg.n_heads:
        return f"must be a multiple of n_heads={cfg.n_heads}"
    hd = d // cfg.n_heads
    if hd % 2:
        return f"head dim {hd} must be even"
    rot = int(hd * cfg.rotary_pct)
    if rot < 2 or rot % 2:
        return f"rotary dims int({hd} * {cfg.rotary_pct}) = {rot} must be even and >= 2"
    return None


def mamba_width(cfg: ModelConfig, d: int) -> str | None:
    """Any width below 64, a multiple of 8 from 64 up (aligned widths keep the matrix
    multiplies fast: benchmarks/README.md)."""
    if d >= 64 and d % 8:
        return "must be a multiple of 8 from 64 up"
    return None


def mamba2_width(cfg: ModelConfig, d: int) -> str | None:
    """A multiple of 8 with ``expand * d`` a multiple of ``mamba2_head_dim``."""
    if d % 8:
        return "must be a multiple of 8"
    if (cfg.expand * d) % cfg.mamba2_head_dim:
        return f"expand * d_model must be a multiple of mamba2_head_dim={cfg.mamba2_head_dim}"
    return None


# --- per-family closed-form parameter counts (FamilySpec.count_params) ------------------------
# Every count is embedding ``V·d`` + n blocks + final norm + head ``d·C + C``.
def _emb_head(cfg: ModelConfig, d: int) -> int:
    return cfg.input_vocab_size * d + d * cfg.n_classes + cfg.n_classes


def transformer_params(cfg: ModelConfig, d: int) -> int:
    """GPT-NeoX block (4d MLP, biases): 2 LayerNorms 4d, qkv 3d²+3d, out d²+d, MLP 8d²+5d →
    12d² + 13d; final LayerNorm 2d; a learned position table ``learned_positions``·d."""
    return _emb_head(cfg, d) + cfg.n_layers * (12 * d * d + 13 * d) + 2 * d + cfg.learned_positions * d


def mamba_params(cfg: ModelConfig, d: int) -> int:
    """Mamba block (E = expand·d, R = ceil(d/16)): RMSNorm d, in_proj 2Ed, conv Ek+E,
    x_proj E(R+2N), dt_proj RE+E, A_log EN, D E, out_proj Ed; final RMSNorm d."""
    E, N, k, R = cfg.expand * d, cfg.d_state, cfg.d_conv, math.ceil(d / 16)
    block = d + 2 * E * d + E * k + E + E * (R + 2 * N) + R * E + E + E * N + E + E * d
    return _emb_head(cfg, d) + cfg.n_layers * block + d


def mamba2_params(cfg: ModelConfig, d: int) -> int:
    """Mamba-2 block (H = E/P heads, one group): RMSNorm d, in_proj d(2E+2N+H),
    conv (E+2N)(k+1), dt_bias/A_log/D 3H, gated RMSNorm E, out_proj Ed; final RMSNorm d."""
    E, N, k = cfg.expand * d, cfg.d_state, cfg.d_conv
    H = E // cfg.mamba2_head_dim
    conv_dim = E + 2 * N
    block = d + d * (E + conv_dim + H) + conv_dim * (k + 1) + 3 * H + E + E * d
    return _emb_head(cfg, d) + cfg.n_layers * block + d


def _rnn_params(cfg: ModelConfig, d: int, gates: int) -> int:
    """Pre-norm RNN block: LayerNorm 2d + gates·(2d² + 2d); final LayerNorm 2d."""
    return _emb_head(cfg, d) + cfg.n_layers * (2 * d + gates * (2 * d * d + 2 * d)) + 2 * d


def _stacked_rnn_params(cfg: ModelConfig, d: int, gates: int) -> int:
    """Plain stacked RNN (no per-block norm, no residual): gates·(2d² + 2d) per layer; final LayerNorm 2d."""
    return _emb_head(cfg, d) + cfg.n_layers * gates * (2 * d * d + 2 * d) + 2 * d


def lstm_stack_params(cfg: ModelConfig, d: int) -> int:
    """Stacked LSTM layers: 4 gates."""
    return _stacked_rnn_params(cfg, d, 4)


def gru_stack_params(cfg: ModelConfig, d: int) -> int:
    """Stacked GRU layers: 3 gates."""
    return _stacked_rnn_params(cfg, d, 3)


def lstm_params(cfg: ModelConfig, d: int) -> int:
    """LSTM blocks: 4 gates."""
    return _rnn_params(cfg, d, 4)


def gru_params(cfg: ModelConfig, d: int) -> int:
    """GRU blocks: 3 gates."""
    return _rnn_params(cfg, d, 3)


def solve_width(cfg: ModelConfig) -> tuple[int, int]:
    """The width on the family's grid whose parameter count is closest to ``cfg.param_target``.

    Counts grow with width, so the scan stops at the first width past the upper bound.

    Returns:
        (d_model, n_params).

    Raises:
        ValueError: the closest width misses the target by more than ``param_tolerance``.
    """
    target, tol = cfg.param_target, cfg.param_tolerance
    best: tuple[int, int] | None = None
    for d in range(1, MAX_WIDTH + 1):
        if width_problem(cfg, d):
            continue
        n = count_params(cfg, d)
        if best is None or abs(n - target) < abs(best[1] - target):
            best = (d, n)
        if n > target * (1 + tol):
            break
    if best is None or abs(best[1] - target) > tol * target:
        got = "no valid width" if best is None else f"closest is d_model={best[0]} with {best[1]:,} parameters"
        raise ValueError(
            f"param_target={target:,}: no {cfg.family} width within ±{tol:.0%} ({got}); "
            f"set d_model explicitly or change param_target"
        )
    return best
