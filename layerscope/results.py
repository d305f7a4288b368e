"""Results as pandas DataFrames, for a notebook: ``layerscope.results.open(...)``.

    import layerscope.results as lr

    res = lr.open("examples/paper.layerscope.zip")   # a results bundle (read into a temp SQLite)
    res = lr.open("sqlite:///~/.layerscope/layerscope.db")   # or any results DB URL
    runs = res.runs(suite="paper", task="dyck", trained=True)
    probes = res.probes(suite="paper", task="dyck", eval_length=[40])
    claims = res.claims(suite="paper")

Every method takes the filters of the REST API (``GET /api/runs``, ``/api/curves`` ...):
``suite``, ``family``, ``task``, ``seed``, ``trained`` (True: runs whose held-out accuracy
reached their early-stop criterion; False: the others; None: all) and, for result tables,
``eval_length``. A filter takes one value or a list. The frames are read through the same
queries the API serves (``backend.api.queries`` / ``backend.api.across_seeds``), so the numbers
are the dashboard's.

Layers: ``layer`` is ``-1`` for the embedding output (``layer_name`` "emb") and ``0..n-1`` for
block ℓ's residual-stream output; ``depth`` is ``(layer + 1) / n_layers`` (0 = emb, 1 = last
block): docs/SCIENCE.md#layers. Accuracies are fractions (0..1); ``delta_pp`` is in percentage
points.

Probe and edit directions are not stored in the results database (only the accuracies and
statistics they produced); refit them from a run's weights with ``science.probes.probe_layers``
/ ``science.interventions.fit_edit`` (README "From a notebook").
"""

from __future__ import annotations

import builtins
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, get_args

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from backend.api import across_seeds, queries
from store.models import InterventionResult, PatchingResult, ProbeResult, Run, RunCurve, SuiteNote

__all__ = ["Results", "open"]

Many = str | int | Iterable[str] | Iterable[int] | None


def _many(v: Many) -> list[Any] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [v]
    if isinstance(v, int | numbers.Integral):  # numpy integers too (a DataFrame cell)
        return [int(v)]
    return [int(x) if isinstance(x, numbers.Integral) else x for x in v]


def open(source: str | Path) -> Results:
    """Open a results DB URL (``sqlite:///…``, ``postgresql+psycopg://…``) or a bundle file.

    A path ending in ``.zip`` (or any existing file that is not a SQLite DB) is read as a results
    bundle into a temporary SQLite database (removed on :meth:`Results.close` or at exit); a URL
    is opened as it is, migrated to the newest schema first (as ``layerscope serve`` does).

    A SQLite URL must name an existing file (``~`` is the home folder): a mistyped path is
    refused rather than opened as a new, empty database whose every frame is empty.

    Raises:
        backend.bundle.BundleError: the file is not a layerscope bundle (or is missing).
        FileNotFoundError: a SQLite URL names no existing file.
        backend.core.startup.StartupError: the database cannot be opened.
    """
    text = str(source)
    if "://" not in text:
        from backend.bundle_db import open_bundle

        db = open_bundle(Path(text).expanduser())
        return Results(db.factory, source=text, closer=db.close, default_suite=db.suite)
    from backend.core.startup import check_db_url, explain
    from store.migrate import init_db
    from store.session import make_engine, make_sessionmaker

    check_db_url(text)
    text = _existing_sqlite(text)
    try:
        init_db(text)
    except Exception as exc:  # one line naming the URL
        raise explain(exc, text) from exc
    engine = make_engine(text)
    return Results(make_sessionmaker(engine), source=text, closer=engine.dispose)


