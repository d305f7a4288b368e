"""Imports point down only: every module of a layer imports from its own layer or a lower one.

The layers, bottom to top (README.md "Layout"): layerscope_core → models_store → science →
store → worker (the jobs layer) → backend / dashboard → layerscope (the notebook surface). The walk reads every ``import`` in every
module, the ones inside functions too (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package → the project packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "layerscope_core": set(),
    "models_store": {"layerscope_core"},
    "science": {"layerscope_core", "models_store"},
    "store": {"layerscope_core"},
    "worker": {"layerscope_core", "models_store", "science", "store"},
    "dashboard": {"layerscope_core", "models_store", "science"},
    "backend": {"layerscope_core", "models_store", "science", "store", "worker", "dashboard"},
    # the Python surface for notebooks (layerscope.results): reads through the backend's queries
    "layerscope": {"layerscope_core", "models_store", "science", "store", "worker", "backend"},
}
PACKAGES = set(ALLOWED)


def project_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of a project package in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[0] in PACKAGES]
    return found


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package: str) -> None:
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}"
           for p in modules(package) for line, name in project_imports(p)
           if name.split(".")[0] not in ALLOWED[package] | {package}]
    assert not bad, "imports that point up or sideways:\n" + "\n".join(bad)


def test_no_cycle_between_packages() -> None:
    edges = {pkg: {name.split(".")[0] for p in modules(pkg) for _, name in project_imports(p)} - {pkg}
             for pkg in ALLOWED}
    seen: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(pkg: str, stack: list[str]) -> None:
        seen[pkg] = 1
        for nxt in sorted(edges[pkg]):
            assert seen.get(nxt) != 1, "import cycle: " + " → ".join([*stack, pkg, nxt])
            if nxt not in seen:
                visit(nxt, [*stack, pkg])
        seen[pkg] = 2

    for pkg in sorted(edges):
        if pkg not in seen:
            visit(pkg, [])


def test_the_walk_sees_lazy_imports(tmp_path: Path) -> None:
    # the check is only as good as its parser: an import inside a function counts
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from backend.cli import main\n    import store.models\n")
    assert project_imports(f) == [(2, "backend.cli"), (3, "store.models")]


def test_within_worker_queue_does_not_import_runner() -> None:
    # the jobs layer's own order: the runner consumes the queue, the queue never calls up
    names = [n for _, n in project_imports(ROOT / "worker" / "queue.py")]
    assert "worker.runner" not in names
