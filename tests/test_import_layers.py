"""Imports point down only, no module imports itself back, and the dashboard process never loads torch.

The layers, bottom to top (README.md "Layout"): layerscope_core → models_store → science →
store → worker (the jobs layer) → backend / dashboard → layerscope (the notebook surface). The walk
reads every ``import`` in every module, the ones inside functions and under ``TYPE_CHECKING`` too (a
lazy import is still a dependency). The dashboard is held tighter than a layer: it may import the
pure modules listed in :data:`DASHBOARD_MAY_IMPORT`, one by one, and none of them may reach torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
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
    "dashboard": {"layerscope_core", "science"},  # only the modules below
    "backend": {"layerscope_core", "models_store", "science", "store", "worker", "dashboard"},
    # the Python surface for notebooks (layerscope.results): reads through the backend's queries
    "layerscope": {"layerscope_core", "models_store", "science", "store", "worker", "backend"},
}
PACKAGES = set(ALLOWED)

# the modules outside its own package the dashboard may import: pure math and labels (DESIGN.md)
DASHBOARD_MAY_IMPORT: set[str] = {
    "layerscope_core.csv_cells",  # the one CSV writer (formula-safe cells), shared with the API
    "layerscope_core.layers",
    "layerscope_core.plugins",  # entry points read by name; a plugin's own modules load on first use
    "layerscope_core.provenance",
    "layerscope_core.registry",
    "layerscope_core.sites",
    "science.budget",
    "science.claims",
    "science.profiles",
    "science.stats",
    "science.trained",
}
# third-party packages no module the dashboard reaches may import (the GPU stack; the DB and queue)
DASHBOARD_NEVER: set[str] = {"torch", "transformers", "sqlalchemy", "huey", "redis", "psycopg"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, relative ones made absolute, anywhere in the file."""
    me = module_name(path) if path.is_relative_to(ROOT) else path.stem
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # ``from pkg import sub`` names the module pkg.sub when there is one
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            found += [(node.lineno, s) for s in subs] or [(node.lineno, base)]
    return found


def project_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a project package in ``path``."""
    return [(line, n) for line, n in imports(path) if n.split(".")[0] in PACKAGES]


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def owner(name: str) -> str | None:
    """The project module ``name`` lives in (``science.stats.holm`` → ``science.stats``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


GRAPH: dict[str, set[str]] = {
    m: {o for _, n in project_imports(p) if (o := owner(n)) and o != m} for m, p in MODULES.items()
}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package: str) -> None:
    bad = [
        f"{p.relative_to(ROOT)}:{line} imports {name}"
        for p in modules(package)
        for line, name in project_imports(p)
        if name.split(".")[0] not in ALLOWED[package] | {package}
    ]
    assert not bad, "imports that point up or sideways:\n" + "\n".join(bad)


def test_dashboard_imports_only_listed_modules() -> None:
    bad = [
        f"{p.relative_to(ROOT)}:{line} imports {name}"
        for p in modules("dashboard")
        for line, name in project_imports(p)
        if name.split(".")[0] != "dashboard" and owner(name) not in DASHBOARD_MAY_IMPORT
    ]
    assert not bad, "the dashboard imports a module outside DASHBOARD_MAY_IMPORT:\n" + "\n".join(bad)


def reach(start: set[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += GRAPH.get(m, ())
    return seen


def test_nothing_the_dashboard_reaches_imports_torch() -> None:
    # every project module the dashboard can load, lazy imports included, read for third-party imports
    reached = reach({m for m in MODULES if m.split(".")[0] == "dashboard"})
    bad = sorted(
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {name}"
        for m in reached
        for line, name in imports(MODULES[m])
        if name.split(".")[0] in DASHBOARD_NEVER
    )
    assert not bad, "modules the dashboard reaches import the heavy stack:\n" + "\n".join(bad)


def test_dashboard_process_has_no_torch() -> None:
    # the real thing: build the app with every page (pages load lazily) in a fresh interpreter
    code = (
        "import sys, dashboard.app\n"
        "from dashboard.all_pages import PAGES\n"
        "assert len(PAGES) == 8, len(PAGES)\n"
        "dashboard.app.create_dash('http://127.0.0.1:9')\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(DASHBOARD_NEVER)!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def cycles() -> list[list[str]]:
    """One circle per strongly connected component of the module graph with more than one module
    (Tarjan 1972), each as a path that returns to its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[set[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            comps.append(comp)

    for v in sorted(GRAPH):
        if v not in index:
            strong(v)
    out = []
    for comp in (c for c in comps if len(c) > 1):
        start = min(comp)
        path, prev = [start], {start: None}
        todo = [start]
        while todo:  # breadth-first inside the component back to start
            v = todo.pop(0)
            nxt = sorted(GRAPH[v] & comp)
            if start in nxt:
                trail = [v]
                while prev[trail[-1]] is not None:
                    trail.append(prev[trail[-1]])
                path = [*reversed(trail), start]
                break
            for w in nxt:
                if w not in prev:
                    prev[w] = v
                    todo.append(w)
        out.append(path)
    return out


def test_no_import_circle_between_modules() -> None:
    found = cycles()
    assert not found, "import circles:\n" + "\n".join(" → ".join(c) for c in found)


def test_no_cycle_between_packages() -> None:
    edges = {
        pkg: {name.split(".")[0] for p in modules(pkg) for _, name in project_imports(p)} - {pkg} for pkg in ALLOWED
    }
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


def test_the_walk_finds_a_circle_through_a_lazy_import(monkeypatch: pytest.MonkeyPatch) -> None:
    # a circle closed by a function-level import is found, and named from its first module
    monkeypatch.setitem(GRAPH, "worker.a", {"worker.b"})
    monkeypatch.setitem(GRAPH, "worker.b", {"worker.a"})
    assert ["worker.a", "worker.b", "worker.a"] in cycles()


def test_the_walk_resolves_relative_and_submodule_imports() -> None:
    # ``from .base import Task`` in science/tasks is science.tasks.base; ``from worker import persist``
    # is the module worker.persist
    assert "science.tasks.base" in GRAPH["science.tasks.code_depth"]
    assert "worker.persist" in GRAPH["worker.run_measurement"]


def test_within_worker_queue_does_not_import_runner() -> None:
    # the jobs layer's own order: the runner consumes the queue, the queue never calls up
    names = [n for _, n in project_imports(ROOT / "worker" / "queue.py")]
    assert "worker.runner" not in names
