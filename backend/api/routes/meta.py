"""``GET /api/meta``: the registry's vocabularies (families with capabilities, tasks, methods
with their parameters, presets, eval lengths, patching sites), so clients build their pickers
from one source."""

from __future__ import annotations

from fastapi import APIRouter, Request

from backend.api.deps import UNAUTHORIZED, ReadAuth
from backend.api.schemas import Meta
from layerscope_core import registry

router = APIRouter(tags=["meta"], dependencies=[ReadAuth], responses=UNAUTHORIZED)


@router.get(
    "/meta",
    response_model=Meta,
    summary="Families (with capabilities), tasks, methods, presets, eval lengths and patching sites",
)
def meta(request: Request) -> Meta:
    """Read from ``layerscope_core.registry`` at request time: a family registered after start
    (``register_family``) is listed, and so are plugins (entry points) and the file tasks of the
    model store (``layerscope task add``: ``create_app`` registered the settings' store, whose
    names ``registry.task_names`` lists). ``read_only``: why a server over a bundle refuses writes,
    so the dashboard says so and disables what would write."""
    from science.methods import params_meta, traits_meta  # what each method declares

    read_only = getattr(request.app.state, "read_only", None)
    return Meta(**registry.meta(), method_params=params_meta(), method_traits=traits_meta(), read_only=read_only)
