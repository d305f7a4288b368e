"""Plugins through entry points: tasks, families and intervention methods from other packages.

A package adds to layerscope by declaring entry points (``pyproject.toml``)::

    [project.entry-points."layerscope.families"]
    my_rnn = "my_pkg:FAMILY"          # a layerscope_core.registry.FamilySpec (or a callable returning one)
    [project.entry-points."layerscope.tasks"]
    my_task = "my_pkg:MyTask"         # a science.tasks.Task subclass: MyTask(**task_params)
    [project.entry-points."layerscope.methods"]
    my_edit = "my_pkg:MY_METHOD"      # an object with .name and .fit(X [N, D], y [N], n_classes, **kw) -> Edit

They are read once per process, on first use of the registry (``load_plugins``), so the CLI,
the worker, the API (``GET /api/meta``) and the dashboard (through the API) all list them. The
entry point's name is the task / method name; a family's is its ``FamilySpec.name``. A plugin
that fails to load raises ``PluginError`` naming it (nothing is silently skipped).
Imports only ``layerscope_core``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

GROUPS = ("layerscope.tasks", "layerscope.families", "layerscope.methods")

_TASKS: dict[str, Any] = {}
_METHODS: dict[str, Any] = {}
_FAMILIES: list[str] = []
_loaded = False


class PluginError(RuntimeError):
    """An entry point of a ``layerscope.*`` group could not be loaded or is not what its group needs."""


def _load(ep: Any) -> Any:
    try:
        return ep.load()
    except Exception as e:  # an import error of any kind inside a third-party package
        raise PluginError(f"plugin {ep.name!r} ({ep.group} = {ep.value}) failed to load: {type(e).__name__}: {e}") from e


def load_plugins(reload: bool = False) -> None:
    """Read every ``layerscope.*`` entry point (once per process; ``reload`` reads them again).

    Raises:
        PluginError: an entry point that does not load, a family entry that is not a
            ``FamilySpec``, a method without ``fit``, or a plugin named like a built-in.
    """
    global _loaded
    if _loaded and not reload:
        return
    _loaded = True  # before loading: registering a family reads the registry, which calls us
    from layerscope_core import registry

    for name in _FAMILIES:
        registry.unregister_family(name)
    _FAMILIES.clear()
    _TASKS.clear()
    _METHODS.clear()
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
        _FAMILIES.append(spec.name)
    for ep in entry_points(group="layerscope.tasks"):
        if ep.name in registry.TASKS:
            raise PluginError(f"plugin task {ep.name!r} ({ep.value}) is named like a built-in task")
        _TASKS[ep.name] = _load(ep)
    for ep in entry_points(group="layerscope.methods"):
        method = _load(ep)
        if ep.name in registry.METHODS:
            raise PluginError(f"plugin method {ep.name!r} ({ep.value}) is named like a built-in method")
        if not callable(getattr(method, "fit", None)):
            raise PluginError(f"plugin method {ep.name!r} ({ep.value}) has no fit(X, y, n_classes, **kw)")
        _METHODS[ep.name] = method


def plugin_tasks() -> dict[str, Any]:
    """{name: Task class or factory} of the ``layerscope.tasks`` entry points."""
    load_plugins()
    return dict(_TASKS)


def plugin_methods() -> dict[str, Any]:
    """{name: method object} of the ``layerscope.methods`` entry points."""
    load_plugins()
    return dict(_METHODS)


def plugin_families() -> tuple[str, ...]:
    """Names of the families registered from ``layerscope.families`` entry points."""
    load_plugins()
    return tuple(_FAMILIES)


def method_names() -> tuple[str, ...]:
    """Every intervention method: the built-ins (``registry.METHODS``), then the plugins'."""
    from layerscope_core.registry import METHODS

    return (*METHODS, *plugin_methods())


def task_names() -> tuple[str, ...]:
    """The built-in tasks (``registry.TASKS``), then the plugins' (file tasks: ``science.tasks.task_names``)."""
    from layerscope_core.registry import TASKS

    return (*TASKS, *plugin_tasks())
