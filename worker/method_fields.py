"""The intervention methods' parameters in the job parameters (``MeasureParams``,
``InterveneParams``), read from each method's declaration (``science.methods``).

A method's parameters are set per method and name in ``method_params``
(``{"my_edit": {"k": 8}}``), checked against what the method declares (type, bounds, and, once
the model is known, its width); the built-ins' parameters that had a field of their own before
(``pca_k``, ``inlp_max_rounds``: ``MethodParam.job_field``) keep it, defined here from their
declaration, so stored settings and their hashes stay as they were. Nothing here names a method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from science.methods import Problem, job_fields, method_settings, settings_problems
from worker.param_types import Float, Int, Method

MethodParamValues = dict[Method, dict[Annotated[str, Field(max_length=64)], Int | Float | None]]


def job_field(name: str) -> Any:
    """The pydantic ``Field`` of a built-in's job field ``name`` (``pca_k``): its declared default,
    bounds and help.

    Raises:
        KeyError: no built-in method declares a parameter with that job field.
    """
    method, p = job_fields()[name]
    return Field(p.default, ge=p.ge, le=p.le, description=f"{method}'s {p.name}: {p.help}")


def method_params_field() -> Any:
    """The ``method_params`` field: per method, the values of the parameters it declares."""
    return Field(
        default_factory=dict,
        description="per method, values of the parameters it declares (GET /api/meta: method_params), "
        'e.g. {"my_edit": {"k": 8}}; a built-in parameter with a field of its own (pca_k, '
        "inlp_max_rounds) is set there",
    )


def field_values(params: Any) -> dict[str, Any]:
    """The built-ins' job fields of ``params`` (``{"pca_k": 8, "inlp_max_rounds": None}``)."""
    return {f: getattr(params, f) for f in job_fields() if f in type(params).model_fields}


def problems_error(problems: Sequence[Problem], prefix: tuple[str, ...] = ()) -> ValidationError:
    """``problems`` as one pydantic error per field (each at ``prefix + where``), to raise from a
    validator: the API's 422 and the CLI's one line then name the field."""
    details = [
        InitErrorDetails(type=PydanticCustomError("value_error", msg), loc=(*prefix, *where), input=value)
        for where, msg, value in problems
    ]
    return ValidationError.from_exception_data("params", details)


def check(params: Any) -> None:
    """Raise at the field each parameter value of ``params`` its method's declaration refuses
    (an undeclared name, a type, a bound; the width is checked where the model is known:
    :func:`width_problems`)."""
    problems = settings_problems(params.methods, params.method_params, field_values(params), job_params=True)
    if problems:
        raise problems_error(problems)


def width_problems(params: Any, width: int, model: str = "the model") -> list[Problem]:
    """The parameters of ``params``' methods wider than ``width`` (the model's ``d_model``)."""
    fields = field_values(params)
    return settings_problems(params.methods, params.method_params, fields, width=width, model=model, job_params=True)


def settings(params: Any) -> dict[str, dict[str, Any]]:
    """``{method: {parameter: value}}`` for each of ``params.methods``: what the measurement passes
    to each method's fit (``science.methods.method_settings``)."""
    return method_settings(params.methods, params.method_params, field_values(params), job_params=True)
