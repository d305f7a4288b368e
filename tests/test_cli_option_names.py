"""A CLI validation error names the option the user typed, not the params' field path: a fresh
user read ``n_probe_sequences`` where they had typed ``--n-sequences`` and ``eval_lengths.0``
where they had typed ``--eval-length`` (backend/cli/validation.py)."""

from __future__ import annotations

import re

import pytest
import typer

from backend.cli.entry import app
from tests.cli_one_line import assert_one_line_error
from worker.job_params import PARAMS_BY_KIND

# the command that builds each params model from its options
COMMAND_OF = {"ProbeParams": "probe", "InterveneParams": "intervene", "PatchParams": "patch", "SuiteParams": "suite"}


@pytest.mark.parametrize(
    ("args", "said", "field"),
    [
        (["probe", "1", "--eval-length", "5000"], "--eval-length (1st value): Input should be less", "eval_lengths"),
        (["probe", "1", "--eval-length", "40", "--eval-length", "1"], "--eval-length (2nd value): ", "eval_lengths"),
        (["probe", "1", "--n-sequences", "200000"], "--n-sequences: Input should be less", "n_probe_sequences"),
        (["intervene", "1", "--layer", "2", "--layer", "3", "--layer", "9999"], "--layer (3rd value): ", "layers"),
        (["intervene", "1", "--eval-length", "1"], "--eval-length (1st value): ", "eval_lengths"),
        (["patch", "1", "--site", "bogus"], "--site (1st value): Input should be 'resid_pre'", "sites"),
        (["patch", "1", "--stride", "5000"], "--stride: Input should be less", "stride"),
        (["suite", "--preset", "smoke", "--seed", "1", "--seed", "3000000000"], "--seed (2nd value): ", "seeds"),
        (["suite", "--preset", "smoke", "--max-steps", "20000000"], "--max-steps: ", "max_steps"),
        # a model-level message that starts with a field's name: the option instead, no "Value error, "
        (
            ["suite", "--preset", "smoke", "--rebuild-weights", "--force"],
            "--rebuild-weights: not with force",
            "rebuild_weights",
        ),
    ],
)
@pytest.mark.usefixtures("cli_home")
def test_a_validation_error_names_the_option_typed(args, said, field) -> None:
    line = assert_one_line_error(args, said, rc=2)
    assert not re.search(rf"(?<![-\w]){field}\b", line) and "Value error" not in line, line


def test_every_named_option_is_the_commands_own() -> None:
    """The table cannot rot: each field is the model's, each option one its command has."""
    from backend.cli.validation import OPTION_OF

    root = typer.main.get_command(app)
    for model, options in OPTION_OF.items():
        fields = PARAMS_BY_KIND[COMMAND_OF[model]].model_fields
        command = root.commands[COMMAND_OF[model]]  # type: ignore[attr-defined]  # the app is a group
        opts = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for field, option in options.items():
            assert field in fields, (model, field)
            assert option in opts, (model, option)


@pytest.mark.parametrize(
    ("n", "word"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (111, "111th"),
    ],
)
def test_ordinal(n, word) -> None:
    from backend.cli.validation import ordinal

    assert ordinal(n) == word


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["suite", "--preset", "smoke", "--family", "grux"], "Invalid value for '--family': 'grux' is not one of"),
        (["suite", "--preset", "smokey"], "Invalid value for '--preset': 'smokey' is not one of 'smoke'"),
    ],
)
def test_an_option_checked_by_a_validator_says_so_without_pydantics_prefix(args, said) -> None:
    line = assert_one_line_error(args, said, rc=2)
    assert "Value error" not in line


@pytest.mark.usefixtures("cli_home")
def test_intervene_sets_inlps_round_budget_by_its_own_option(monkeypatch) -> None:
    import backend.cli.remeasure as remeasure

    seen = {}
    monkeypatch.setattr(remeasure, "_measured_with", lambda run_id, fields: {})
    monkeypatch.setattr(remeasure, "_run_on_stored", lambda kind, params, run_id, device: seen.update(p=params))
    remeasure.intervene(
        run_id=1, method=None, layer=None, eval_length=None, pca_k=None, inlp_max_rounds=7, param=None,
        conv1d=True, n_permutations=None, device=None, precision=remeasure.C.PrecisionChoice.fp32,
    )  # fmt: skip
    assert seen["p"].inlp_max_rounds == 7
