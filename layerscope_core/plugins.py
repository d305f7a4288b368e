"""Plugins through entry points: tasks, families and intervention methods from other packages.

A package adds to layerscope by declaring entry points (``pyproject.toml``)::

    [project.entry-points."layerscope.families"]
    my_rnn = "my_pkg:FAMILY"          # a layerscope_core.registry.FamilySpec (or a callable returning one)
    [project.entry-points."layerscope.tasks"]
    my_task = "my_pkg:MyTask"         # a science.tasks.Task subclass: MyTask(**task_params), or a TaskSpec
    [project.entry-points."layerscope.methods"]
    my_edit = "my_pkg:MY_METHOD"      # an object with .name, .params and .fit(X [N, D], y [N], n_classes, **kw) -> Edit

They are read once per process, on first use of the registry (``load_plugins``), so the CLI,
the worker, the API (``GET /api/meta``) and the dashboard (through the API) all list them. The
entry point's name is the task / method name; a family's is its ``FamilySpec.name``. A plugin
task is registered like a built-in one (``registry.register_task``; a ``TaskSpec`` entry gives it
a label) and, like it, joins no preset and no claim (they name ``registry.STUDY_TASKS``). A method
is fitted exactly as the built-in ones (``science/edit_methods.py``) are: ``fit_edit`` looks it
up (``science.methods.get_method``; ``registry.register_method`` adds one in-process) and passes
it the parameters it declares (``params``, ``layerscope_core.method_params``). A plugin
that fails to load raises ``PluginError`` naming it (nothing is silently skipped).
Imports only ``layerscope_core``.
"""

from __future__ import annotations

# the loading lives in the registry (it fills the registry's tables); these names are its interface
from layerscope_core.registry import (  # noqa: F401 - re-exported
    GROUPS,
    PluginError,
    load_plugins,
    method_names,
    plugin_families,
    plugin_methods,
    plugin_tasks,
    task_names,
)
