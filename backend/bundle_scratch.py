"""A bundle's run in a scratch database, ready to be rebuilt and measured again: what
``checks/remeasure_agreement.py`` and the benchmarks that re-read a shipped run
(``benchmarks/inlp_stop_rounds.py``, ``benchmarks/leace_fit_draws.py``) start from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class NoSuchRun(LookupError):
    """The bundle has no run with that id, or no preset makes the run (so it cannot be rebuilt)."""


@dataclass
class ScratchRun:
    """``bundle``'s run ``row`` (its runs-table row) imported into ``env``'s scratch database as
    run ``run_id``; ``params``: the suite job that rebuilds its weights
    (``worker.run_weights.rebuild_params``); ``tables``: the bundle's tables by name."""

    env: Any
    run_id: int
    params: Any
    row: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]]


def scratch_run(bundle: Path, run_id: int, work: Path, *, device: str = "cpu") -> ScratchRun:
    """Import ``bundle`` into a SQLite database and model store under ``work`` and find its run
    ``run_id`` (the id in the bundle's runs table) there.

    Raises:
        NoSuchRun: no such run in the bundle, or no preset makes its config.
        backend.bundle.BundleError: the file is not a layerscope bundle.
    """
    from sqlalchemy import select

    from backend.bundle import read_bundle
    from backend.bundle_import import import_bundle
    from store.models import Run
    from worker.pipeline import local_env
    from worker.run_weights import rebuild_params

    _manifest, tables = read_bundle(bundle)
    row = next((r for r in tables["runs"] if r.get("id") == run_id), None)
    if row is None:
        ids = ", ".join(str(r.get("id")) for r in tables["runs"][:20])
        raise NoSuchRun(f"{bundle}: no run with id {run_id} in its runs table (ids: {ids} …)")
    env = local_env(f"sqlite:///{work / 'scratch.db'}", work / "store", device=device)
    with env.session_factory() as s:
        import_bundle(s, bundle, store_dir=env.store_dir, source=bundle.name)
        run = s.execute(select(Run).where(Run.config_hash == row["config_hash"])).scalar_one()
        params = rebuild_params(run)
        if params is None:
            raise NoSuchRun(f"run {run_id} ({run.name}): no preset makes its config, so it cannot be rebuilt")
        here = run.id
    return ScratchRun(env=env, run_id=here, params=params, row=row, tables=tables)
