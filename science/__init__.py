"""The science: tasks, training, probes, interventions, activation patching, profiles,
statistics and the study's claims (docs/SCIENCE.md).

Pure functions over models and tensors, usable from a notebook: imports ``layerscope_core``
and ``models_store`` only — never the store, the jobs layer, the API or the dashboard.
"""
