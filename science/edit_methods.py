"""The intervention methods: the contract every method meets (:class:`EditMethod`) and the
built-in ones, each a class (docs/SCIENCE.md#interventions).

A method is an object with ``name``, ``params`` (the keywords of its fit a job may set, each a
:class:`layerscope_core.method_params.MethodParam` with its type, default, bounds and help) and
``fit(X [N, D], y [N], n_classes, **kw) -> Edit``. The built-ins are the classes listed in
:data:`BUILTIN_METHODS`; a plugin's (entry point group ``layerscope.methods``) or a
``registry.register_method``'d one is looked up beside them (:func:`science.methods.get_method`)
and fitted the same way: :func:`science.interventions.fit_edit` checks the inputs and calls
``fit`` — it holds no branch per method. ``fit`` receives X as float ``[N, D]`` with N ≥ 2,
``y`` as int64 ``[N]`` on X's device, the keywords ``seed``, ``probe``, ``probe_kwargs`` and
``ctx`` (each method reads the ones it needs), and its declared parameters by name.

A method may also define ``fit_streamed(fit, n_classes, **kw) -> Edit``, the same fit from rows
on disk (:class:`science.streamed_fit.SpilledFit`: the rows in chunks and their running
statistics), which a memory-bounded measurement calls when the rows do not fit its bound
(docs/SCIENCE.md#memory-bound); every built-in does. A method without it is fitted in memory
(and a bound its rows cannot fit is refused before the measurement starts).

Every edit is ``h' = h − ((h − c) Rᵀ) Lᵀ`` (:class:`science.edits.Edit`) except ``mean``, which
returns ``c`` everywhere. Each method's class documents its definition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from layerscope_core.method_params import MethodParam
from science.context import Context
from science.edits import Edit, probe_span, projection_edit, rank_of
from science.inlp import InlpSetup, inlp_directions, inlp_directions_reference, inlp_rounds
from science.probes import LinearProbe, fit_design, fit_probe
from science.probes.design import Design, standardise_rows
from science.probes.layerwise import best_guess
from science.spill import chunk_rows
from science.stats import CHANCE_Z, chance_line

if TYPE_CHECKING:
    from science.streamed_fit import SpilledFit

__all__ = [
    "BUILTIN_METHODS",
    "DEFAULT_PCA_K",
    "INLP_CHANCE_TOL",
    "INLP_CHANCE_Z",
    "EditMethod",
    "Inlp",
    "Leace",
    "MeanAblation",
    "PcaTopK",
    "ProjectOut",
    "inlp_budget",
]

DEFAULT_PCA_K = 8
INLP_CHANCE_TOL = 0.01  # the least margin (1 pp) INLP's chance line lies above the best constant guess
INLP_CHANCE_Z = CHANCE_Z  # one-sided 1 %: a round "at chance" reads no more than noise above the best guess


def inlp_chance_line(y_dev: Tensor, n_classes: int, chance_tol: float = INLP_CHANCE_TOL) -> float:
    """INLP's stopping line (docs/SCIENCE.md#inlp-chance-line, measurement version 2): a round whose
    held-out accuracy is ≤ this reads nothing a constant guess does not, within sampling noise.

    ``p₀ + max(chance_tol, z·√(p₀(1 − p₀)/n))`` with ``p₀`` the best constant guess on the held-out
    rows (their largest class share), ``n`` their number (``y_dev [n]``) and ``z`` =
    :data:`INLP_CHANCE_Z` (a one-sided binomial test at 1 %, normal approximation). Never under
    ``p₀``, so never under a coin flip on two classes (version 1's line, the held-out share of the
    *training* majority class + 1 pp, was whenever that class was the held-out minority).
    Raises ValueError on an empty ``y_dev``."""
    p0, n = best_guess(y_dev, n_classes)
    if n == 0:
        raise ValueError("inlp_chance_line needs at least one held-out row")
    return chance_line(p0, n, chance_tol, INLP_CHANCE_Z)


def inlp_budget(d_model: int, n_classes: int) -> int:
    """INLP's default round budget: ⌈d_model / max(C − 1, 1)⌉, the rounds needed to remove the
    whole space when each round removes rank C − 1."""
    if d_model < 1 or n_classes < 1:
        raise ValueError(f"d_model and n_classes must be ≥ 1, got {d_model}, {n_classes}")
    return -(-d_model // max(n_classes - 1, 1))


class EditMethod:
    """What a method declares beside its ``fit`` (a plugin's method may subclass this, or carry
    the same attributes; a missing one reads as the default here).

    Attributes:
        name: the method id stored with intervention results (a lower-case identifier).
        params: the keywords of ``fit`` a job may set (``MethodParam``; the measurement passes
            every one, given or its default; a result row's ``k`` column holds the one named ``k``).
        refit_until_removed: the measurement refits it on twice as many sequences, at most
            ``science.measure.MAX_FIT_DOUBLINGS`` times, while a probe refit on its edited
            states still reads the variable (docs/SCIENCE.md#fit-size): for methods meant to
            remove the variable, not for controls.
        rank_chosen_by_fit: the removed rank is what the fit found, not a parameter (INLP's
            rounds): a rank over half the width then marks the removal "not selective" — it is
            closer to mean ablation than to removing one variable (docs/SCIENCE.md#interventions).
        random_control_is_itself: the rank-matched random removal of this edit removes the whole
            width, i.e. is this edit (mean ablation): its drop is read raw, as the ceiling, not
            beyond random removal (docs/SCIENCE.md#random-removal).
        fit_copies: the peak memory of an in-memory ``fit`` on one layer's states ``[n, L, D]``,
            in multiples of those states' bytes, the states included (what the memory bound
            counts for it: docs/SCIENCE.md#memory-bound). Measured (a fresh process's peak,
            float32 states of 40,000-100,000 rows × 384-768): 4.0-4.03 for ``mean``, ``pca_top_k``
            and ``project_out``, 4.41 for INLP, 2.27-2.45 for LEACE (its float64 work a chunk at a time);
            tests/test_fit_copies.py holds each built-in to its declaration.
        accumulates: the fit is a function of running statistics of the rows
            (``new_statistics`` / ``update_statistics`` / ``edit_from_statistics``), so a doubled
            fit set's fit adds the statistics of its new sequences to those of the set it doubles
            instead of reading every row again (docs/SCIENCE.md#fit-size).
    """

    name: ClassVar[str] = ""
    params: ClassVar[tuple[MethodParam, ...]] = ()
    refit_until_removed: ClassVar[bool] = False
    rank_chosen_by_fit: ClassVar[bool] = False
    random_control_is_itself: ClassVar[bool] = False
    fit_copies: ClassVar[float] = 4.5  # measured 4.0-4.03 for mean, pca_top_k, project_out (tests/test_fit_copies.py)
    accumulates: ClassVar[bool] = False

    def fit(self, X: Tensor, y: Tensor, n_classes: int, **kw: Any) -> Edit:
        raise NotImplementedError

    def record_fields(self, edit: Edit) -> dict[str, Any]:
        """Columns of its intervention rows this method fills from its fitted ``edit`` (none here)."""
        return {}

    def more_data_helps(self, edit: Edit) -> bool:
        """Whether fitting ``edit`` again on more sequences could remove what its refit still
        reads (docs/SCIENCE.md#fit-size); True here: the leak is the fit's estimate."""
        return True


def _mean(X: Tensor) -> Tensor:
    """The fitted mean μ ``[D]`` in float64."""
    return X.mean(0, dtype=torch.float64)


class ProjectOut(EditMethod):
    """``project_out``: orthogonal projection (Euclidean, raw feature space) onto the complement
    of the span of the probe's class directions ``W/std`` (:meth:`LinearProbe.class_directions`).

    The softmax is invariant to adding one vector to every row, so only the row *differences*
    matter: the rows are centred (their mean removed) before an SVD, giving rank ≤ C−1 (1 for a
    binary probe). The projection is applied **around the fitted mean** μ:
    ``h' = h − (h−μ) Q Qᵀ``, so the component along the removed span is set to the data mean
    rather than to 0 — the edited states stay near the distribution the next layer saw; a refit
    probe (which has an intercept) is unaffected by this choice. With ``probe=None`` a probe is
    fitted on X (with ``probe_kwargs``).
    """

    name = "project_out"

    def fit(
        self,
        X: Tensor,
        y: Tensor,
        n_classes: int,
        *,
        probe: LinearProbe | None = None,
        probe_kwargs: dict[str, Any] | None = None,
        **_: Any,
    ) -> Edit:
        if probe is None:
            probe = fit_probe(X, y, n_classes, **dict(probe_kwargs or {}))
        return self._edit(probe, _mean(X))

    def fit_streamed(
        self, fit: SpilledFit, n_classes: int, *, probe_kwargs: dict[str, Any] | None = None, **_: Any
    ) -> Edit:
        """:meth:`fit` on rows on disk: the probe fitted on their design (a pass a solver evaluation)."""
        probe = fit_design(standardise_rows(fit.rows), fit.y, n_classes, **dict(probe_kwargs or {}))
        return self._edit(probe, fit.mean)

    def _edit(self, probe: LinearProbe, mu: Tensor) -> Edit:
        info = {"probe_converged": probe.converged, "probe_n_iter": probe.n_iter}
        return projection_edit(self.name, mu, probe_span(probe), info=info)


class Inlp(EditMethod):
    """``inlp``: Iterative Nullspace Projection (Ravfogel et al. 2020, "Null It Out", ACL, §3 / Alg. 1).

    Fit a probe, add its class directions to the removed span, project, refit, … until the
    refit probe's accuracy on a held-out 20% of the rows (split by ``seed``) is at chance —
    ≤ :func:`inlp_chance_line`, the best constant guess plus the larger of ``chance_tol`` and its
    sampling noise — or ``max_rounds`` is reached; the final edit is one orthogonal projection
    onto the complement of the union of all removed directions (their §3.2 intersection of
    nullspaces), applied around the mean as ``project_out``'s. The default budget
    (``max_rounds=None``) is :func:`inlp_budget` of the classes *present* in ``y`` —
    ⌈D / (present − 1)⌉ rounds, enough to remove the whole space, where the probe's noise floor
    leaves nothing to read (a budget from all C classes stopped code_depth, whose windows hold
    4–5 of its 11 depths, at rank ≈ 0.4·D) — so INLP reaches its tolerance unless a smaller
    budget is asked for. A given ``probe`` stands in for the first round's.
    ``info["reached_chance"]`` (stored as ``inlp_converged``), ``info["n_rounds"]`` (projection
    rounds used, stored as ``inlp_rounds``) and the per-round accuracies are kept.

    The rounds are incremental (:func:`science.inlp.inlp_directions`: the rows standardised once,
    the projection, mean and covariance updated per round, each probe warm-started from the last);
    ``Inlp(from_scratch=True)`` runs Alg. 1 as written (:func:`science.inlp.inlp_directions_reference`),
    the reference they agree with within the solver's tolerance.
    """

    name = "inlp"
    rank_chosen_by_fit = True
    params = (
        MethodParam(
            "max_rounds",
            int,
            None,
            "round budget; None: enough rounds to remove the whole width, ⌈d_model / (classes − 1)⌉",
            ge=1,
            le=1000,
            job_field="inlp_max_rounds",
        ),
    )
    refit_until_removed = True
    fit_copies = 5.0  # measured 4.41 (the labelled rows, the design's centred transposed copy, held-out rows)

    def __init__(self, *, from_scratch: bool = False) -> None:
        self.from_scratch = from_scratch  # the reference rounds (science.inlp), for tests and benchmarks

    def fit(
        self,
        X: Tensor,
        y: Tensor,
        n_classes: int,
        *,
        seed: int = 0,
        probe: LinearProbe | None = None,
        max_rounds: int | None = None,
        chance_tol: float = INLP_CHANCE_TOL,
        probe_kwargs: dict[str, Any] | None = None,
        ctx: Context | None = None,
        **_: Any,
    ) -> Edit:
        setup = self._setup(X, y, _mean(X), n_classes, seed, probe, max_rounds, chance_tol, probe_kwargs, ctx)
        out = (inlp_directions_reference if self.from_scratch else inlp_directions)(setup)
        return self._edit(setup, out)

    def fit_streamed(
        self,
        fit: SpilledFit,
        n_classes: int,
        *,
        seed: int = 0,
        probe: LinearProbe | None = None,
        max_rounds: int | None = None,
        chance_tol: float = INLP_CHANCE_TOL,
        probe_kwargs: dict[str, Any] | None = None,
        ctx: Context | None = None,
        **_: Any,
    ) -> Edit:
        """:meth:`fit` on rows on disk: the same split (by row index), the incremental rounds on a
        design of the training rows (:func:`science.inlp.inlp_rounds`), the held-out rows read
        from the file once a round."""
        setup = self._setup(None, fit.y, fit.mean, n_classes, seed, probe, max_rounds, chance_tol, probe_kwargs, ctx)
        dev_mask = torch.zeros(fit.n, dtype=torch.bool)
        dev_mask[setup.dev_idx] = True
        ydev = fit.y[dev_mask]
        dev_rows = fit.rows.selected(dev_mask)
        base = standardise_rows(fit.rows.selected(~dev_mask))

        def accuracy(d: Design, p: LinearProbe) -> float:  # held-out logits through the same projection
            V, b = d.raw_weights(p.W.double()).float(), p.b.float()
            return _chunked_hits(dev_rows.chunks(), ydev, lambda x: (x.sub_(d.centre.float()) @ V.T + b).argmax(-1))

        def first_accuracy(p: LinearProbe) -> float:
            return _chunked_hits(dev_rows.chunks(), ydev, p.predict)

        return self._edit(setup, inlp_rounds(setup, base, fit.y[~dev_mask], accuracy, first_accuracy))

    def _setup(
        self,
        X: Tensor | None,
        y: Tensor,
        mu: Tensor,
        n_classes: int,
        seed: int,
        probe: LinearProbe | None,
        max_rounds: int | None,
        chance_tol: float,
        probe_kwargs: dict[str, Any] | None,
        ctx: Context | None,
    ) -> InlpSetup:
        """The split, majority rate and budget both fits share (``X`` None: rows on disk)."""
        N, D = int(y.shape[0]), int(mu.shape[0])
        if max_rounds is not None and (
            isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 0
        ):
            raise ValueError(
                f"inlp: max_rounds must be a whole number ≥ 0 (0: the first probe only; None: the default "
                f"budget), got {max_rounds!r}"
            )
        if max_rounds is None:  # from the classes present: each round removes rank ≤ (present − 1)
            max_rounds = inlp_budget(D, int(torch.unique(y).numel()))
        g = torch.Generator().manual_seed(seed)
        perm = torch.randperm(N, generator=g).to(y.device)
        n_dev = max(1, N // 5)
        dev_idx, tr_idx = perm[:n_dev], perm[n_dev:]
        majority = int(torch.bincount(y[tr_idx], minlength=n_classes).argmax())
        return InlpSetup(
            X=X,
            y=y,
            n_classes=n_classes,
            mu=mu,
            tr_idx=tr_idx,
            dev_idx=dev_idx,
            maj_dev=float((y[dev_idx] == majority).double().mean()),
            line=inlp_chance_line(y[dev_idx], n_classes, chance_tol),
            max_rounds=max_rounds,
            chance_tol=chance_tol,
            probe=probe,
            probe_kwargs=dict(probe_kwargs or {}),
            ctx=ctx,
        )

    def _edit(self, setup: InlpSetup, out: Any) -> Edit:
        return projection_edit(
            self.name,
            setup.mu,
            out.Q,
            info={
                "rounds": out.rounds,
                "reached_chance": out.reached,
                "n_rounds": len(out.rounds) - 1,  # projections made
                "max_rounds": setup.max_rounds,
                "dev_majority": setup.maj_dev,
                "chance_line": setup.line,
            },
        )

    def record_fields(self, edit: Edit) -> dict[str, Any]:
        """``inlp_converged`` (reached its tolerance) and ``inlp_rounds`` (projections made), from
        its edit's ``info`` (None where an edit carries neither)."""
        info = edit.info
        return {
            "inlp_converged": bool(info["reached_chance"]) if "reached_chance" in info else None,
            "inlp_rounds": int(info["n_rounds"]) if "n_rounds" in info else None,
        }

    def more_data_helps(self, edit: Edit) -> bool:
        """False when INLP spent its round budget without reaching chance: a fit on more sequences
        stops at the same budget, so the variable its refit reads is the budget's, not the fit
        set's (True when it reached chance, or stopped with rounds left)."""
        info = edit.info
        spent = "max_rounds" in info and int(info.get("n_rounds", 0)) >= int(info["max_rounds"])
        return bool(info.get("reached_chance", True)) or not spent


class Leace(EditMethod):
    """``leace``: LEACE (Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed
    form", §3–4), concept-erasure's ``LeaceFitter`` with its defaults (affine, shrinkage, trace
    constraint) on ``one_hot(y, C)``, fitted in float64. After it no linear classifier beats a
    constant one on the fitting data."""

    name = "leace"
    refit_until_removed = True
    # measured 2.27-2.45 (the states and the caller's labelled rows; float64 work one chunk at a
    # time), 8.0 when the whole matrix went to the fitter at once in float64
    fit_copies = 3.0

    accumulates = True  # its fit is the fitter's running statistics: a doubled fit set adds its new rows

    def fit(self, X: Tensor, y: Tensor, n_classes: int, **_: Any) -> Edit:
        """``X [N, D]``, ``y [N]``: concept-erasure's ``LeaceFitter`` fed the rows in chunks of
        ``science.spill.chunk_rows(D)`` (its ``update``: float64 running mean, covariance and
        cross-covariance), as a streamed fit feeds them, so no float64 copy of every row is made."""
        fitter = self.new_statistics(int(X.shape[1]), n_classes, X.device)
        self.update_statistics(fitter, X, y, n_classes)
        return self.edit_from_statistics(fitter)

    def fit_streamed(self, fit: SpilledFit, n_classes: int, **_: Any) -> Edit:
        """:meth:`fit` from the fitter the rows were fed to as they were spilled (chunked updates)."""
        return self.edit_from_statistics(fit.stats)

    @staticmethod
    def new_statistics(width: int, n_classes: int, device: torch.device | str = "cpu") -> Any:
        """An empty ``LeaceFitter`` (float64) for rows of ``width``: holds ``8·(D² + D·C + D + C)`` bytes."""
        from concept_erasure import LeaceFitter

        return LeaceFitter(width, n_classes, dtype=torch.float64, device=device)

    @staticmethod
    def update_statistics(fitter: Any, X: Tensor, y: Tensor, n_classes: int) -> None:
        """Feed ``X [N, D]`` with labels ``y [N]`` to ``fitter`` a chunk of ``chunk_rows(D)`` rows at a time."""
        step = chunk_rows(int(X.shape[1]))
        for i in range(0, X.shape[0], step):
            fitter.update(X[i : i + step].double(), torch.nn.functional.one_hot(y[i : i + step], n_classes).double())

    def edit_from_statistics(self, fitter: Any) -> Edit:
        """The edit of the eraser of every row ``fitter`` was fed."""
        eraser = fitter.eraser
        left, right = eraser.proj_left.contiguous(), eraser.proj_right.contiguous()
        D = left.shape[0]
        center = eraser.bias if eraser.bias is not None else torch.zeros(D, dtype=torch.float64, device=left.device)
        return Edit(method=self.name, rank_removed=rank_of(left @ right), center=center, left=left, right=right)


class PcaTopK(EditMethod):
    """``pca_top_k``: remove the top-k principal directions of the centred states (eigenvectors of
    the covariance), around the mean; default ``k`` = :data:`DEFAULT_PCA_K` (8). Not label-aware:
    a control for how much damage removing *any* k high-variance directions does.
    ``info["variance_removed"]`` is the fraction of the total variance along them.

    Raises:
        ValueError: ``k`` is not an int in 1..D.
    """

    name = "pca_top_k"
    params = (
        MethodParam(
            "k",
            int,
            DEFAULT_PCA_K,
            "principal directions removed",
            ge=1,
            le=4096,
            width_bound=True,
            job_field="pca_k",
        ),
    )

    def fit(self, X: Tensor, y: Tensor, n_classes: int, *, k: int | None = DEFAULT_PCA_K, **_: Any) -> Edit:
        N, D = X.shape
        kk = self._k(k, D)
        mu = _mean(X)
        Xc = X - mu.to(X.dtype)
        return self._edit(mu, (Xc.T @ Xc).double() / max(N - 1, 1), kk)

    def fit_streamed(self, fit: SpilledFit, n_classes: int, *, k: int | None = DEFAULT_PCA_K, **_: Any) -> Edit:
        """:meth:`fit` from the running mean and covariance of the rows (float64, chunked updates)."""
        mu = fit.mean
        return self._edit(mu, fit.covariance(), self._k(k, int(mu.shape[0])))

    @staticmethod
    def _k(k: int | None, D: int) -> int:
        kk = DEFAULT_PCA_K if k is None else k
        if isinstance(kk, bool) or not isinstance(kk, int) or kk < 1 or kk > D:
            raise ValueError(f"pca_top_k: k must be an int in 1..{D}, got {k!r}")
        return kk

    def _edit(self, mu: Tensor, cov: Tensor, kk: int) -> Edit:
        evals, evecs = torch.linalg.eigh(cov)  # ascending
        Q = evecs[:, -kk:].flip(-1).contiguous()
        frac = float(evals[-kk:].sum() / evals.clamp_min(0).sum().clamp_min(1e-300))
        return projection_edit(self.name, mu, Q, k=kk, info={"variance_removed": frac})


class MeanAblation(EditMethod):
    """``mean``: whole-layer mean ablation, every state replaced by the fitted mean μ (a ceiling;
    rank D). Its ``Edit`` has no ``left``/``right``."""

    name = "mean"
    random_control_is_itself = True

    def fit(self, X: Tensor, y: Tensor, n_classes: int, **_: Any) -> Edit:
        return Edit(method=self.name, rank_removed=int(X.shape[1]), center=_mean(X))

    def fit_streamed(self, fit: SpilledFit, n_classes: int, **_: Any) -> Edit:
        """:meth:`fit` from the rows' running mean (float64)."""
        mu = fit.mean
        return Edit(method=self.name, rank_removed=int(mu.shape[0]), center=mu)


def _chunked_hits(chunks: Any, y: Tensor, predict: Any) -> float:
    """Share (0..1) of ``y [N]`` that ``predict(chunk [m, D]) -> [m]`` gets right, chunk by chunk."""
    hits, start = 0, 0
    for x in chunks:
        m = int(x.shape[0])
        hits += int((predict(x) == y[start : start + m]).sum())
        start += m
    return hits / max(start, 1)


# The built-in methods, in the registry's canonical order (layerscope_core.registry.METHODS
# holds their names for the layers that do not import science; a test keeps the two equal).
BUILTIN_METHODS: tuple[type[EditMethod], ...] = (ProjectOut, Inlp, Leace, PcaTopK, MeanAblation)
