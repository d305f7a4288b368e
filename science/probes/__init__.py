"""Linear probes (docs/SCIENCE.md#probes): the names notebooks and the rest of the code use,
``science.probes.fit_probe`` and the others below. One job per module:

- :mod:`~science.probes.linear`: :class:`LinearProbe` and :func:`fit_probe` — multinomial
  logistic regression on standardised features (sklearn's ``LogisticRegression(C=1)`` objective,
  with a noise floor), :data:`NOISE_RTOL`;
- :mod:`~science.probes.design`: :class:`Design`, the standardised features computed once and
  shared by a probe, its control-task twin and INLP's rounds (:func:`standardised`,
  :func:`fit_design`);
- :mod:`~science.probes.solver`: the full-batch L-BFGS in whitened coordinates behind it and its
  convergence test (``max|∇| ≤ tol``, sklearn's ``gtol``);
- :mod:`~science.probes.splits`: :func:`split_sequences` (by sequence, stratified by
  :func:`sequence_strata`) and the control task's :func:`control_labels` (:data:`CONTROL_BUCKET`);
- :mod:`~science.probes.layerwise`: :func:`probe_layers` (every layer of one run at one length)
  → :class:`ProbeReport` s, with :func:`type_accuracies`;
- :mod:`~science.probes.reference`: :func:`sklearn_probe`, scikit-learn's own fit, to compare.

Device-agnostic: everything runs where the input tensors are (CPU or CUDA).
"""

from science.probes.design import Design
from science.probes.layerwise import ProbeReport, probe_layers, type_accuracies
from science.probes.linear import NOISE_RTOL, LinearProbe, fit_design, fit_probe, standardised
from science.probes.reference import sklearn_probe
from science.probes.splits import CONTROL_BUCKET, control_labels, sequence_strata, split_sequences

__all__ = [
    "NOISE_RTOL",
    "CONTROL_BUCKET",
    "LinearProbe",
    "ProbeReport",
    "fit_probe",
    "fit_design",
    "standardised",
    "Design",
    "probe_layers",
    "split_sequences",
    "sequence_strata",
    "control_labels",
    "type_accuracies",
    "sklearn_probe",
]