def _existing_sqlite(url: str) -> str:
    """``url`` with ``~`` in a SQLite path expanded; FileNotFoundError when the file is not there.
    Other databases (and in-memory SQLite) are returned as they are."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    db = u.database or ""
    if u.get_backend_name() != "sqlite" or db in ("", ":memory:") or db.startswith("file:"):
        return url
    path = Path(db).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"{url}: no such file ({path.absolute()}); lr.open reads an existing results database and "
            "never creates one (check the path; `layerscope db upgrade` or a suite makes one)"
        )
    return u.set(database=str(path)).render_as_string(hide_password=False)


class Results:
    """Read-only DataFrame views of one results database. Use as a context manager, or call
    :meth:`close` (a bundle's temporary database is then removed)."""

    def __init__(
        self, factory: sessionmaker[Session], *, source: str = "", closer: Any = None, default_suite: str | None = None
    ) -> None:
        self._factory = factory
        self.source = source
        self._closer = closer
        self.default_suite = default_suite  # a bundle's suite; None for a DB

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<layerscope results {self.source!r}>"

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
            self._closer = None

    # ------------------------------------------------------------------ helpers

    def _filter(
        self,
        suite: Many,
        family: Many,
        task: Many,
        seed: Many = None,
        trained: bool | None = None,
        run_id: Many = None,
        search: str | None = None,
        controls: queries.ControlsMode = "exclude",
    ) -> queries.RunFilter:
        """The API's filters, checked as the API checks them: an unknown task or family is a
        ``ValueError`` naming the allowed ones, an unknown suite a ``LookupError`` naming the
        suites here (a typo must not read as "no results"), a ``controls`` other than exclude /
        include / only a ``ValueError``."""
        if controls not in get_args(queries.ControlsMode):
            raise ValueError(f"controls {controls!r} unknown; one of {', '.join(get_args(queries.ControlsMode))}")
        with self._session() as s:
            queries.require_known_names(task=_many(task), family=_many(family), session=s)
            if suite is not None:
                queries.require_suites(s, _many(suite))
        return queries.RunFilter(
            task=_many(task),
            family=_many(family),
            seed=_many(seed),
            suite=_many(suite),
            run_id=_many(run_id),
            trained=trained,
            search=search,
            controls=controls,
        )

    def _session(self) -> Session:
        return self._factory()

    # ------------------------------------------------------------------ runs

    def suites(self) -> pd.DataFrame:
        """One row per suite: ``suite``, ``n_runs``, ``n_trained``, ``tags``, ``notes``."""
        with self._session() as s:
            rows = s.execute(select(Run.suite, Run.heldout_acc, Run.early_stop_acc)).all()
            notes = {n.name: n for n in s.execute(select(SuiteNote)).scalars()}
        from science.trained import is_trained

        out: dict[str, dict[str, Any]] = {}
        for suite, acc, crit in rows:
            d = out.setdefault(suite or "", {"suite": suite, "n_runs": 0, "n_trained": 0})
            d["n_runs"] += 1
            d["n_trained"] += bool(is_trained(acc, crit))
        for d in out.values():
            n = notes.get(d["suite"])
            d["tags"], d["notes"] = (n.tags or [], n.notes) if n else ([], None)
        return pd.DataFrame(builtins.list(out.values()), columns=["suite", "n_runs", "n_trained", "tags", "notes"])

    def runs(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        seed: Many = None,
        trained: bool | None = None,
        search: str | None = None,
        loss_curve: bool = False,
        controls: queries.ControlsMode = "exclude",
    ) -> pd.DataFrame:
        """One row per run (``GET /api/runs``'s columns): ``id``, ``name``, ``suite``, ``family``,
        ``task``, ``seed``, ``n_layers``, ``d_model``, ``n_params``, ``steps``, ``train_seconds``,
        ``heldout_acc`` (0..1) and ``early_stop_acc``, ``trained`` (bool), ``behaviour``
        ({eval length: {token_acc, last_acc, n}}), configs, ``tags``, ``notes``, ``made_on`` …
        ``search``: a substring of name, tags, notes, family, task or suite (case-insensitive).
        ``loss_curve=True`` adds the ``loss_curve`` column (a list of {step, loss, heldout_token_acc}).
        ``controls``: "exclude" (default) the random-init control runs, "only" them, or "include" them
        (column ``control``: "init"; docs/SCIENCE.md#controls)."""
        from science.trained import is_trained

        flt = self._filter(suite, family, task, seed, trained, search=search, controls=controls)
        with self._session() as s:
            items, _ = queries.list_runs(s, flt, None)
            if loss_curve and items:
                curves: dict[int, Any] = dict(
                    s.execute(
                        select(RunCurve.run_id, RunCurve.loss_curve).where(
                            RunCurve.run_id.in_([r["id"] for r in items])
                        )
                    ).all()
                )
                for r in items:
                    r["loss_curve"] = curves.get(r["id"]) or []
        df = pd.DataFrame(items)
        if not df.empty:
            df.insert(
                list(df.columns).index("seed") + 1,
                "trained",
                [bool(is_trained(a, c)) for a, c in zip(df["heldout_acc"], df["early_stop_acc"], strict=True)],
            )
        return df

    def loss_curves(
        self, suite: Many = None, family: Many = None, task: Many = None, seed: Many = None, run_id: Many = None
    ) -> pd.DataFrame:
        """Training curves, tidy: ``run_id``, ``family``, ``task``, ``seed``, ``step``, ``loss``
        (cross-entropy, nats per token), ``heldout_token_acc`` (0..1 or NaN between evaluations)."""
        flt = self._filter(suite, family, task, seed, run_id=run_id)
        with self._session() as s:
            rows = s.execute(
                flt.apply(
                    select(Run.id, Run.family, Run.task, Run.seed, RunCurve.loss_curve).outerjoin(RunCurve)
                ).order_by(Run.id)
            ).all()
        out = [
            {
                "run_id": rid,
                "family": fam,
                "task": task_,
                "seed": sd,
                "step": p.get("step"),
                "loss": p.get("loss"),
                "heldout_token_acc": p.get("heldout_token_acc"),
            }
            for rid, fam, task_, sd, curve in rows
            for p in (curve or [])
        ]
        return pd.DataFrame(out, columns=["run_id", "family", "task", "seed", "step", "loss", "heldout_token_acc"])

    # ------------------------------------------------------------------ per-run results

    def _across(
        self, model: Any, flt: queries.RunFilter, eval_length: Many, method: Many = None, where: Sequence[Any] = ()
    ) -> pd.DataFrame:
        with self._session() as s:
            rows = queries.results_across_runs(s, model, flt, _many(eval_length), _many(method))
        df = pd.DataFrame(rows)
        for col, values in where:
            if not df.empty:
                df = df[df[col].isin(values)].reset_index(drop=True)
        return df

    def probes(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        seed: Many = None,
        trained: bool | None = None,
        eval_length: Many = None,
        run_id: Many = None,
        controls: queries.ControlsMode = "exclude",
    ) -> pd.DataFrame:
        """Linear probes, one row per run × eval length × layer (``controls``: "exclude" the
        random-init control runs, "only" them, or "include" them; docs/SCIENCE.md#controls): ``accuracy`` and
        ``majority_baseline`` (0..1), ``balanced_accuracy``, ``control_accuracy`` and
        ``selectivity`` (Hewitt & Liang control task), ``per_position`` (L accuracies),
        ``n_train`` / ``n_test`` (sequences), ``converged``, with the run's ``task``, ``family``,
        ``seed``, ``suite``, ``n_layers``, ``run_name``, and ``layer_name`` / ``depth``."""
        return self._across(
            ProbeResult, self._filter(suite, family, task, seed, trained, run_id, controls=controls), eval_length
        )

    def curves(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        trained: bool | None = None,
        eval_length: Many = None,
    ) -> pd.DataFrame:
        """Probe accuracy per layer over seeds (``GET /api/curves``): one row per suite × task ×
        family × eval length × layer with ``mean``, ``lo``, ``hi`` (95% t-interval), ``n`` seeds,
        ``seeds``, ``run_ids``, ``majority_baseline``, ``selectivity``, ``depth``."""
        with self._session() as s:
            return pd.DataFrame(
                across_seeds.curves(s, self._filter(suite, family, task, None, trained), _many(eval_length))
            )

    def interventions(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        seed: Many = None,
        trained: bool | None = None,
        eval_length: Many = None,
        method: Many = None,
        run_id: Many = None,
    ) -> pd.DataFrame:
        """Interventions, one row per run × eval length × method × layer: ``method``
        (project_out | inlp | leace | pca_top_k | mean | conv1d_removal; conv1d_removal's
        ``layer`` -2 = every block), ``base_acc`` / ``edited_acc`` (token accuracy, 0..1),
        ``delta_pp`` ((edited - base) × 100), ``drop_rel_chance``, ``refit_acc`` (a probe refit on
        the edited states), ``refit_majority`` and ``refit_line`` (at or under it the edit removed
        the variable; None on measurement version 1 rows), ``rank_removed``, ``p_value`` / ``p_holm`` /
        ``significant`` (paired permutation test over sequences, Holm across layers); ``seed`` is the
        measurement's own seed (the fit's split and draws), the run's training seed is ``seed_1``
        (a run column named like a result column gets ``_1``, as a SQL join names it)."""
        return self._across(
            InterventionResult, self._filter(suite, family, task, seed, trained, run_id), eval_length, method
        )

    def patching(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        seed: Many = None,
        trained: bool | None = None,
        eval_length: Many = None,
        site: Many = None,
        run_id: Many = None,
    ) -> pd.DataFrame:
        """Activation-patching grids, one row per run × eval length × site × layer × position:
        ``site`` (resid_pre | resid_post | state …), ``position`` (0-based), ``recovery`` (mean over
        pairs; 1 = full recovery of the clean logit difference, NaN with ``note`` when too few
        pairs had a usable gap) with ``recovery_lo`` / ``recovery_hi`` (bootstrap 95% CI),
        ``ld_clean`` / ``ld_corrupted`` (logit differences), ``n_pairs``, ``corrupt_position``.
        Pivot one grid with ``df.pivot_table(index="layer", columns="position", values="recovery")``."""
        sites = _many(site)
        return self._across(
            PatchingResult,
            self._filter(suite, family, task, seed, trained, run_id),
            eval_length,
            where=[("site", sites)] if sites else (),
        )

    def profiles(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        trained: bool | None = None,
        eval_length: Many = None,
    ) -> pd.DataFrame:
        """Layer-profile metrics over seeds (``GET /api/profiles``), tidy: one row per suite × task
        × family × eval length × metric (``auc``, ``first_95``, ``late_concentration``,
        ``gain_over_majority`` …) with ``mean``, ``lo``, ``hi`` (95% t-interval), ``n``, and the
        cell's ``profile_class`` (early | gradual | late | flat): docs/SCIENCE.md#profiles."""
        with self._session() as s:
            items = across_seeds.profiles(s, self._filter(suite, family, task, None, trained), _many(eval_length))
        return pd.DataFrame(across_seeds.profiles_tidy(items))

    def profile_seeds(
        self,
        suite: Many = None,
        family: Many = None,
        task: Many = None,
        trained: bool | None = None,
        eval_length: Many = None,
    ) -> pd.DataFrame:
        """Each seed's profile metrics (the rows :meth:`profiles` summarises): ``suite``, ``task``,
        ``family``, ``eval_length``, ``seed``, ``run_id``, ``trained``, ``profile_class``, ``auc`` …"""
        with self._session() as s:
            items = across_seeds.profiles(s, self._filter(suite, family, task, None, trained), _many(eval_length))
        rows = [
            {"suite": p["suite"], "task": p["task"], "family": p["family"], "eval_length": p["eval_length"], **seed_row}
            for p in items
            for seed_row in p["per_seed"]
        ]
        return pd.DataFrame(rows)

    # ------------------------------------------------------------------ claims

    def claims(self, suite: str | None = None) -> pd.DataFrame:
        """The study's six claims evaluated on one suite (``GET /api/claims``): ``id``, ``title``,
        ``verdict`` (supported | contradicted | not enough data), ``detail`` (the rule and what
        decided it), ``numbers`` (a dict: per-cell classes and metrics, tests, runs left out).

        Raises:
            backend.api.across_seeds.MixedSuites: no ``suite`` given and the DB holds several.
        """
        suite = suite or self.default_suite
        with self._session() as s:
            return pd.DataFrame(across_seeds.claims(s, queries.RunFilter(suite=_many(suite))))

    def claim_cells(self, claim_id: int, suite: str | None = None) -> pd.DataFrame:
        """One claim's per-cell numbers, flat: ``task``, ``family``, ``n``, ``seeds``,
        ``profile_class``, ``expected``, ``matches`` and, per metric (``auc``, ``first_95``,
        ``late_concentration`` …), ``<metric>_mean``, ``<metric>_lo``, ``<metric>_hi``.

        Raises:
            KeyError: no claim ``claim_id``, or it reports no cells."""
        claims = self.claims(suite)
        row = claims[claims["id"] == claim_id]
        if row.empty:
            raise KeyError(f"no claim {claim_id}; claims are {', '.join(map(str, claims['id']))}")
        cells = (row.iloc[0]["numbers"] or {}).get("cells")
        if cells is None:
            raise KeyError(f"claim {claim_id} reports no cells")
        flat = []
        for c in cells:
            d = {}
            for k, v in c.items():
                if isinstance(v, dict) and "mean" in v:
                    d.update({f"{k}_{s}": v.get(s) for s in ("mean", "lo", "hi")})
                else:
                    d[k] = v
            flat.append(d)
        return pd.DataFrame(flat)
