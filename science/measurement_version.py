"""Which measurement code made a stored number, and how far two versions may disagree.

A result row (``probe_results``, ``intervention_results``, ``patching_results``) records the
``measurement_version`` it was made with. The version changes when the measurement's solvers or
its capture change what they compute at solver tolerance, not when only speed changes:

- 1: everything measured before versions were recorded (every row stored before migration 0010,
  and every row of a bundle exported before it);
- 2: the incremental INLP (covariance and projection updated per round, warm-started), the
  fused L-BFGS probe objective (probes, refits, INLP rounds, controls), the memory-bounded,
  chunked capture, no fit-size doubling for an INLP whose round budget is spent, doubled fit
  sets that extend the set they double (LEACE accumulating its statistics), INLP's chance line
  at the best constant guess plus its sampling noise, and the removal line stored with each
  edit row (``refit_line``) on the same footing (definitions, not solver changes: their rows
  are compared, not held to the tolerances, docs/SCIENCE.md#inlp-chance-line, #removal-line).
- 3: the probe objective's sums over rows made in one pass by the compiled CPU kernel
  (:mod:`science.probes.onepass`) for fits on float32 CPU rows with 2–8 classes (other fits run
  version 2's torch objective).
- 4: a measurement's float32 forward passes on an AMD CPU with AVX-512 multiply their large
  linear layers through oneDNN instead of MKL (:mod:`models_store.cpu_matmul`: the same products
  at float rounding, ~1.7× faster there); on other CPUs, on a GPU and at bf16, version 3's bits.

Within one version a measurement is bit-identical run to run (same code, same seeds, same
device). Across versions the numbers may move within :data:`TOLERANCES`; every verdict and
every class stays the same (docs/SCIENCE.md#measurement-versions).
``checks/remeasure_agreement.py`` measures a bundle's run again and holds it to them.
"""

from __future__ import annotations

MEASUREMENT_VERSION = 4

# Largest difference allowed between two measurement versions of the same run, per quantity:
# accuracies in percentage points (0..100 scale), the INLP rank as a fraction of the larger one.
TOLERANCES = {
    "probe_accuracy_pp": 0.5,  # probe_results.accuracy (and its control, balanced accuracy)
    "refit_accuracy_pp": 1.0,  # intervention_results.refit_acc: a probe refit on edited states
    "inlp_rank_rel": 0.10,  # intervention_results.rank_removed of INLP rows
}
