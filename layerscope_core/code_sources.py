"""Which package a task, family or intervention method that is not built in comes from, so that a
results bundle can say what its runs need (docs/BRING_YOUR_OWN.md#plugins).

A run of a plugin's task, or an edit row of a plugin's method, reads anywhere its bundle is
imported; training, rebuilding or measuring it again needs the plugin's code. ``layerscope export``
writes :func:`sources_of` the suite's runs into the manifest (``code_sources``), and ``layerscope
import`` says, one line each, which of them are not installed where it imports
(:func:`missing_here`).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

from layerscope_core import registry

_GROUP = {"task": "layerscope.tasks", "family": "layerscope.families", "method": "layerscope.methods"}


def _entry_point_source(kind: str, name: str) -> str | None:
    """``"<distribution> <version>"`` of the entry point that adds ``name``, or its ``module:attr``."""
    for ep in entry_points(group=_GROUP[kind]):
        if ep.name == name:
            dist = getattr(ep, "dist", None)
            return f"{dist.name} {dist.version}" if dist is not None else ep.value
    return None


def _added_here(kind: str, name: str) -> Any:
    """The object code added for ``name`` (not a built-in), or None."""
    if kind == "task":
        spec = registry.task_spec(name)
        return None if spec is None or name in registry.BUILTIN_TASKS else spec.task_class
    if kind == "family":
        return None if name in registry.BUILTIN_FAMILIES or name not in registry.family_names() else name
    return registry.added_method(name)


def code_source(kind: str, name: str) -> str | None:
    """Where ``kind`` (``task``, ``family`` or ``method``) ``name`` comes from when it is not built
    in: its plugin's package and version, or the module that registered it
    (``register_task``/``register_method``/``register_family``); None for a built-in, a file task or
    a name not known here."""
    added = _added_here(kind, name)
    if added is None:
        return None
    return _entry_point_source(kind, name) or f"module {getattr(added, '__module__', None) or '?'}"


def sources_of(tasks: Iterable[Any], families: Iterable[Any], methods: Iterable[Any]) -> dict[str, str]:
    """``{"task:NAME": source, "family:NAME": …, "method:NAME": …}`` for the names that are not
    built in (:func:`code_source`), sorted; empty when every name is built in or a file task."""
    out = {}
    for kind, names in (("task", tasks), ("family", families), ("method", methods)):
        for name in sorted({n for n in names if isinstance(n, str)}):
            if (source := code_source(kind, name)) is not None:
                out[f"{kind}:{name}"] = source
    return out


def missing_here(sources: Any) -> list[str]:
    """One line per entry of a manifest's ``code_sources`` whose task, family or method is not
    known here (a hostile or older manifest: anything but a ``{str: str}`` entry is skipped)."""
    if not isinstance(sources, dict):
        return []
    known = {"task": registry.task_names, "family": registry.family_names, "method": registry.method_names}
    lines = []
    for key, source in sorted(sources.items(), key=lambda kv: str(kv[0])):
        kind, _, name = str(key).partition(":")
        if kind in known and name and name not in known[kind]():
            lines.append(
                f"{kind} {name!r} comes from {str(source)[:200]}, which is not installed here: its rows read, "
                "but training, rebuilding or measuring its runs again needs it"
            )
    return lines
