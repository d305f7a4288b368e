"""The building blocks of the job parameters (``worker.job_params``): field types checked against the
registries (families, tasks, methods, presets, patch sites), strict numbers, seeds and eval
lengths, and ``_Params``, the base every job's parameters share (finite, storable, hashable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    field_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

from layerscope_core.hashing import config_hash
from layerscope_core.registry import ALL_PATCH_SITES, PRESETS, family_names, task_names
from layerscope_core.suite_names import SUITE_NAME_PATTERN, check_suite_name


class OneOf:
    """``Annotated[str, OneOf(names)]``: a string that must be one of ``names()``, read from the
    registry when a value is validated (so a family registered later is accepted) and when the
    JSON schema is built (an ``enum``). The error reads like pydantic's own ``Literal`` error:
    "Input should be 'transformer', 'mamba', 'mamba2', 'lstm' or 'gru'"."""

    def __init__(self, names: Callable[[], tuple[str, ...]]) -> None:
        self.names = names

    def _check(self, value: str) -> str:
        allowed = self.names()
        if value not in allowed:
            quoted = [repr(n) for n in allowed]
            expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, core_schema.str_schema())

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict:
        return {"type": "string", "enum": list(self.names())}


Family = Annotated[str, OneOf(family_names)]


# every registered task, then the file tasks of the model stores (the worker package imports
# science.tasks, which lists them)
TaskName = Annotated[str, OneOf(task_names)]


def _method_names() -> tuple[str, ...]:
    from layerscope_core.plugins import method_names  # built-ins, then plugins'

    return method_names()


Method = Annotated[str, OneOf(_method_names)]


def _int_only(value: Any) -> Any:
    """JSON ``true`` and ``"1"`` are not integers (pydantic's lax mode would read both as 1)."""
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def _number_only(value: Any) -> Any:
    """JSON ``true`` and ``"0.5"`` are not numbers (pydantic's lax mode would read them as 1.0 and 0.5)."""
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


# Every integer and float field of the params: a JSON number, not a boolean or a string.
Int = Annotated[int, BeforeValidator(_int_only)]
Float = Annotated[float, BeforeValidator(_number_only)]
MAX_SEED = 2**31 - 1
Seed = Annotated[Int, Field(ge=0, le=MAX_SEED)]
PresetName = Annotated[str, OneOf(lambda: PRESETS)]
EvalLength = Annotated[Int, Field(ge=2, le=4096)]
# activation-patching sites (docs/SCIENCE.md#activation-patching); "state" is skipped on the
# transformer, "state:ssm" / "state:conv" (one part of Mamba's state) on the LSTM / GRU too
PatchSite = Annotated[str, OneOf(lambda: ALL_PATCH_SITES)]
# a suite's name (layerscope_core.suite_names): the error names the character or the length, the
# schema documents the pattern
SuiteName = Annotated[str, AfterValidator(check_suite_name), Field(json_schema_extra={"pattern": SUITE_NAME_PATTERN})]


def _field_error(loc: tuple[str | int, ...], msg: str, value: Any) -> ValidationError:
    """An error at ``loc`` within the params, to raise from a model validator: the API's 422 and
    the CLI's one line then name that field, not the params as a whole."""
    details = [InitErrorDetails(type=PydanticCustomError("value_error", msg), loc=loc, input=value)]
    return ValidationError.from_exception_data("params", details)


class _Params(BaseModel):
    # Every float field finite (NaN/inf cannot be stored as JSON); every string, nested ones in
    # dicts and lists too (task_params), follows the one text rule of layerscope_core.text.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, v: Any) -> Any:
        from layerscope_core.json_checks import value_errors

        errors = value_errors(v, prefix=())
        if errors:
            e = errors[0]
            where = ".".join(map(str, e["loc"]))
            raise ValueError(f"{where}: {e['msg']}" if where else e["msg"])
        return v

    def config_hash(self) -> str:
        """SHA-256 over the canonical JSON of these params (the config hash stored with results)."""
        return config_hash(self.model_dump(mode="json"))
