"""A 422's ``msg`` is for people: pydantic's "Value error, " before a validator's own words
leaked into it (the dashboard shows it as it stands); the structured ``type`` and ``loc`` stay."""

from __future__ import annotations

import pytest

TRAIN = {"family": "lstm", "task": "parity"}


@pytest.mark.parametrize(
    ("kind", "params", "loc", "starts"),
    [
        ("suite", {"preset": "smoke", "rebuild_weights": True, "force": True}, ["body", "params"], "rebuild_weights: "),
        ("patch", {"run_id": 1, "positions": [50]}, ["body", "params"], "positions [50] outside"),
        ("train", {**TRAIN, "suite": "a/b"}, ["body", "params", "suite"], "holds '/'"),
        ("train", {**TRAIN, "task_params": {"zz": 1}}, ["body", "params", "task_params"], "parity: unknown parameter"),
    ],
)
def test_a_validators_message_reads_without_pydantics_prefix(api, kind, params, loc, starts) -> None:
    r = api.client.post("/api/jobs", json={"kind": kind, "params": params})
    assert r.status_code == 422, r.text
    (error,) = r.json()["detail"]
    assert error["type"] == "value_error" and error["loc"] == loc, error
    assert error["msg"].startswith(starts) and "Value error" not in r.text, error
