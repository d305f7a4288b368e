"""The ``layerscope suite`` command that makes a given run again — the command that resumes its
training state where it was killed or where a bundle took it (docs/SCIENCE.md#resuming-training).

A run's config hash is made of all its settings; a suite makes them from its preset and the
suite's overrides (``--max-steps``, ``--max-seconds``). The same suite command with other
overrides makes another run, which trains afresh and leaves the state unused. The command is
found by expanding each preset for the run's cell and seed and keeping the one whose run, with
the overrides the run's settings differ in, has the run's config hash.
"""

from __future__ import annotations

import shlex
from typing import Any

from worker.job_params import SuiteParams, TrainParams

__all__ = ["OVERRIDES", "suite_command"]

# the suite settings (``SuiteParams``) that override a preset's run settings of the same name
OVERRIDES = ("max_steps", "max_seconds")


def suite_command(params: TrainParams) -> dict[str, Any] | None:
    """How a suite makes run ``params`` again: ``{"preset", "overrides", "command"}`` —
    ``overrides``: the suite overrides it was made with (``{"max_steps": 150}``, ``{}`` none);
    ``command``: the ``layerscope suite`` line for its suite, cell and seed (one line, shell-quoted).
    None: no preset makes it (a lone train job, a suite outside the presets, a preset changed since)."""
    from layerscope_core.registry import PRESETS

    if not params.suite:
        return None
    want = params.run_config()
    given = (False, True) if params.pretrained or params.from_config else (False,)
    for preset in sorted(PRESETS, key=lambda p: p != params.suite):  # the preset named like the suite first
        for named in given:  # a preset's own model (pretrained preset), else the model named on the line
            made = _made(params, preset, {}, named)
            if made is None:
                continue
            have = made[1].run_config()
            differs = {k for k in set(have) | set(want) if have.get(k) != want.get(k)}
            overrides = {k: want.get(k) for k in sorted(differs)}
            if not differs <= set(OVERRIDES) or None in overrides.values():  # no option unsets one
                continue
            again = _made(params, preset, overrides, named)
            if again is not None and again[1].run_hash() == params.run_hash():
                return {"preset": preset, "overrides": overrides, "command": _command(again[0], params)}
    return None


def _suite_params(params: TrainParams, preset: str, overrides: dict[str, Any], named: bool) -> SuiteParams:
    """The suite of ``preset`` narrowed to run ``params``' cell and seed, with ``overrides``;
    ``named``: its transformers model named (``--pretrained`` / ``--from-config``; its family is
    found from its blocks), else filtered by family from the preset's models."""
    return SuiteParams(
        preset=preset,
        name=params.suite if params.suite != preset else None,
        families=None if named else [params.family],
        tasks=[params.task],
        seeds=[params.seed],
        pretrained=[params.pretrained] if named and params.pretrained else None,
        from_config=[params.from_config] if named and params.from_config else None,
        controls="only" if params.control else None,
        **overrides,
    )


def _made(
    params: TrainParams, preset: str, overrides: dict[str, Any], named: bool
) -> tuple[SuiteParams, TrainParams] | None:
    """The suite of :func:`_suite_params` and its run named as ``params`` is; None when it makes
    none (the preset has not that family or task, an override out of a suite's range, or a
    model's config not in the local cache)."""
    from worker.presets import expand_suite

    try:
        suite = _suite_params(params, preset, overrides, named)
        jobs = expand_suite(suite, local_files_only=True)
    except ValueError:  # the suite's refusal (pydantic's ValidationError is one): this preset makes no such run
        return None
    run = next((j for j in jobs if j.name == params.name), None)
    return None if run is None else (suite, run)


def _command(s: SuiteParams, params: TrainParams) -> str:
    """The ``layerscope suite`` line of suite ``s`` (the CLI's option of each ``SuiteParams`` field
    set) for run ``params``."""
    words = ["layerscope", "suite", "--preset", s.preset]
    words += ["--name", s.name] if s.name else []
    words += [w for f in s.families or [] for w in ("--family", f)]
    words += ["--task", params.task, "--seed", str(params.seed)]
    words += [w for p in s.pretrained or [] for w in ("--pretrained", p)]
    words += [w for c in s.from_config or [] for w in ("--from-config", c)]
    words += ["--only-controls"] if s.controls == "only" else []
    words += [
        w for k in OVERRIDES if getattr(s, k) is not None for w in (f"--{k.replace('_', '-')}", str(getattr(s, k)))
    ]
    return shlex.join(words)
