"""``layerscope runs rebuild-weights RUN_ID``: a stored run's weights made again here and checked
against its record, its results kept (``worker.rebuild_check``, docs/SCIENCE.md#rebuilding-weights).

layerscope runs rebuild-weights RUN_ID [--acc-tolerance 0.01] [--loss-tolerance 0.05] [--as-suite NAME] [--device D]
"""

from __future__ import annotations

from typing import Annotated

import typer

from backend.cli import common as C


def rebuild_weights(
    run_id: Annotated[int, typer.Argument(min=1, help="A stored run's id (one without weights here).")],
    acc_tolerance: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Held-out accuracy may differ from the record by this much (0..1).")
    ] = 0.01,
    loss_tolerance: Annotated[
        float, typer.Option(min=0.0, help="The loss may differ from the record by this much (nats) at any step.")
    ] = 0.05,
    as_suite: Annotated[
        str | None,
        typer.Option(help="On disagreement, store the rebuild as a new run of this suite (default: store nothing)."),
    ] = None,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N | auto")] = None,
) -> None:
    """Rebuild a run's weights within its recorded steps and check them against its record (steps,
    loss curve, held-out accuracy). On agreement the weights are attached to the run and every
    stored result is kept (the suite's claims do not change); on disagreement nothing is stored
    and the line says by how much (exit 1), or --as-suite stores the rebuild as a new run."""
    from worker.job_params import RebuildParams

    if device is not None:
        C.check_device(device)
    params = RebuildParams(run_id=run_id, acc_tolerance=acc_tolerance, loss_tolerance=loss_tolerance, as_suite=as_suite)
    settings = C.settings()
    out = C.run_here("rebuild", params, settings, C.session_factory(settings), device)
    check = out["check"]
    steps, (got, recorded) = check["steps"][0], check["heldout_acc"]
    if out["agrees"]:
        typer.echo(
            f"layerscope: run {run_id}: weights rebuilt and attached ({steps} steps; held-out accuracy "
            f"{_acc(got)} rebuilt, {_acc(recorded)} recorded; loss curve apart by at most "
            f"{check['loss_max_diff'] or 0:.4f} nats); its results are kept"
        )
        return
    typer.echo(
        f"layerscope: run {run_id}: the rebuild disagrees with its record ({'; '.join(check['differs'])}); "
        f"stored as run {out['run_id']} of suite {as_suite!r}, run {run_id} and its results unchanged"
    )


def _acc(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"
