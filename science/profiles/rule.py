"""The profile-class rule's thresholds and how a class holds when they move
(docs/SCIENCE.md#profiles, #class-stability; the definitions: :mod:`science.profiles`)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from itertools import product
from typing import Any

PEAK_FRACTION = 0.95
EARLY_DEPTH = 0.5
LATE_SHARE = 0.5
MIN_GAIN = 0.02
FLAT_MARGIN = 0.05
NOT_ABOVE_CONTROL = "not above control"
CLASSES = ("early", "late", "gradual", "flat", NOT_ABOVE_CONTROL)


@dataclass(frozen=True)
class ClassRule:
    """The thresholds of :func:`profile_class` (fractions; depth on the normalised axis)."""

    peak_fraction: float = PEAK_FRACTION
    early_depth: float = EARLY_DEPTH
    late_share: float = LATE_SHARE
    flat_margin: float = FLAT_MARGIN


DEFAULT_RULE = ClassRule()
# how far each threshold is moved for class stability (docs/SCIENCE.md#class-stability)
STABILITY_MARGINS: dict[str, float] = {
    "peak_fraction": 0.02,
    "early_depth": 0.125,
    "late_share": 0.1,
    "flat_margin": 0.02,
}


def rules_within_margin(
    margins: Mapping[str, float] = STABILITY_MARGINS, base: ClassRule = DEFAULT_RULE
) -> list[ClassRule]:
    """Every rule with each threshold at its value − margin, its value, or + margin (3⁴ = 81)."""
    return list(_rules_within(tuple(sorted(margins.items())), base))


@functools.lru_cache(maxsize=64)
def _rules_within(margins: tuple[tuple[str, float], ...], base: ClassRule) -> tuple[ClassRule, ...]:
    """:func:`rules_within_margin`, made once per (margins, base): every class stability asks."""
    by_name = dict(margins)
    names = [f.name for f in fields(ClassRule)]
    steps = [(-by_name.get(n, 0.0), 0.0, by_name.get(n, 0.0)) for n in names]
    return tuple(replace(base, **{n: getattr(base, n) + d for n, d in zip(names, ds)}) for ds in product(*steps))


def class_stability(
    classify: Callable[[ClassRule], str], margins: Mapping[str, float] = STABILITY_MARGINS
) -> dict[str, Any]:
    """How a class holds when the rule's thresholds move by ``margins``.

    Args:
        classify: rule → class (e.g. ``lambda r: profile_class(curve, base, r)``).

    Returns:
        ``{class (under the default rule), agree (rules giving it), of (rules tried),
        stable (agree == of), classes: {class: count}}``.
    """
    default = classify(DEFAULT_RULE)
    got = Counter(classify(r) for r in rules_within_margin(margins))
    total = sum(got.values())
    return {"class": default, "agree": got[default], "of": total, "stable": got[default] == total, "classes": dict(got)}
