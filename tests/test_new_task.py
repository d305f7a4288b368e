"""A new task is what docs/DESIGN.md's recipe says, and nothing else moves: registered (here the
majority task of tests/toy_task.py, removed after each test), it keeps the task contract, runs by
name, and GET /api/meta, the job form and the dashboard's labels list it; the presets expand as
before, the claims of both shipped bundles read as before and the rest of /api/meta is unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from layerscope_core.registry import (
    PRESETS,
    STUDY_TASKS,
    TaskSpec,
    register_task,
    task_names,
    task_spec,
    task_specs,
    unregister_task,
)
from tests import toy_task
from tests.test_task_contract import assert_task_contract
from tests.toy_task import NAME

ROOT = Path(__file__).resolve().parents[1]
BUNDLES = [ROOT / "examples" / "paper.layerscope.zip", ROOT / "examples" / "paper-steps.layerscope.zip"]


@contextmanager
def majority_registered() -> Iterator[TaskSpec]:
    """The majority task registered for the block, removed after it."""
    register_task(toy_task.MAJORITY)
    try:
        yield toy_task.MAJORITY
    finally:
        unregister_task(NAME)
    assert NAME not in task_names() and task_spec(NAME) is None


def _expansions() -> dict[str, list[dict]]:
    """Every preset's train jobs, as JSON-able dicts."""
    from worker.job_params import SuiteParams
    from worker.presets import expand_suite

    return {
        name: [p.model_dump(mode="json") for p in expand_suite(SuiteParams(preset=name), local_files_only=True)]
        for name in PRESETS
    }


def _claims(res) -> str:
    """The claims as the report reads them (``GET /api/claims``), as sorted JSON (NaN compares)."""
    return json.dumps(res.claims().to_dict("records"), sort_keys=True, default=str)


def test_the_new_task_keeps_the_contract_and_runs_by_name():
    from pydantic import ValidationError

    from dashboard.theme import all_tasks, task_label
    from science.tasks import get_task
    from worker.job_params import SuiteParams, TrainParams
    from worker.presets import expand_suite

    with majority_registered() as spec:
        assert task_spec(NAME) is spec and NAME in task_names() and NAME in all_tasks()
        assert NAME not in STUDY_TASKS
        task = get_task(NAME)
        assert isinstance(task, toy_task.MajorityTask)
        assert_task_contract(task, NAME)
        runs = expand_suite(SuiteParams(preset="smoke", tasks=[NAME], families=["gru"]), local_files_only=True)
        assert [(p.task, p.family, p.seed) for p in runs] == [(NAME, "gru", 0)]
        assert task_label(NAME) == "Majority"  # from the registry: dashboard/theme.py is not edited
        with pytest.raises(ValueError, match="built in"):
            register_task(TaskSpec("parity", "Parity", toy_task.MajorityTask))
        with pytest.raises(ValueError, match="already registered"):
            register_task(spec)
    with pytest.raises(ValidationError, match="task"):
        TrainParams(family="gru", task=NAME)
    with pytest.raises(ValueError, match=f"unknown task '{NAME}'"):
        get_task(NAME)


def test_the_presets_expand_as_before():
    before = _expansions()
    with majority_registered():
        after = _expansions()
    assert after == before
    assert {p["task"] for p in before["paper"]} == set(STUDY_TASKS)  # the study's tasks, named


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_the_shipped_bundles_claims_read_as_before(bundle):
    import layerscope.results as lr

    with lr.open(bundle) as res:
        before = _claims(res)
        with majority_registered():
            after = _claims(res)
    assert [c["id"] for c in json.loads(before)] == [1, 2, 3, 4, 5, 6]
    assert after == before


def test_api_meta_adds_the_task_and_nothing_else(api):
    from dash import html

    from dashboard.pages.jobs import form_fields
    from tests.test_toy_family import _options

    before = api.client.get("/api/meta").json()
    with majority_registered():
        after = api.client.get("/api/meta").json()
        registered = [s.name for s in task_specs()]
        form = html.Div(form_fields("suite", after))
        assert NAME in _options(form, "tasks")
    assert after["tasks"].index(NAME) == registered.index(NAME)  # after the built-ins and plugins
    assert [t for t in after["tasks"] if t != NAME] == before["tasks"]
    assert {k: v for k, v in after.items() if k != "tasks"} == {k: v for k, v in before.items() if k != "tasks"}
