"""The compiled scan's C++ source is a file of its own, shipped as package data and compiled
from exactly that text."""

import tomllib
from pathlib import Path

from models_store import fast_scan_cpu

ROOT = Path(__file__).resolve().parents[1]


def test_kernel_source_is_a_cpp_file_declared_as_package_data():
    src = fast_scan_cpu._SOURCE_PATH
    assert src.suffix == ".cpp" and src.parent == Path(fast_scan_cpu.__file__).parent
    assert src.read_text(encoding="utf-8") == fast_scan_cpu._SOURCE
    assert "extern \"C\"" in fast_scan_cpu._SOURCE and "_SOURCE = r\"\"\"" not in Path(fast_scan_cpu.__file__).read_text()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert any(src.match(pattern) for pattern in data["models_store"])
