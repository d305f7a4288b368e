"""What a bundle says its runs need beyond the built-ins (layerscope_core.code_sources): the
manifest's ``code_sources`` names a registered task's module (a plugin: its package and version),
nothing for built-ins, file tasks or names not known here; an import names, one line each, the
entries not installed where it imports, and reads a hostile entry as nothing."""

from __future__ import annotations

from layerscope_core.code_sources import code_source, missing_here, sources_of
from layerscope_core.registry import register_task, unregister_task
from tests import toy_task


def test_a_registered_task_is_named_with_its_module_and_built_ins_are_not():
    register_task(toy_task.MAJORITY)
    try:
        assert code_source("task", toy_task.NAME) == f"module {toy_task.MajorityTask.__module__}"
        got = sources_of([toy_task.NAME, "parity", "my_file_task", None], ["lstm", "gru"], ["inlp", "conv1d_removal"])
        assert got == {f"task:{toy_task.NAME}": f"module {toy_task.MajorityTask.__module__}"}
        assert missing_here(got) == []  # registered here
    finally:
        unregister_task(toy_task.NAME)
    assert code_source("task", "parity") is None and code_source("method", "leace") is None
    assert code_source("family", "transformer") is None and code_source("task", toy_task.NAME) is None


def test_the_manifest_carries_them_and_an_import_elsewhere_names_what_is_missing():
    from backend.bundle_export import manifest_for

    register_task(toy_task.MAJORITY)
    try:
        runs = [{"task": toy_task.NAME, "family": "gru", "config_hash": "a" * 64}, {"task": "parity", "family": "lstm"}]
        manifest = manifest_for({"runs": runs, "intervention_results": [{"method": "leace"}]}, "mine", weights=False)
    finally:
        unregister_task(toy_task.NAME)
    assert manifest["code_sources"] == {f"task:{toy_task.NAME}": f"module {toy_task.MajorityTask.__module__}"}
    (line,) = missing_here(manifest["code_sources"])  # the task is not registered any more: "elsewhere"
    assert line.startswith(f"task {toy_task.NAME!r} comes from module tests.toy_task, which is not installed here")
    plain = manifest_for({"runs": [{"task": "parity", "family": "lstm"}]}, "paper", weights=False)
    assert "code_sources" not in plain  # a suite of built-ins: the manifest as before


def test_a_hostile_entry_reads_as_nothing():
    assert missing_here(None) == [] and missing_here(["task:x"]) == []
    assert missing_here({"nonsense": "x", "task:": "y", "colour:red": "z", "task:parity": "w"}) == []
    (line,) = missing_here({"method:gone": "x" * 5000})
    assert "method 'gone'" in line and len(line) < 400


class _Method:
    name = "my_edit"
    params = ()

    def fit(self, *args, **kwargs):
        raise NotImplementedError


def test_a_registered_method_is_named_with_its_module():
    from layerscope_core.registry import register_method, unregister_method

    register_method("my_edit", _Method())
    try:
        assert sources_of([], [], ["inlp", "my_edit"]) == {"method:my_edit": f"module {__name__}"}
    finally:
        unregister_method("my_edit")
    assert code_source("method", "my_edit") is None
