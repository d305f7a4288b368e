"""What a family and a task are: ``FamilySpec`` and ``TaskSpec``, frozen records whose hooks
(callables, or ``"module:attr"`` strings imported on first use) build the thing they describe.
``layerscope_core.registry`` holds them by name; this module holds no table. Standard library only.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS: tuple[str, ...] = ("attention", "ssm", "rnn")  # the architecture groups the claims compare

Hook = Callable[..., Any] | str  # a callable, or "package.module:attr" resolved on first use


def _resolve(hook: Hook) -> Callable[..., Any]:
    """The callable behind ``hook``: itself, or the ``"module:attr"`` it names (imported now).

    Raises:
        ImportError / AttributeError: a ``"module:attr"`` string that does not resolve.
    """
    if isinstance(hook, str):
        module, _, attr = hook.partition(":")
        return getattr(importlib.import_module(module), attr)
    return hook


def _check_name(what: str, name: Any) -> None:
    """Raises ValueError unless ``name`` is a lower-case identifier (``what`` names the kind)."""
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(f"{what} name must be a lower-case identifier, got {name!r}")


@dataclass(frozen=True)
class FamilySpec:
    """One model family: its name, capabilities and model hooks.

    Attributes:
        name: the family id stored with runs (``ModelConfig.family``).
        label: display name (figures, pickers).
        kind: one of ``KINDS`` (the claims group transformer / SSM / RNN families).
        build: ``build(cfg: ModelConfig) -> LayerwiseModel`` (random init, CPU).
        count_params: ``count_params(cfg, d: int) -> int``, the closed-form parameter count of
            the scratch model at width ``d`` (must equal the built module's count).
        width_problem: ``width_problem(cfg, d: int) -> str | None``, why ``d`` is off the
            family's width grid (None = any positive width).
        hf_config: ``hf_config(cfg) -> transformers.PretrainedConfig`` of a scratch backbone,
            for families built on a transformers model (None otherwise).
        stateful: ``stateful(model) -> models_store.states.StatefulModel``, the step-wise twin
            that patches the ``state`` site (None: no recurrent state, the site is skipped).
        state_parts: names of the parts of a block's recurrent state (``()`` = none).
        has_conv1d: blocks hold a depthwise causal Conv1D (Conv1D removal applies).
        hf: a transformers architecture: pretrained configs / checkpoints of it load.
        pretrained: fine-tuning a pretrained hub model of this family is supported.
        default_lr: peak learning rate when ``TrainParams.lr`` is None (docs/SCIENCE.md#training-recipe).
        activation_floats: numbers a training step keeps per token, block and unit of width
            for its backward pass, the factor of the submit-time memory estimate
            (``worker.memory``; measured for the built-ins, rounded up; a family registered
            without one is estimated at 64).
    """

    name: str
    label: str
    kind: str
    build: Hook
    count_params: Hook
    width_problem: Hook | None = None
    hf_config: Hook | None = None
    stateful: Hook | None = None
    state_parts: tuple[str, ...] = ()
    has_conv1d: bool = False
    hf: bool = False
    pretrained: bool = False
    default_lr: float = 1e-3
    activation_floats: float = 64.0
    _resolved: dict[str, Callable[..., Any] | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name("family", self.name)
        if self.kind not in KINDS:
            raise ValueError(f"family {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.state_parts and self.stateful is None:
            raise ValueError(f"family {self.name!r}: state_parts needs a stateful hook")

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The callable behind hook ``name`` (imported on first use), or None if unset.

        Raises:
            ImportError / AttributeError: a ``"module:attr"`` string that does not resolve.
        """
        if name not in self._resolved:
            h = getattr(self, name)
            self._resolved[name] = None if h is None else _resolve(h)
        return self._resolved[name]

    def capabilities(self) -> dict[str, Any]:
        """JSON-safe capabilities (what ``GET /api/meta`` lists per family)."""
        return {
            "kind": self.kind,
            "has_conv1d": self.has_conv1d,
            "state_parts": list(self.state_parts),
            "recurrent_state": bool(self.state_parts),
            "hf": self.hf,
            "pretrained": self.pretrained,
            "default_lr": self.default_lr,
        }


@dataclass(frozen=True)
class TaskSpec:
    """One task: its name, label and the class that builds it (docs/SCIENCE.md#tasks).

    Attributes:
        name: the task id stored with runs (``TrainParams.task``), a lower-case identifier.
        label: display name (figures, pickers).
        build: ``build(**task_params) -> science.tasks.Task``: the ``Task`` subclass (or a
            factory), or a ``"module:attr"`` string naming it (imported on first use).
    """

    name: str
    label: str
    build: Hook

    def __post_init__(self) -> None:
        _check_name("task", self.name)
        if not isinstance(self.build, str) and not callable(self.build):
            raise ValueError(f"task {self.name!r}: build must be a Task class, a factory or 'module:attr'")

    @functools.cached_property
    def task_class(self) -> Callable[..., Any]:
        """The class (or factory) behind ``build``, imported on first use.

        Raises:
            ImportError / AttributeError: a ``"module:attr"`` string that does not resolve.
        """
        return _resolve(self.build)
