"""Typed query / path parameters shared by the routes (bounds keep every value storable:
int32 ids, strings that follow the text rule of layerscope_core.text)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query
from pydantic import AfterValidator, StringConstraints

from backend.api.queries import ControlsMode
from layerscope_core.registry import ALL_PATCH_SITES, BUILTIN_TASKS, FAMILIES, METHODS, family_names, task_names
from layerscope_core.text import TEXT_PATTERN

INT32_MAX = 2**31 - 1

Text = Annotated[str, StringConstraints(min_length=1, max_length=300, pattern=TEXT_PATTERN)]


def _one_of(known) -> AfterValidator:  # a tuple, or a callable giving one (read per request)
    """A filter value must name something that exists: an unknown family or task is a 422 naming
    the allowed values, not an empty 200 that reads as "no results"."""

    def check(v: str) -> str:
        allowed = tuple(known() if callable(known) else known)
        if v not in allowed:
            raise ValueError(f"unknown {v!r}; one of {', '.join(allowed)}")
        return v

    return AfterValidator(check)


def _method_names() -> tuple[str, ...]:
    from layerscope_core.plugins import method_names  # built-in and plugin methods

    return method_names()


TaskQ = Annotated[
    list[Annotated[Text, _one_of(task_names)]] | None,  # file tasks too: create_app set the store
    Query(description=f"task name(s): {', '.join(BUILTIN_TASKS)}, or a plugin or file task (GET /api/meta)"),
]
FamilyQ = Annotated[
    list[Annotated[Text, _one_of(family_names)]] | None,
    Query(description=f"family name(s): {', '.join(FAMILIES)} (GET /api/meta lists every registered family)"),
]
SuiteQ = Annotated[list[Text] | None, Query(description="suite name(s)")]
PretrainedQ = Annotated[list[Text] | None, Query(description="pretrained model name(s)")]
MethodQ = Annotated[
    list[Annotated[Text, _one_of(_method_names)]] | None,
    Query(description=f"intervention method(s): {', '.join(METHODS)}"),
]
SeedQ = Annotated[list[Annotated[int, Query(ge=0, le=INT32_MAX)]] | None, Query(description="seed(s)")]
EvalLengthQ = Annotated[list[Annotated[int, Query(ge=1, le=INT32_MAX)]] | None, Query(description="eval length(s)")]
PatchSiteQ = Annotated[
    list[Literal[ALL_PATCH_SITES]] | None,  # type: ignore[valid-type]  # a Literal of the registry's tuple of names
    Query(
        description="activation-patching site(s): resid_pre (input of block ℓ), resid_post (its output), "
        "state (the recurrent state block ℓ carries from t to t+1), state:ssm / state:conv "
        "(one part of a Mamba state); default all"
    ),
]


def _site_name(v: str) -> str:
    from layerscope_core.sites import parse_site

    parse_site(v)  # ValueError → 422 naming the scheme
    return v


SiteNameQ = Annotated[
    list[Annotated[Text, AfterValidator(_site_name)]] | None,
    Query(
        description="site name(s) in TransformerLens's style: embed, blocks.{i}.resid_pre, "
        "blocks.{i}.resid_post, blocks.{i}.state, blocks.{i}.state.{part}"
    ),
]
RunIdQ = Annotated[list[Annotated[int, Query(ge=1, le=INT32_MAX)]] | None, Query(description="run id(s)")]
Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=INT32_MAX, description="rows to skip")]
RunIdPath = Annotated[int, Path(ge=1, le=INT32_MAX, description="run id")]
JobIdPath = Annotated[int, Path(ge=1, le=INT32_MAX, description="job id")]

RunSort = Literal[
    "id",
    "-id",
    "name",
    "-name",
    "family",
    "-family",
    "task",
    "-task",
    "seed",
    "-seed",
    "n_params",
    "-n_params",
    "steps",
    "-steps",
    "train_seconds",
    "-train_seconds",
    "created_at",
    "-created_at",
]
RunSortQ = Annotated[
    RunSort | None, Query(description="sort by this column, descending with a leading '-' (ties by id); default id")
]
TrainedQ = Annotated[
    bool | None,
    Query(
        description="true: trained runs only (held-out accuracy reached the "
        "early-stop criterion); false: untrained only; default all"
    ),
]
ControlsQ = Annotated[
    ControlsMode,
    Query(
        description="random-init control runs (docs/SCIENCE.md#controls): exclude them, include them beside the runs, "
        "or only them"
    ),
]
