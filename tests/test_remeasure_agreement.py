"""checks/remeasure_agreement.py: a tiny suite exported, then measured again from its bundle (weights
rebuilt within the recorded steps, in a scratch database): every table agrees — bit for bit here,
one version on one device — and a number moved past its tolerance, or a verdict flipped, fails."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest

from backend.bundle_export import export_bundle
from science.measurement_version import MEASUREMENT_VERSION, TOLERANCES
from worker.job_params import SuiteParams
from worker.pipeline import local_env, run_suite

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remeasure_agreement", ROOT / "checks" / "remeasure_agreement.py")
check = importlib.util.module_from_spec(_spec)
sys.modules["remeasure_agreement"] = check  # its dataclass looks its module up
_spec.loader.exec_module(check)

ONE = dict(preset="smoke", families=["gru"], tasks=["parity"], max_seconds=600.0)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A smoke run exported without weights, then measured again from its bundle."""
    tmp = tmp_path_factory.mktemp("remeasure")
    env = local_env(f"sqlite:///{tmp / 'made.db'}", tmp / "store", device="cpu")
    (run_id,) = run_suite(SuiteParams(**ONE), env)
    bundle = tmp / "smoke.layerscope.zip"
    with env.session_factory() as s:
        export_bundle(s, "smoke", bundle)
    work = tmp / "work"
    work.mkdir()
    return check.remeasure(bundle, run_id, device="cpu", work=work), bundle, run_id


def test_a_run_measured_again_with_the_same_version_is_bit_identical(measured):
    result, _, run_id = measured
    assert result["settings_problem"] is None
    assert result["versions"] == [MEASUREMENT_VERSION]
    assert result["run_new"]["steps"] == result["run_old"]["steps"]  # rebuilt within its recorded steps
    lines, changed = check.compare(result["old"], result["new"])
    assert changed == []
    for line in lines:
        assert line.missing == 0 and line.rows > 0, line.text()
        assert line.value in (None, 0.0), line.text()  # one version, one device: bit for bit
    # (an untrained smoke run: patching recoveries are None, their gap too small; the rows still compare)
    assert {line.table for line in lines if line.value is not None} >= {"probes", "refits"}
    text, ok = check.report(result)
    assert ok and text[-1] == "agreement: within the tolerances"
    # INLP's reference rounds ran beside today's, and today's INLP rows came out the same again
    assert len(result["reference"]) == sum(r["method"] == "inlp" for r in result["new"]["intervention_results"]) > 0
    assert any("today's INLP rows measured again identical" in t for t in text)


def test_a_number_past_its_tolerance_or_a_flipped_verdict_fails(measured):
    result, _, _ = measured
    moved = copy.deepcopy(result)
    probe = moved["new"]["probe_results"][0]
    probe["accuracy"] -= (TOLERANCES["probe_accuracy_pp"] + 0.1) / 100
    text, ok = check.report(moved)
    assert not ok and any(t.startswith("probes") and "OUTSIDE" in t for t in text)
    within = copy.deepcopy(result)
    within["new"]["probe_results"][0]["accuracy"] -= (TOLERANCES["probe_accuracy_pp"] - 0.1) / 100
    assert check.report(within)[1]
    flipped = copy.deepcopy(result)
    # (not an INLP row: its verdict is held to the reference rounds as well, tests/test_remeasure_rules.py)
    edit = next(
        r for r in flipped["new"]["intervention_results"] if r.get("significant") is not None and r["method"] != "inlp"
    )
    edit["significant"] = not edit["significant"]
    text, ok = check.report(flipped)
    assert not ok and "CHANGED" in text[-2]
    gone = copy.deepcopy(result)
    gone["new"]["patching_results"].pop()
    lines, _ = check.compare(gone["old"], gone["new"])
    assert next(x for x in lines if x.table == "patching").missing == 1


def test_the_command_exits_2_on_a_run_the_bundle_does_not_have(measured, capsys):
    _, bundle, run_id = measured
    assert check.main([str(bundle), str(run_id + 1000)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no run with id {run_id + 1000}" in err


def _inlp(rank: int, refit: float) -> dict:
    return {"eval_length": 40, "method": "inlp", "layer": 1, "rank_removed": rank, "refit_acc": refit}


def test_an_inlp_rank_is_read_against_the_interval_of_the_two_exact_implementations():
    """INLP's rank and its refit: inside the interval today's rounds and the reference rounds span
    on the same rows counts as no difference; outside, the distance to the nearer end counts."""
    old = {"probe_results": [], "patching_results": [], "intervention_results": [_inlp(108, 0.60)]}
    new = {"probe_results": [], "patching_results": [], "intervention_results": [_inlp(122, 0.52)]}
    lines = {x.table: x for x in check.compare(old, new)[0]}
    assert not lines["interventions"].ok and not lines["refits"].ok  # 14/122 and 8 pp apart alone
    inside = {x.table: x for x in check.compare(old, new, [_inlp(106, 0.61)])[0]}
    assert inside["interventions"].value == 0.0 and inside["refits"].value == 0.0
    near = {x.table: x for x in check.compare(old, new, [_inlp(112, 0.596)])[0]}
    assert abs(near["interventions"].value - 4 / 112) < 1e-12 and near["interventions"].ok
    assert abs(near["refits"].value - 0.4) < 1e-9 and near["refits"].ok
    far = {x.table: x for x in check.compare(old, new, [_inlp(130, 0.40)])[0]}
    assert far["interventions"].value == lines["interventions"].value  # the nearer end is today's
