"""benchmarks/study_steps.py: every cell of a bundle with its steps to 99 % or why it stopped."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("study_steps", ROOT / "benchmarks" / "study_steps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(seed, acc, steps, reason, control=None):
    return {
        "task": "parity",
        "family": "mamba",
        "seed": seed,
        "heldout_acc": acc,
        "early_stop_acc": 0.99,
        "steps": steps,
        "train_seconds": steps / 2,
        "stop_reason": reason,
        "best_heldout_acc": acc,
        "best_step": steps,
        "control": control,
        "train_config": {"max_steps": 3000},
    }


def test_cells_give_trained_medians_and_the_others_stop_reasons():
    m = _module()
    rows = m.cell_rows(
        [
            _run(0, 0.995, 800, "trained"),
            _run(1, 0.992, 1000, "trained"),
            _run(2, 0.93, 3000, "budget"),
            _run(0, 0.5, 0, None, control="init"),
        ]
    )
    (row,) = rows
    assert (row["trained"], row["seeds"], row["steps"], row["seconds"], row["budget"]) == (2, 3, 900, 450, 3000)
    assert row["others"] == ["budget (seed 2: best 0.930 at step 3000)"]
    text = m.markdown(rows)
    assert "| parity | mamba | 3,000 | 2/3 | 900 | 450 | budget (seed 2: best 0.930 at step 3000) |" in text


def test_the_shipped_bundle_has_a_row_per_cell():
    m = _module()
    _, tables = m.read_bundle(ROOT / "examples" / "paper.layerscope.zip")
    rows = m.cell_rows(tables["runs"])
    assert len(rows) == 20 and all(r["seeds"] == 3 for r in rows)


def test_rows_of_two_suites_stay_apart_and_name_their_suite():
    """A study and the cells a preset revision superseded (paper-steps-rev1): one row per suite."""
    m = _module()
    old = {**_run(0, 0.8, 6000, "budget"), "suite": "rev1", "train_config": {"max_steps": 6000}}
    new = {**_run(0, 0.995, 9000, "trained"), "suite": "study", "train_config": {"max_steps": 20000}}
    rows = m.cell_rows([old, new])
    assert [(r["suite"], r["budget"], r["trained"]) for r in rows] == [("rev1", 6000, 0), ("study", 20000, 1)]
    text = m.markdown(rows)
    assert "| task | family | suite | step budget |" in text
    assert (
        "| parity | mamba | rev1 | 6,000 | 0/1 |" in text
        and "| parity | mamba | study | 20,000 | 1/1 | 9,000 |" in text
    )
    assert "suite" not in m.markdown(m.cell_rows([new])).splitlines()[0]  # one suite: no column


def test_runs_in_flight_are_read_from_the_bundle_and_listed_in_their_cell(tmp_path) -> None:
    """A bundle written with `export --in-flight` carries runs still training: their cell lists
    them with the step their state was saved at, and a cell of only such runs still has a row."""
    import json
    import zipfile

    m = _module()
    note = {"task": "parity", "family": "mamba", "seed": 2, "suite": "study", "run_config": {"max_steps": 20000}}
    manifest = {
        "suite": "study",
        "in_flight": [{"step": 7300, "files": {"training/h.pt": {}, "training/h.json": {}}}],
    }
    bundle = tmp_path / "b.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        z.writestr("training/h.json", json.dumps(note))
    flying = m.in_flight_runs(bundle)
    assert flying == [
        {"task": "parity", "family": "mamba", "suite": "study", "seed": 2, "step": 7300, "max_steps": 20000}
    ]
    stored = {**_run(0, 0.995, 9000, "trained"), "suite": "study", "train_config": {"max_steps": 20000}}
    (row,) = m.cell_rows([stored], flying)
    assert (row["seeds"], row["trained"], row["budget"]) == (2, 1, 20000)
    assert row["others"] == ["in flight (seed 2 at step 7300)"]
    (only,) = m.cell_rows([], flying)
    assert (only["seeds"], only["trained"], only["steps"]) == (1, 0, None)
