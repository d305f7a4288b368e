"""Every intervention method by name, and the values of the parameters each declares.

The built-ins are the classes of :data:`science.edit_methods.BUILTIN_METHODS` (one instance
each, looked up by the class's ``name``); then the methods added through the registry (a
plugin's entry point, ``layerscope_core.registry.register_method``). A method's parameters are
its ``params`` (:class:`layerscope_core.method_params.MethodParam`): :func:`method_settings`
resolves the values a measurement passes to each method's ``fit`` and :func:`settings_problems`
says what is wrong with given ones, at the field a job names them by — the job parameters, the
submit checks and the measurement all read the declarations through these two.

>>> method_settings(["pca_top_k", "mean"], fields={"pca_k": 4})
{'pca_top_k': {'k': 4}, 'mean': {}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from layerscope_core import registry
from layerscope_core.method_params import MethodParam, declared_params
from science.edit_methods import BUILTIN_METHODS, EditMethod
from science.edits import Edit

_BUILTINS: dict[str, EditMethod] = {cls.name: cls() for cls in BUILTIN_METHODS}

# (where, message, value): ``where`` is the field within the params, ``(job_field,)`` for a
# built-in's own field, else ``("method_params", method, parameter)``
Where = tuple[str, ...]
Problem = tuple[Where, str, Any]


def get_method(name: str) -> Any:
    """The method object of ``name``: a built-in (``science.edit_methods``), then an added one.

    Raises:
        ValueError: unknown method (the message lists the registered ones).
    """
    method = _BUILTINS.get(name) if isinstance(name, str) else None
    if method is None:
        method = registry.added_method(name)
    if method is None:
        raise ValueError(f"unknown intervention method {name!r}; expected one of {registry.method_names()}")
    return method


def params_of(name: str) -> tuple[MethodParam, ...]:
    """The parameters method ``name`` declares (``()`` for none).

    Raises:
        ValueError: unknown method, or ``params`` that are not ``MethodParam``s.
    """
    return declared_params(get_method(name))


def refits_until_removed(name: str) -> bool:
    """Whether the measurement refits method ``name`` on doubled fit sets while its edit leaves the
    variable readable (``EditMethod.refit_until_removed``; docs/SCIENCE.md#fit-size)."""
    return bool(getattr(get_method(name), "refit_until_removed", False))


def accumulates(name: str) -> bool:
    """Whether method ``name``'s fit on a doubled fit set adds the new sequences' statistics to
    those of the set it doubles (``EditMethod.accumulates``; docs/SCIENCE.md#fit-size)."""
    method = get_method(name)
    return bool(getattr(method, "accumulates", False)) and all(
        callable(getattr(method, hook, None))
        for hook in ("new_statistics", "update_statistics", "edit_from_statistics")
    )


def fit_copies(names: Iterable[str]) -> float:
    """The most memory an in-memory fit of any of methods ``names`` holds, in multiples of one
    layer's states (``EditMethod.fit_copies``; ``EditMethod``'s own for a method without it)."""
    default = EditMethod.fit_copies
    return max((float(getattr(get_method(n), "fit_copies", default)) for n in names), default=default)


def more_data_helps(name: str, edit: Edit) -> bool:
    """Whether method ``name``'s ``edit`` could remove more if fitted on more sequences
    (``EditMethod.more_data_helps``; True for a method without the hook)."""
    hook = getattr(get_method(name), "more_data_helps", None)
    return bool(hook(edit)) if callable(hook) else True


def record_fields(name: str, edit: Edit) -> dict[str, Any]:
    """The columns of an intervention row method ``name`` fills from its fitted ``edit``
    (``EditMethod.record_fields``; none for a method without the hook)."""
    hook = getattr(get_method(name), "record_fields", None)
    return dict(hook(edit)) if callable(hook) else {}


# what the pages read a method's rows by (``EditMethod`` documents each; False when not declared)
TRAITS = ("rank_chosen_by_fit", "random_control_is_itself")


def traits_meta() -> dict[str, dict[str, bool]]:
    """``{method: {trait: bool}}`` for every registered method (``GET /api/meta``'s
    ``method_traits``): the :data:`TRAITS` each declares, so a page reads rows without naming one."""
    return {m: {t: bool(getattr(get_method(m), t, False)) for t in TRAITS} for m in registry.method_names()}


def job_fields() -> dict[str, tuple[str, MethodParam]]:
    """``{job_field: (method, parameter)}``: the built-ins' parameters that the job parameters
    carry under their own top-level field (``MethodParam.job_field``, e.g. ``pca_k``)."""
    return {p.job_field: (m, p) for m in registry.METHODS for p in params_of(m) if p.job_field is not None}


def params_meta() -> dict[str, list[dict[str, Any]]]:
    """``{method: [parameter as JSON, ...]}`` for every registered method (``GET /api/meta``)."""
    return {m: [p.as_json() for p in params_of(m)] for m in registry.method_names()}


def _value(method: str, p: MethodParam, given: Mapping[str, Any], fields: Mapping[str, Any]) -> tuple[bool, Any, Where]:
    """(whether given, its value — else the default —, where it was given) of parameter ``p`` of
    ``method``: its job field first, then ``given`` (the method's ``method_params``)."""
    if p.job_field is not None and p.job_field in fields:
        return True, fields[p.job_field], (p.job_field,)
    if p.name in given:
        return True, given[p.name], ("method_params", method, p.name)
    return False, p.default, (p.job_field,) if p.job_field is not None else ("method_params", method, p.name)


def settings_problems(
    methods: Iterable[str],
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    fields: Mapping[str, Any] | None = None,
    *,
    width: int | None = None,
    model: str = "the model",
    job_params: bool = False,
) -> list[Problem]:
    """What is wrong with these parameter values, each at its field (empty: nothing).

    Args:
        methods: the methods measured (a width bound applies to theirs only).
        method_params: ``{method: {parameter: value}}`` as given; a method may be one not
            measured (its values are still checked), never one not registered.
        fields: the built-ins' job fields as given (``{"pca_k": 4}``; :func:`job_fields`).
        width: the width of the states (``d_model``), when known: each width-bound parameter of
            a measured method, given or by default, must be at most this.
        model: how the width message names the model ("run 3's model").
        job_params: the job parameters' rule: a parameter with a job field is set there only
            (otherwise it may be given in ``method_params`` too, if not also by its field).

    Checked: a method or parameter ``method_params`` names that is not registered or not
    declared (or is given twice), a value its declaration refuses (type, bounds), and a value
    wider than ``width``.
    """
    measured = list(methods)
    given = {m: dict(v) for m, v in (method_params or {}).items()}
    fields = dict(fields or {})
    known = registry.method_names()
    out: list[Problem] = []
    for f in sorted(set(fields) - set(job_fields())):
        out.append(((f,), f"{f} is not a parameter of any built-in method", fields[f]))
    for m, values in given.items():
        if m not in known:
            out.append((("method_params", m), f"unknown intervention method {m!r}; expected one of {known}", values))
            continue
        declared = {p.name: p for p in params_of(m)}
        for name, value in values.items():
            p = declared.get(name)
            if p is None:
                msg = f"{m} has no parameter {name!r}; its parameters: {', '.join(declared) or 'none'}"
            elif p.job_field is not None and (job_params or p.job_field in fields):
                msg = f"{m}'s {name} is set by the field {p.job_field}, not in method_params"
            else:
                continue
            out.append((("method_params", m, name), msg, value))
    owners = [job_fields()[f][0] for f in fields if f in job_fields()]
    for m in dict.fromkeys([*measured, *given, *owners]):
        if m not in known:
            continue
        for p in params_of(m):
            found, value, where = _value(m, p, given.get(m, {}), fields)
            if not found and m not in measured:
                continue
            label = p.job_field if where == (p.job_field,) else p.name  # the loc names the method
            why = p.problem(value, width if m in measured else None, label, model)
            if why:
                out.append((where, why, value))
    return out


def method_settings(
    methods: Iterable[str],
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    fields: Mapping[str, Any] | None = None,
    *,
    width: int | None = None,
    job_params: bool = False,
) -> dict[str, dict[str, Any]]:
    """``{method: {parameter: value}}`` for each of ``methods``: every parameter it declares,
    from its job field (``fields``, the built-ins' ``pca_k`` / ``inlp_max_rounds``), else from
    ``method_params``, else its declared default — the keywords the measurement passes to its fit.

    Raises:
        ValueError: the first of :func:`settings_problems` (the message names the field).
    """
    methods = list(methods)
    problems = settings_problems(methods, method_params, fields, width=width, job_params=job_params)
    if problems:
        where, msg, _ = problems[0]
        raise ValueError(f"{'.'.join(where)}: {msg}")
    given, fields = method_params or {}, fields or {}
    return {m: {p.name: _value(m, p, given.get(m, {}), fields)[1] for p in params_of(m)} for m in methods}
