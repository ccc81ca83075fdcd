"""Statistics behind a verdict: samples described (`describe`), and a variant's effect with its CI.

Numbers in, numbers out; no files, no models. The effect of a variant on a metric is the relative
change of its mean against the baseline's (`mean(variant) / mean(baseline) - 1`), with a BCa
bootstrap confidence interval over requests from SciPy. The bootstrap's random generator is
seeded, so recomputing a record from its samples gives the same interval to the last digit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BOOTSTRAP_SEED = 20261129
RESAMPLES = 9999


@dataclass(frozen=True)
class Effect:
    """Relative change of the mean, variant vs baseline, with a confidence interval."""

    effect: float
    ci_low: float | None
    ci_high: float | None
    n_baseline: int
    n_variant: int


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, mean, median, p90, p99 and sample standard deviation (None where undefined)."""
    import numpy as np

    if not values:
        return {"n": 0, "mean": math.nan}
    array = np.asarray(values, dtype=float)
    return {
        "n": int(array.size),
        "mean": float(array.mean()),
        "median": float(np.median(array)),
        "p90": float(np.percentile(array, 90)),
        "p99": float(np.percentile(array, 99)),
        "stdev": float(array.std(ddof=1)) if array.size > 1 else None,
    }


def relative_effect(
    baseline: Sequence[float], variant: Sequence[float], confidence: float = 0.95
) -> Effect:
    """`mean(variant) / mean(baseline) - 1` and its BCa bootstrap CI (None with < 2 samples)."""
    import numpy as np
    from scipy import stats as scipy_stats

    a = np.asarray(baseline, dtype=float)
    b = np.asarray(variant, dtype=float)
    if a.size == 0 or b.size == 0 or a.mean() == 0:
        raise ValueError("an effect needs samples on both sides and a non-zero baseline mean")
    effect = float(b.mean() / a.mean() - 1)
    if a.size < 2 or b.size < 2:
        return Effect(effect, None, None, int(a.size), int(b.size))
    if np.ptp(a) == 0 and np.ptp(b) == 0:  # no spread at all: the interval is the point
        return Effect(effect, effect, effect, int(a.size), int(b.size))

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return np.mean(y, axis=axis) / np.mean(x, axis=axis) - 1

    low = high = math.nan
    for method in ("BCa", "percentile"):  # BCa degenerates on odd data: fall back
        interval = scipy_stats.bootstrap(
            (a, b),
            ratio,
            n_resamples=RESAMPLES,
            confidence_level=confidence,
            method=method,
            vectorized=True,
            random_state=np.random.default_rng(BOOTSTRAP_SEED),
        ).confidence_interval
        low, high = float(interval.low), float(interval.high)
        if not (math.isnan(low) or math.isnan(high)):
            break
    return Effect(effect, low, high, int(a.size), int(b.size))
