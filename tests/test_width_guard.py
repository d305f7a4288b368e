"""A width whose D × D float64 matrices would not fit the machine's available memory is refused in
one ValueError before any is allocated — by a probe, every edit method and ``probe_layers`` — where
a notebook's 65,536-wide states asked the allocator for 17 GiB (or swapped the machine)."""

from __future__ import annotations

import pytest
import torch

import science.probes.design as design
from layerscope_core.registry import METHODS
from science.interventions import fit_edit
from science.probes import fit_probe
from science.probes.layerwise import probe_layers


@pytest.fixture
def small_machine(monkeypatch):
    monkeypatch.setattr(design, "_available_bytes", lambda: 3 * 8 * 64 * 64)  # room for D = 64, not 65
    monkeypatch.setattr(design, "ALWAYS_FITS", 0)  # small widths are not looked at otherwise


def test_a_width_over_the_available_memory_is_refused_before_allocating(small_machine) -> None:
    y = torch.randint(0, 2, (50,))
    with pytest.raises(ValueError, match=r"the states are 65 wide: .* 3 65 × 65 float64 matrices"):
        fit_probe(torch.randn(50, 65), y, 2)
    for method in sorted(METHODS):
        with pytest.raises(ValueError, match=rf"{method}: the states X are 65 wide"):
            fit_edit(method, torch.randn(50, 65), y, 2)
    with pytest.raises(ValueError, match="layer 2: the states are 65 wide"):
        probe_layers({2: torch.randn(10, 5, 65)}, torch.randint(0, 2, (10, 5)), 2)
    assert fit_probe(torch.randn(50, 64), y, 2).W.shape == (2, 64)  # the width that fits is fitted


def test_no_meminfo_no_refusal(monkeypatch) -> None:
    monkeypatch.setattr(design, "_available_bytes", lambda: None)  # not Linux: nothing to compare with
    design.check_width(10**6)


def test_this_machine_reads_its_available_memory() -> None:
    available = design._available_bytes()
    assert available is None or available > 2**20
