"""Typed result records (science/records.py) stay dict-compatible and hash their settings."""

from __future__ import annotations

import pytest

from science.records import BehaviourRecord, MeasureSettingsRecord, PatchingRecord, as_row, behaviour_json


def test_a_record_reads_and_compares_like_its_row() -> None:
    r = PatchingRecord(
        site="resid_post", layer=0, position=3, eval_length=8, ld_clean=1.0, ld_corrupted=-1.0, n_pairs=4
    )
    row = as_row(r)
    assert r["position"] == 3 and r.get("note") is None and r.get("nope", 1) == 1 and "site" in r
    assert dict(r) == {**r} == row and r == row and row == r
    r["recovery"] = 0.5
    assert r.recovery == 0.5
    with pytest.raises(KeyError):
        r["nope"] = 1
    with pytest.raises(KeyError):
        r["nope"]


def test_behaviour_and_settings_records() -> None:
    b = {"40": BehaviourRecord(token_acc=0.9, last_acc=0.8, n=10)}
    assert behaviour_json(b) == {"40": {"token_acc": 0.9, "last_acc": 0.8, "n": 10}} == b
    a = MeasureSettingsRecord(params={"x": 1}, eval_lengths=[60, 40, 40], patch_eval_length=40, fit_length=12)
    assert a.eval_lengths == [40, 60] and len(a.config_hash) == 64
    assert a.config_hash == MeasureSettingsRecord({"x": 1}, [40, 60], 40, 12).config_hash
    assert a.config_hash != MeasureSettingsRecord({"x": 1}, [40, 60], 40, 40).config_hash


def test_a_probe_record_is_built_from_the_report_it_stores() -> None:
    from dataclasses import fields

    from science.measurement_version import MEASUREMENT_VERSION
    from science.probes import ProbeReport
    from science.records import ProbeRecord

    report = ProbeReport(
        layer=2,
        accuracy=0.9,
        majority_baseline=0.5,
        per_position=[None, 1.0],
        n_train=8,
        n_test=4,
        converged=True,
        n_iter=12,
        grad_max=1e-5,
        balanced_accuracy=0.85,
        control_accuracy=0.6,
        selectivity=0.3,
    )
    record = ProbeRecord.from_report(report, eval_length=40, config_hash="h")
    columns = {f.name for f in fields(ProbeRecord)} - {"eval_length", "config_hash", "measurement_version"}
    assert columns <= set(report.to_row())  # every stored column comes from the report: one place to add one
    assert all(record[c] == getattr(report, c) for c in columns)
    assert record.eval_length == 40 and record.config_hash == "h" and "grad_max" not in record
    assert record.measurement_version == MEASUREMENT_VERSION  # stamped by the code, not read from the report
    assert record.per_position is not report.per_position
