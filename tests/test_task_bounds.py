"""Size parameters of the built-in tasks have upper bounds (science/tasks/validation.py): a job asking
for a billion Dyck depths is a 422 at its field, answered at once, not a server that builds a
billion class names (found by a fresh user: 20 GB and a hung API)."""

from __future__ import annotations

import pytest

from science.tasks import get_task
from science.tasks.validation import MAX_CLASSES, MAX_FILES, MAX_VOCAB

HUGE = 10**9
CASES = [
    ("dyck", "m", MAX_CLASSES - 1),
    ("dyck", "k", min(MAX_VOCAB // 2, MAX_CLASSES - 1)),
    ("code_depth", "m", MAX_CLASSES - 1),
    ("code_depth", "vocab_size", MAX_VOCAB),
    ("code_depth", "max_files", MAX_FILES),
]


@pytest.mark.parametrize(("task", "name", "maximum"), CASES)
def test_above_the_bound_is_refused_naming_the_parameter(task, name, maximum):
    with pytest.raises(ValueError, match=rf"{task}: parameter '{name}' must be an integer <= {maximum}, got {HUGE}"):
        get_task(task, **{name: HUGE})
    with pytest.raises(ValueError, match=rf"<= {maximum}, got {maximum + 1}\b"):
        get_task(task, **{name: maximum + 1})


def test_the_bound_itself_is_accepted():
    assert get_task("dyck", m=MAX_CLASSES - 1, target="depth").n_classes == MAX_CLASSES
    assert get_task("dyck", k=MAX_CLASSES - 1).n_classes == MAX_CLASSES


@pytest.mark.parametrize("task_params", [{"m": HUGE, "target": "depth"}, {"k": HUGE}])
def test_the_api_answers_422_at_the_field_and_stores_no_job(api, task_params):
    from sqlalchemy import func, select

    from store.models import Job

    r = api.client.post(
        "/api/jobs", json={"kind": "train", "params": {"family": "gru", "task": "dyck", "task_params": task_params}}
    )
    assert r.status_code == 422, r.text
    locs = [d["loc"] for d in r.json()["detail"]]
    assert any(loc[:3] == ["body", "params", "task_params"] for loc in locs), locs
    assert "<= " in r.text
    with api.factory() as s:
        assert s.execute(select(func.count()).select_from(Job)).scalar_one() == 0
