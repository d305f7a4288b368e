"""The ``layerscope`` command line (typer): one module per command group.

    layerscope demo                      # the README's main command              (demo.py)
    layerscope serve [--host --port]     # API + dashboard                        (serve.py)
    layerscope worker [--device --name --concurrency N]  # consume jobs (N slots on one device)  (jobs.py)
    layerscope suite --preset quick [--submit]  # run a suite in this process, or enqueue it  (training.py)
    layerscope suite --preset paper --force    # re-run runs already stored (default: skip them)
    layerscope export --suite NAME -o FILE     # a suite's results bundle (one portable file)  (bundles.py)
    layerscope import FILE                     # load a bundle; rows already present are kept
    layerscope report BUNDLE -o docs/RESULTS.md  # the study's claims next to this reproduction's
    layerscope probe|intervene|patch RUN_ID                                        (remeasure.py)
    layerscope runs|suite delete|tag|note|move … # read, annotate, delete, move stored results (runs.py)
    layerscope runs rebuild-weights RUN_ID     # its weights again, checked against its record, results kept (rebuild.py)
    layerscope jobs list|cancel|logs                                               (jobs.py)
    layerscope views list|delete               # saved dashboard views             (views.py)
    layerscope token create --name NAME                                            (admin.py)
    layerscope db upgrade | rekey-artifacts                                        (admin.py)
    layerscope task add FILE --name NAME      # your own labelled tokens (JSONL / Parquet) as a task  (tasks.py)
    layerscope export-model RUN_ID -o DIR      # a run's model as a folder transformers' AutoModel loads  (models.py)
    layerscope capture RUN_ID --site blocks.1.resid_post -o FILE   # named activations (run_with_cache)

``entry.py`` builds the app and holds :func:`main`; ``supervision.py`` the signals, exit handlers
and child worker processes; ``common.py`` what the command modules share. A command module never
imports this package's ``__init__`` (``python -m backend.cli`` runs ``__main__.py``).

Wrong arguments, an unknown preset or run id give a one-line message and a non-zero exit.
"""

from backend.cli.entry import app, main

__all__ = ["app", "main"]
