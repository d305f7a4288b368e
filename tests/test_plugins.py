"""Plugins through entry points: a throwaway package, put on ``sys.path`` with
its ``.dist-info`` (so ``importlib.metadata`` sees its entry points, as after ``pip install``),
adds a task, a family and an intervention method; they appear in ``layerscope suite --help``,
``GET /api/meta``, the jobs form, and a smoke run trains, probes, edits (with the plugin's
method) and patches the plugin family on the plugin task. Teardown removes it everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import select

from layerscope_core import plugins
from layerscope_core.registry import family_names, meta

ROOT = Path(__file__).resolve().parents[1]
FAMILY, TASK, METHOD = "plug_gru", "plug_parity", "plug_random_direction"

PLUGIN = textwrap.dedent(f'''
    """A throwaway layerscope plugin (tests/test_plugins.py)."""
    import torch

    from layerscope_core.registry import FamilySpec
    from science.interventions import Edit
    from science.tasks.parity import ParityTask

    FAMILY = FamilySpec("{FAMILY}", "Plugin GRU", "rnn", build="models_store.families:build_gru",
                        count_params="models_store.model_config:gru_params", state_parts=("h",),
                        stateful="models_store.states:rnn_stateful")


    class PlugParity(ParityTask):
        name = "{TASK}"


    class RandomDirection:
        """Project out one random unit direction (a control edit of rank 1)."""

        name = "{METHOD}"

        def fit(self, X, y, n_classes, *, seed=0, **kw):
            g = torch.Generator().manual_seed(seed)
            q = torch.randn(X.shape[1], 1, generator=g, dtype=torch.float64)
            q = q / q.norm()
            return Edit(method=self.name, rank_removed=1, center=X.double().mean(0), left=q, right=q.T.contiguous())


    METHOD = RandomDirection()
''')
ENTRY_POINTS = textwrap.dedent(f"""
    [layerscope.families]
    {FAMILY} = layerscope_plugtest:FAMILY

    [layerscope.tasks]
    {TASK} = layerscope_plugtest:PlugParity

    [layerscope.methods]
    {METHOD} = layerscope_plugtest:METHOD
""")


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    site = tmp_path_factory.mktemp("plugin_site")
    (site / "layerscope_plugtest.py").write_text(PLUGIN)
    info = site / "layerscope_plugtest-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: layerscope-plugtest\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


@pytest.fixture
def plugin(plugin_dir):
    sys.path.insert(0, str(plugin_dir))
    plugins.load_plugins(reload=True)
    try:
        yield plugin_dir
    finally:
        sys.path.remove(str(plugin_dir))
        sys.modules.pop("layerscope_plugtest", None)
        plugins.load_plugins(reload=True)
    assert FAMILY not in family_names() and TASK not in meta()["tasks"] and METHOD not in meta()["methods"]


def test_registry_and_params_see_the_plugin(plugin):
    from worker.job_params import MeasureParams, TrainParams

    body = meta()
    assert FAMILY in [f["name"] for f in body["families"]]
    assert body["tasks"][-1] == TASK and body["methods"][-1] == METHOD
    p = TrainParams(family=FAMILY, task=TASK, measure=MeasureParams(methods=["mean", METHOD]))
    assert p.measure.methods == ["mean", METHOD]


def test_the_plugin_task_keeps_the_task_contract_and_joins_no_preset(plugin):
    from layerscope_core.registry import STUDY_TASKS, task_spec
    from science.tasks import get_task
    from tests.test_task_contract import assert_task_contract
    from worker.presets import PRESETS

    assert task_spec(TASK).label == TASK  # an entry point naming a class: the name is its label
    assert_task_contract(get_task(TASK), TASK)
    assert TASK not in STUDY_TASKS and all(TASK not in p["tasks"] for p in PRESETS.values())


def test_api_meta_and_the_jobs_form_list_the_plugin(plugin, api):
    from dashboard.pages.jobs import form_fields
    from tests.test_toy_family import _options

    body = api.client.get("/api/meta").json()
    assert FAMILY in [f["name"] for f in body["families"]]
    assert TASK in body["tasks"] and METHOD in body["methods"]
    from dash import html

    form = html.Div(form_fields("suite", body))
    assert FAMILY in _options(form, "families") and TASK in _options(form, "tasks")
    assert METHOD in _options(html.Div(form_fields("intervene", body)), "methods")


def test_cli_suite_help_lists_the_plugin(plugin_dir, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(plugin_dir), str(ROOT)]),
        "LAYERSCOPE_HOME": str(tmp_path),
        "COLUMNS": "200",
    }
    out = subprocess.run(
        [sys.executable, "-m", "backend.cli", "suite", "--help"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert FAMILY in text and TASK in text
    out = subprocess.run(
        [sys.executable, "-m", "backend.cli", "intervene", "--help"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert METHOD in " ".join(out.stdout.split())


def test_smoke_run_of_the_plugin_family_task_and_method(plugin, tmp_path):
    from store.models import InterventionResult, PatchingResult, ProbeResult, Run
    from worker.job_params import MeasureParams, TrainParams
    from worker.pipeline import local_env, train

    env = local_env(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store", device="cpu")
    params = TrainParams(
        family=FAMILY,
        task=TASK,
        n_layers=2,
        d_model=16,
        max_steps=3,
        batch_size=8,
        eval_every=3,
        n_eval_sequences=16,
        train_length=16,
        curriculum_start=None,
        measure=MeasureParams(
            eval_lengths=[16],
            n_probe_sequences=24,
            n_permutations=100,
            n_patch_pairs=4,
            methods=["mean", METHOD],
            patch_eval_length=16,
        ),
    )
    run_id = train(params, env)
    with env.session_factory() as s:
        run = s.get(Run, run_id)
        assert (run.family, run.task, run.status) == (FAMILY, TASK, "complete")
        assert {p.layer for p in s.scalars(select(ProbeResult).where(ProbeResult.run_id == run_id))} == {-1, 0, 1}
        edits = s.scalars(
            select(InterventionResult).where(InterventionResult.run_id == run_id, InterventionResult.method == METHOD)
        ).all()
        assert {e.layer for e in edits} == {0, 1} and all(e.rank_removed == 1 for e in edits)
        sites = {p.site for p in s.scalars(select(PatchingResult).where(PatchingResult.run_id == run_id))}
        assert "state" in sites
