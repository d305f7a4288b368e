"""Intervention methods are objects looked up by name: the built-ins by their classes
(``science.edit_methods.BUILTIN_METHODS``, named in the registry's ``METHODS``), a plugin's or a
``register_method``'d one beside them; ``fit_edit`` dispatches by that lookup, and the lists
offered (``GET /api/meta``, the params the CLI and jobs form check) come from the registry
(tests/test_plugins.py sees a plugin's method in every interface)."""

from __future__ import annotations

import pytest
import torch

from layerscope_core.method_params import MethodParam
from layerscope_core.registry import METHODS, meta, method_names, register_method, unregister_method
from science.edit_methods import BUILTIN_METHODS
from science.interventions import Edit, fit_edit
from science.methods import get_method


def _states():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    return torch.randn(200, 5, generator=g) + 2.0 * y[:, None].float(), y


def test_the_builtin_classes_are_the_registrys_methods_in_order():
    assert tuple(cls.name for cls in BUILTIN_METHODS) == METHODS


@pytest.mark.parametrize("name", METHODS)
def test_every_builtin_is_a_registered_object_that_fit_edit_calls(name):
    method = get_method(name)
    assert method.name == name and type(method) in BUILTIN_METHODS
    X, y = _states()
    direct, through = method.fit(X, y, 2, k=2, seed=1), fit_edit(name, X, y, 2, k=2, seed=1)
    assert direct.method == through.method == name and direct.rank_removed == through.rank_removed
    assert torch.equal(direct.matrix(), through.matrix()) and torch.equal(direct.center, through.center)


class _Recorder:
    """The identity edit (rank 0), recording each call: to see what the dispatch passes on."""

    name = "recorder_test"

    def __init__(self):
        self.calls: list[dict] = []

    def fit(self, X, y, n_classes, **kw):
        self.calls.append({"X": X, "y": y, **kw})
        D = X.shape[1]
        return Edit(self.name, 0, X.double().mean(0), torch.zeros(D, 0, dtype=torch.float64), torch.zeros(0, D))


@pytest.fixture
def registered():
    method = register_method("recorder_test", _Recorder())
    try:
        yield method
    finally:
        unregister_method("recorder_test")
    assert "recorder_test" not in method_names()


def test_a_registered_method_is_fitted_checked_and_listed_like_a_builtin(registered):
    from worker.job_params import MeasureParams

    assert method_names() == (*METHODS, "recorder_test") and meta()["methods"][-1] == "recorder_test"
    assert MeasureParams(methods=["recorder_test"]).methods == ["recorder_test"]
    edit = fit_edit("recorder_test", torch.arange(12).reshape(4, 3), torch.tensor([[0, 1], [1, 0]]), 2, seed=7, k=3)
    assert edit.method == "recorder_test" and edit.rank_removed == 0
    call = registered.calls[-1]  # checked inputs: float X, flat int64 y, the context and the given keywords
    assert call["X"].dtype == torch.float32 and call["y"].tolist() == [0, 1, 1, 0] and call["y"].dtype == torch.int64
    assert (call["seed"], call["k"], call["probe"], call["ctx"]) == (7, 3, None, None)
    assert "max_rounds" not in call  # another method's parameter is not passed to this one
    with pytest.raises(ValueError, match="at least 2 rows"):
        fit_edit("recorder_test", torch.randn(1, 3), torch.zeros(1, dtype=torch.long), 2)


def test_builtins_cannot_be_replaced_and_bad_registrations_are_refused(registered):
    with pytest.raises(ValueError, match="built in"):
        register_method("inlp", _Recorder())
    with pytest.raises(ValueError, match="built in"):
        unregister_method("leace")
    with pytest.raises(ValueError, match="already registered"):
        register_method("recorder_test", _Recorder())
    with pytest.raises(ValueError, match="no fit"):
        register_method("no_fit", object())
    with pytest.raises(ValueError, match="not a MethodParam"):
        register_method("bad_params", type("P", (_Recorder,), {"params": ({"name": "k"},)})())
    with pytest.raises(ValueError, match="job_field"):
        fielded = MethodParam("k", int, 2, "k", ge=1, job_field="pca_k")
        register_method("fielded", type("F", (_Recorder,), {"params": (fielded,)})())
    with pytest.raises(ValueError, match="lower-case identifier"):
        register_method("Bad Name", _Recorder())
    with pytest.raises(ValueError, match=r"unknown intervention method 'nope'.*recorder_test"):
        get_method("nope")
