"""The one layer-name and normalised-depth helper (``layerscope_core.layers``) and its edge cases
(docs/SCIENCE.md#layers, docs/SCIENCE.md#normalised-depth); every former copy is now this one."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope_core.layers import ALL_LAYERS, EMB, depth, layer_name


def test_layer_names_cover_every_case():
    assert (EMB, ALL_LAYERS) == (-1, -2)
    assert layer_name(-1) == "emb"
    assert layer_name(-2) == "all"
    assert [layer_name(layer, 4) for layer in range(4)] == ["0", "1", "2", "3"]
    assert layer_name(23, 24) == "23"
    assert layer_name(np.int64(2)) == "2"  # numpy integers from result tables


@pytest.mark.parametrize("layer, n_layers", [(-3, None), (-3, 4), (4, 4), (0, 0)])
def test_layer_name_rejects_out_of_range(layer, n_layers):
    with pytest.raises(ValueError):
        layer_name(layer, n_layers)


@pytest.mark.parametrize("layer", [1.0, "1", True, None])
def test_layer_name_rejects_non_integers(layer):
    with pytest.raises(TypeError):
        layer_name(layer)


def test_depth_emb_is_zero_last_block_is_one():
    assert depth(-1, 4) == 0.0
    assert [depth(layer, 4) for layer in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert depth(11, 12) == 1.0 and depth(5, 12) == 0.5
    assert depth(np.int64(1), np.int64(2)) == 1.0


def test_depth_of_a_one_block_model():
    assert depth(-1, 1) == 0.0
    assert depth(0, 1) == 1.0


def test_depth_of_every_layer_edit_is_none():
    assert depth(ALL_LAYERS, 4) is None
    assert depth(-2, 1) is None


@pytest.mark.parametrize("layer, n_layers", [(-1, 0), (0, 0), (0, -1), (4, 4), (-3, 4)])
def test_depth_rejects_impossible_layers(layer, n_layers):
    with pytest.raises(ValueError):
        depth(layer, n_layers)


def test_every_former_copy_is_the_one_helper():
    from backend.api import queries
    from dashboard import theme
    from models_store import base
    from science import profiles
    from science.measure import ALL_LAYERS as MEASURE_ALL_LAYERS

    assert queries.depth is theme.depth is profiles.depth is depth
    assert queries.layer_name is theme.layer_name is base.layer_name is layer_name
    assert MEASURE_ALL_LAYERS == ALL_LAYERS
