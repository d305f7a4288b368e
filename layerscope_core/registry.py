"""The registry: the study's vocabularies, defined once (docs/SCIENCE.md#tasks, #models).

Every layer above reads these names from here — the CLI's choices, the API's ``GET /api/meta``,
the dashboard's pickers and colours, the presets and the benchmarks.

What exists and what the study uses are separate lists: ``BUILTIN_FAMILIES`` / ``FAMILIES`` and
``BUILTIN_TASKS`` / ``STUDY_TASKS``. A family or task registered later (built in, by a plugin or
by ``register_family`` / ``register_task``) can be run by name, but joins no preset, no claim and
no existing study unless it is named in the study's list.

Families are ``FamilySpec`` entries (``layerscope_core.specs``): a name, capabilities
(``has_conv1d``, ``state_parts``, ...) and the model hooks that ``models_store`` calls (build,
width grid, closed-form parameter count). This module imports nothing above ``layerscope_core``,
so the built-in families name their hooks as ``"module:attr"`` strings, resolved on first use; a
family registered at run time (``register_family``) may pass callables directly. Adding a family
= one ``register_family`` call + its model file. Tasks are ``TaskSpec`` entries the same way: a
name, a label and the ``science.tasks.Task`` subclass that builds it (``register_task``); the file
tasks of ``layerscope task add`` are named by a task source (``add_task_source``). Intervention
methods: ``METHODS`` names the built-ins (their classes are ``science.edit_methods.BUILTIN_METHODS``;
``science.methods.get_method`` looks any method up); a plugin's or a ``register_method``'d one is
an object with ``fit`` (and its declared ``params``) kept here.

>>> spec = get_family("mamba")
>>> spec.has_conv1d, spec.state_parts
(True, ('ssm', 'conv'))
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any

from layerscope_core.method_params import declared_params
from layerscope_core.specs import KINDS, FamilySpec, Hook, TaskSpec  # noqa: F401 - part of this interface

PRESETS: tuple[str, ...] = ("smoke", "quick", "paper", "pretrained", "paper-75s")
EVAL_LENGTHS: tuple[int, ...] = (40, 60, 80, 100, 120)
TRAIN_LENGTH = 40  # models train at L=40; longer eval lengths are out of distribution (docs/SCIENCE.md#tasks)
# activation-patching sites (docs/SCIENCE.md#activation-patching): the default set, and every
# accepted one ("state:ssm" / "state:conv" are one part of a Mamba state)
PATCH_SITES: tuple[str, ...] = ("resid_pre", "resid_post", "state")
ALL_PATCH_SITES: tuple[str, ...] = ("resid_pre", "resid_post", "state", "state:ssm", "state:conv")


def _builtin(name: str, label: str, kind: str, **kw: Any) -> FamilySpec:
    """A built-in family whose hooks live in ``models_store.model_config`` / ``.families`` / ``.states``."""
    build, count_params = f"models_store.families:build_{name}", f"models_store.model_config:{name}_params"
    return FamilySpec(name, label, kind, build=build, count_params=count_params, **kw)


_RNN_STATE = "models_store.states:rnn_stateful"
_FAMILIES: dict[str, FamilySpec] = {
    s.name: s
    for s in (
        _builtin(
            "transformer",
            "Transformer",
            "attention",
            hf=True,
            pretrained=True,
            width_problem="models_store.model_config:transformer_width",
            hf_config="models_store.families:gpt_neox_config",
            activation_floats=32.0,
        ),
        _builtin(
            "mamba",
            "Mamba",
            "ssm",
            hf=True,
            pretrained=True,
            has_conv1d=True,
            state_parts=("ssm", "conv"),
            width_problem="models_store.model_config:mamba_width",
            hf_config="models_store.families:mamba_config",
            stateful="models_store.states:mamba_stateful",
            activation_floats=32.0,
        ),
        _builtin(
            "mamba2",
            "Mamba-2",
            "ssm",
            hf=True,
            pretrained=True,
            has_conv1d=True,
            state_parts=("ssm", "conv"),
            width_problem="models_store.model_config:mamba2_width",
            hf_config="models_store.families:mamba2_config",
            stateful="models_store.states:mamba2_stateful",
            activation_floats=40.0,
        ),
        _builtin("lstm", "LSTM", "rnn", state_parts=("h", "c"), stateful=_RNN_STATE, activation_floats=24.0),
        _builtin("gru", "GRU", "rnn", state_parts=("h",), stateful=_RNN_STATE, activation_floats=24.0),
        # the plain stacks nn.LSTM/nn.GRU(num_layers=n) compute: no residual stream (claim 1's architecture check)
        _builtin(
            "lstm_stack", "LSTM (stacked)", "rnn", state_parts=("h", "c"), stateful=_RNN_STATE, activation_floats=24.0
        ),
        _builtin("gru_stack", "GRU (stacked)", "rnn", state_parts=("h",), stateful=_RNN_STATE, activation_floats=24.0),
    )
}

BUILTIN_FAMILIES: tuple[str, ...] = tuple(_FAMILIES)  # every built-in family (none can be replaced)
# the study's five families, in canonical order (presets, claims, figure order); the stacked RNNs
# are built in too, but a variant the claims read beside LSTM/GRU (claim 1's architecture check)
FAMILIES: tuple[str, ...] = ("transformer", "mamba", "mamba2", "lstm", "gru")
# The parts of a run's measurement, in the order they are measured (worker.run_measurement).
MEASURE_PARTS: tuple[str, ...] = ("probes", "interventions", "patching")
# a stacked variant → the residual family it stands in for
STACKED_VARIANTS: dict[str, str] = {"lstm_stack": "lstm", "gru_stack": "gru"}


def _add(what: str, table: dict[str, Any], builtin: tuple[str, ...], spec: Any, replace: bool) -> None:
    """``table[spec.name] = spec`` unless that replaces a built-in ``what`` or, without ``replace``,
    a registered one (ValueError naming it)."""
    if spec.name in builtin:
        raise ValueError(f"{what} {spec.name!r} is built in and cannot be replaced")
    if spec.name in table and not replace:
        raise ValueError(f"{what} {spec.name!r} is already registered")
    table[spec.name] = spec


def _remove(what: str, table: dict[str, Any], builtin: tuple[str, ...], name: str) -> None:
    """Drop ``table[name]`` if there (ValueError for a built-in ``what``)."""
    if name in builtin:
        raise ValueError(f"{what} {name!r} is built in and cannot be removed")
    table.pop(name, None)


def register_family(spec: FamilySpec, *, replace: bool = False) -> FamilySpec:
    """Add ``spec`` to the registry (after the built-ins, in registration order).

    Raises:
        ValueError: a family of that name is registered already (and ``replace`` is False),
            or ``spec`` would replace a built-in family.
    """
    _add("family", _FAMILIES, BUILTIN_FAMILIES, spec, replace)
    return spec


def unregister_family(name: str) -> None:
    """Remove a family added by ``register_family`` (no-op if absent).

    Raises:
        ValueError: ``name`` is a built-in family.
    """
    _remove("family", _FAMILIES, BUILTIN_FAMILIES, name)


# ----------------------------------------------------------------------------- tasks


_TASKS: dict[str, TaskSpec] = {
    s.name: s
    for s in (
        TaskSpec("parity", "Parity", "science.tasks.parity:ParityTask"),
        TaskSpec("s3", "S3", "science.tasks.s3:S3Task"),
        TaskSpec("dyck", "Dyck", "science.tasks.dyck:DyckTask"),
        TaskSpec("code_depth", "Code-Depth", "science.tasks.code_depth:CodeDepthTask"),
    )
}
BUILTIN_TASKS: tuple[str, ...] = tuple(_TASKS)  # every built-in task, in canonical order (none can be replaced)
# the study's tasks: what the `paper` preset trains and the claims read (docs/SCIENCE.md#claims). A task
# built in, registered or plugged in later is not among them unless it is named here.
STUDY_TASKS: tuple[str, ...] = ("parity", "s3", "dyck", "code_depth")
# more task names, defined outside the registry: the file tasks of the model stores (science.tasks adds
# its lister when imported); each a callable giving names, read on every task_names()
_TASK_SOURCES: list[Callable[[], Iterable[str]]] = []


def register_task(spec: TaskSpec, *, replace: bool = False) -> TaskSpec:
    """Add task ``spec`` (after the built-ins, in registration order). The presets, the claims
    and every stored study are unchanged: they name their tasks (``STUDY_TASKS``).

    Raises:
        ValueError: ``spec`` is not a ``TaskSpec``, would replace a built-in task, or a task of
            that name is registered already (and ``replace`` is False).
    """
    if not isinstance(spec, TaskSpec):
        raise ValueError(f"register_task takes a TaskSpec, got a {type(spec).__name__}")
    _add("task", _TASKS, BUILTIN_TASKS, spec, replace)
    return spec


def unregister_task(name: str) -> None:
    """Remove a task added by ``register_task`` (no-op if absent).

    Raises:
        ValueError: ``name`` is a built-in task.
    """
    _remove("task", _TASKS, BUILTIN_TASKS, name)


def add_task_source(source: Callable[[], Iterable[str]]) -> None:
    """List the names ``source()`` gives in ``task_names()``, after the registered tasks (once per
    source): tasks defined by data rather than a class, e.g. ``science.tasks.file_task_names``."""
    if source not in _TASK_SOURCES:
        _TASK_SOURCES.append(source)


def task_specs() -> tuple[TaskSpec, ...]:
    """Every registered ``TaskSpec``: the built-ins, then added ones (plugins too), in order."""
    _plugins()
    return tuple(_TASKS.values())


def task_spec(name: str) -> TaskSpec | None:
    """The spec of registered task ``name``, or None (a file task, or no task at all)."""
    if not isinstance(name, str):
        return None
    if name not in _TASKS:
        _plugins()
    return _TASKS.get(name)


def task_names() -> tuple[str, ...]:
    """Every task a run may name: the built-ins (``BUILTIN_TASKS``), the added ones
    (``register_task``, plugins), then the names of the task sources (file tasks), each once."""
    _plugins()
    names = dict.fromkeys(_TASKS)
    for source in _TASK_SOURCES:
        names.update(dict.fromkeys(source()))
    return tuple(names)


def added_task_names() -> tuple[str, ...]:
    """The tasks defined by code that are not built in: plugins (``layerscope.tasks``) and
    ``register_task``'s — names a file task may not take (a run naming one gets the code's task)."""
    return tuple(s.name for s in task_specs() if s.name not in BUILTIN_TASKS)


# ----------------------------------------------------------------------------- intervention methods
# An intervention method is an object with ``name``, ``params`` (the keywords of its fit a job
# may set, ``layerscope_core.method_params.MethodParam``) and ``fit(X [N, D], y [N], n_classes,
# **kw) -> science.interventions.Edit``. The built-ins are classes in ``science.edit_methods``
# (``BUILTIN_METHODS``, their names below); ``science.methods.get_method`` looks a name up there,
# then among the methods added here (plugins and ``register_method``).
METHODS: tuple[str, ...] = ("project_out", "inlp", "leace", "pca_top_k", "mean")  # the built-ins, in canonical order
_ADDED_METHODS: dict[str, Any] = {}


def register_method(name: str, method: Any, *, replace: bool = False) -> Any:
    """Add intervention method ``method`` as ``name`` (after the built-ins, in registration order).

    Args:
        name: the method id stored with intervention results (a lower-case identifier).
        method: an object with ``fit(X, y, n_classes, **kw)`` returning an ``Edit`` and, if
            a job may set some of its fit's keywords, ``params`` (a tuple of ``MethodParam``).

    Raises:
        ValueError: ``name`` is not a lower-case identifier, is a built-in method, or is
            registered already (and ``replace`` is False); ``method`` has no callable ``fit``;
            its ``params`` are not ``MethodParam``s, or one names a ``job_field`` (the
            built-ins' own fields only).
    """
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(f"method name must be a lower-case identifier, got {name!r}")
    if name in METHODS:
        raise ValueError(f"method {name!r} is built in and cannot be replaced")
    if name in _ADDED_METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered")
    if not callable(getattr(method, "fit", None)):
        raise ValueError(f"method {name!r} has no fit(X, y, n_classes, **kw)")
    fielded = [p.name for p in declared_params(method) if p.job_field is not None]
    if fielded:
        raise ValueError(f"method {name!r}: parameter {fielded[0]!r} names a job_field (only the built-ins' do)")
    _ADDED_METHODS[name] = method
    return method


def unregister_method(name: str) -> None:
    """Remove a method added by ``register_method`` (no-op if absent).

    Raises:
        ValueError: ``name`` is a built-in method.
    """
    if name in METHODS:
        raise ValueError(f"method {name!r} is built in and cannot be removed")
    _ADDED_METHODS.pop(name, None)


def added_method(name: str) -> Any | None:
    """The object registered as ``name`` by a plugin or ``register_method`` (None for a built-in
    or an unknown name: ``science.methods.get_method`` looks up every method)."""
    _plugins()
    return _ADDED_METHODS.get(name) if isinstance(name, str) else None


def _plugins() -> None:
    """Read the ``layerscope.*`` entry points once (:func:`load_plugins`)."""
    load_plugins()


def family_names() -> tuple[str, ...]:
    """Every registered family: the built-ins first (``BUILTIN_FAMILIES``), then added ones (plugins too)."""
    _plugins()
    return tuple(_FAMILIES)


def families() -> tuple[FamilySpec, ...]:
    """Every registered ``FamilySpec``, in ``family_names()`` order."""
    _plugins()
    return tuple(_FAMILIES.values())


def get_family(name: str) -> FamilySpec:
    """The spec of family ``name``.

    Raises:
        ValueError: unknown family (the message lists the registered ones).
    """
    spec = _FAMILIES.get(name) if isinstance(name, str) else None
    if spec is None:
        _plugins()
        spec = _FAMILIES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValueError(f"unknown family {name!r}; known families: {', '.join(_FAMILIES)}")
    return spec


def families_where(names: tuple[str, ...] | None = None, **capabilities: Any) -> tuple[str, ...]:
    """Names (of ``names``, default every registered family) whose spec has every given
    attribute value, e.g. ``families_where(kind="rnn")`` or ``families_where(hf=True)``."""
    pool = family_names() if names is None else names
    return tuple(n for n in pool if all(getattr(get_family(n), k) == v for k, v in capabilities.items()))


def patch_sites_of(family: str, sites: Any) -> tuple[list[str], list[str]]:
    """(the sites of ``sites`` family ``family`` has, the ones it has not, each in order):
    ``state`` needs a recurrent state (``FamilySpec.state_parts``), ``state:ssm`` /
    ``state:conv`` that part of it. Site names are not checked here."""
    parts = get_family(family).state_parts
    keep = [s for s in sites if not s.startswith("state") or (parts and (s == "state" or s.split(":")[1] in parts))]
    return keep, [s for s in sites if s not in keep]


def meta() -> dict[str, Any]:
    """Every vocabulary as JSON-safe data (the body of ``GET /api/meta``)."""
    return {
        "families": [{"name": s.name, "label": s.label, **s.capabilities()} for s in families()],
        "tasks": list(task_names()),
        "methods": list(method_names()),
        "presets": list(PRESETS),
        "eval_lengths": list(EVAL_LENGTHS),
        "train_length": TRAIN_LENGTH,
        "patch_sites": list(PATCH_SITES),
        "all_patch_sites": list(ALL_PATCH_SITES),
    }


# ----------------------------------------------------------------------------- plugins
# Tasks, families and intervention methods from other packages, through entry points
# (``layerscope_core.plugins`` documents the groups; the loading lives here, beside what it fills).

GROUPS = ("layerscope.tasks", "layerscope.families", "layerscope.methods")

_PLUGIN_TASKS: list[str] = []
_PLUGIN_METHODS: list[str] = []
_PLUGIN_FAMILIES: list[str] = []
_plugins_loaded = False


class PluginError(RuntimeError):
    """An entry point of a ``layerscope.*`` group could not be loaded or is not what its group needs."""


def _load(ep: Any) -> Any:
    try:
        return ep.load()
    except Exception as e:  # an import error of any kind inside a third-party package
        raise PluginError(
            f"plugin {ep.name!r} ({ep.group} = {ep.value}) failed to load: {type(e).__name__}: {e}"
        ) from e


def load_plugins(reload: bool = False) -> None:
    """Read every ``layerscope.*`` entry point (once per process; ``reload`` reads them again).

    Raises:
        PluginError: an entry point that does not load, a family entry that is not a
            ``FamilySpec``, a method without ``fit`` or with ``params`` that are not
            ``MethodParam``s, or a plugin named like a built-in.
    """
    global _plugins_loaded
    if _plugins_loaded and not reload:
        return
    _plugins_loaded = True  # before loading: registering a family reads the registry, which calls us
    registry = sys.modules[__name__]  # this module: the names below are its own
    for name in _PLUGIN_FAMILIES:
        registry.unregister_family(name)
    for name in _PLUGIN_METHODS:
        registry.unregister_method(name)
    for name in _PLUGIN_TASKS:
        registry.unregister_task(name)
    _PLUGIN_FAMILIES.clear()
    _PLUGIN_TASKS.clear()
    _PLUGIN_METHODS.clear()
    for ep in entry_points(group="layerscope.families"):
        spec = _load(ep)
        if callable(spec) and not isinstance(spec, registry.FamilySpec):
            spec = spec()
        if not isinstance(spec, registry.FamilySpec):
            raise PluginError(f"plugin family {ep.name!r} ({ep.value}) is a {type(spec).__name__}, not a FamilySpec")
        try:
            registry.register_family(spec, replace=True)
        except ValueError as e:
            raise PluginError(f"plugin family {ep.name!r} ({ep.value}): {e}") from None
        _PLUGIN_FAMILIES.append(spec.name)
    for ep in entry_points(group="layerscope.tasks"):
        if ep.name in registry.BUILTIN_TASKS:
            raise PluginError(f"plugin task {ep.name!r} ({ep.value}) is named like a built-in task")
        task = _load(ep)
        try:
            spec = task if isinstance(task, registry.TaskSpec) else registry.TaskSpec(ep.name, ep.name, task)
            if spec.name != ep.name:
                raise ValueError(f"its TaskSpec is named {spec.name!r}")
            registry.register_task(spec, replace=True)
        except ValueError as e:
            raise PluginError(f"plugin task {ep.name!r} ({ep.value}): {e}") from None
        _PLUGIN_TASKS.append(ep.name)
    for ep in entry_points(group="layerscope.methods"):
        method = _load(ep)
        if ep.name in registry.METHODS:
            raise PluginError(f"plugin method {ep.name!r} ({ep.value}) is named like a built-in method")
        try:
            registry.register_method(ep.name, method, replace=True)
        except ValueError as e:
            raise PluginError(f"plugin method {ep.name!r} ({ep.value}): {e}") from None
        _PLUGIN_METHODS.append(ep.name)


def plugin_tasks() -> dict[str, Any]:
    """{name: Task class or factory} of the ``layerscope.tasks`` entry points."""
    load_plugins()
    return {name: _TASKS[name].task_class for name in _PLUGIN_TASKS}


def plugin_methods() -> dict[str, Any]:
    """{name: method object} of the ``layerscope.methods`` entry points."""
    load_plugins()
    return {name: _ADDED_METHODS[name] for name in _PLUGIN_METHODS}


def plugin_families() -> tuple[str, ...]:
    """Names of the families registered from ``layerscope.families`` entry points."""
    load_plugins()
    return tuple(_PLUGIN_FAMILIES)


def method_names() -> tuple[str, ...]:
    """Every registered intervention method: the built-ins (``METHODS``), then the added ones
    (plugins', ``register_method``'s), in registration order."""
    _plugins()
    return (*METHODS, *_ADDED_METHODS)
