"""The core (``layerscope_core``) imports the standard library and itself only, with one named
exception: ``csv_cells`` writes pandas data frames (docs/DESIGN.md "The folders"). Every import
counts, the ones inside functions too (the walk of tests/test_import_layers.py)."""

from __future__ import annotations

import sys

from tests.test_import_layers import MODULES, imports

# core module → the third-party packages it may import, and why
CORE_THIRD_PARTY: dict[str, set[str]] = {
    "layerscope_core.csv_cells": {"pandas"},  # the one CSV writer: data frames in, CSV text out
}


def third_party(module: str) -> set[str]:
    """The top-level packages ``module`` imports that are neither the standard library nor the core."""
    tops = {name.split(".")[0] for _, name in imports(MODULES[module])}
    return {t for t in tops if t not in sys.stdlib_module_names and t not in ("__future__", "layerscope_core")}


def test_the_core_imports_the_standard_library_only_but_where_named() -> None:
    core = sorted(m for m in MODULES if m.split(".")[0] == "layerscope_core")
    assert set(CORE_THIRD_PARTY) <= set(core)
    found = {m: third_party(m) for m in core}
    assert {m: pkgs for m, pkgs in found.items() if pkgs} == CORE_THIRD_PARTY


def test_the_walk_sees_a_third_party_import() -> None:
    assert third_party("layerscope_core.csv_cells") == {"pandas"}
    assert third_party("layerscope_core.registry") == set()
