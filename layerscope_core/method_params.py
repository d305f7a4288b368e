"""The parameters an intervention method declares: name, type, default, bounds, help.

A method lists its parameters on its class (``params = (MethodParam(...), ...)``,
``science/edit_methods.py``); everything that takes a method's settings reads them from there:
the job parameters (``worker.job_params``: a ``method_params`` value per method and parameter), the
submit checks (``backend.api.submit_checks``: a 422 at the field), the CLI (``--param``),
``GET /api/meta`` and the measurement (``science.methods.method_settings``: every declared
parameter of every measured method passed to its ``fit`` by keyword, its value stored with the
rows where a column holds it, ``k``).

>>> k = MethodParam("k", int, 8, "directions removed", ge=1, le=4096, width_bound=True)
>>> k.problem(0), k.problem(9, width=4)
('k must be at least 1, got 0', 'k 9 is wider than the model (d_model 4); at most 4')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TYPES: dict[type, str] = {int: "integer", float: "number"}


@dataclass(frozen=True)
class MethodParam:
    """One keyword argument of a method's ``fit`` that a job may set.

    Attributes:
        name: the keyword ``fit`` receives (a lower-case identifier).
        type: ``int`` or ``float`` (a JSON integer, or any JSON number; never a boolean).
        default: the value used when a job gives none; None means "the method decides" and then
            None is also accepted as a value (e.g. INLP's ``max_rounds``: its budget from the width).
        help: one line for the CLI, the API schema and ``GET /api/meta``.
        ge, le: inclusive bounds (None: unbounded on that side).
        width_bound: also at most the width of the states it is fitted on (``d_model``), checked
            wherever the run is known (a train job's model, the run an ``intervene`` job names).
        job_field: the top-level field of ``MeasureParams`` / ``InterveneParams`` that carries
            it: only the built-ins' parameters stored under their own names before
            ``method_params`` existed (``pca_k``, ``inlp_max_rounds``: stored settings and their
            hashes keep them); any other method's parameters live in ``method_params``.
    """

    name: str
    type: type
    default: int | float | None
    help: str
    ge: int | float | None = None
    le: int | float | None = None
    width_bound: bool = False
    job_field: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"parameter name must be a lower-case identifier, got {self.name!r}")
        if self.type not in TYPES:
            raise ValueError(f"parameter {self.name!r}: type must be int or float, got {self.type!r}")
        if self.default is not None and (why := self.problem(self.default)):
            raise ValueError(f"parameter {self.name!r}: its default is refused by its own bounds: {why}")

    def problem(
        self, value: Any, width: int | None = None, label: str | None = None, model: str = "the model"
    ) -> str | None:
        """Why ``value`` is not a value of this parameter (None when it is): its type, its bounds
        and, with ``width`` (the states' ``d_model``), the width bound. ``label``: how the
        message names the parameter (default its ``name``); ``model``: how it names the model."""
        label = label or self.name
        if value is None:
            return None if self.default is None else f"{label} must be given (an {TYPES[self.type]}), got null"
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (self.type is int and not isinstance(value, int)) or value != value:
            return f"{label} must be an {TYPES[self.type]}, got {value!r}"
        if self.ge is not None and value < self.ge:
            return f"{label} must be at least {self.ge}, got {value}"
        if self.le is not None and value > self.le:
            return f"{label} must be at most {self.le}, got {value}"
        if self.width_bound and width is not None and value > width:
            return f"{label} {value} is wider than {model} (d_model {width}); at most {width}"
        return None

    def as_json(self) -> dict[str, Any]:
        """JSON-safe description (what ``GET /api/meta`` lists per method)."""
        return {
            "name": self.name,
            "type": TYPES[self.type],
            "default": self.default,
            "help": self.help,
            "ge": self.ge,
            "le": self.le,
            "width_bound": self.width_bound,
            "job_field": self.job_field,
        }


def declared_params(method: Any) -> tuple[MethodParam, ...]:
    """The ``params`` a method object declares (none: ``()``).

    Raises:
        ValueError: ``params`` is not a sequence of ``MethodParam`` with distinct names.
    """
    params = getattr(method, "params", ())
    if isinstance(params, MethodParam) or not isinstance(params, tuple | list):
        raise ValueError(f"{type(method).__name__}.params must be a tuple of MethodParam, got {params!r}")
    bad = [p for p in params if not isinstance(p, MethodParam)]
    if bad:
        raise ValueError(f"{type(method).__name__}.params holds {bad[0]!r}, not a MethodParam")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"{type(method).__name__}.params names a parameter twice: {names}")
    return tuple(params)
