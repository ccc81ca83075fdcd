"""Statistics behind a verdict: samples described, and a variant's effect over paired units.

Numbers in, numbers out. The effect is the geometric mean of per-unit ratios, its interval
Student-t's on the units' log ratios (each unit a cluster of requests); why: docs/design.md,
"Statistics".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

BOOTSTRAP_SEED = 20261129
RESAMPLES = 9999
# Values one bootstrap batch may hold: scipy draws every resample at once (resamples x n, and
# n x n for BCa's jackknife), 80 GB for an import of 10^6 requests. Below the limit there is
# one batch, the draw the committed records' intervals were made with, so that each
# recomputes to the last digit.
BATCH_VALUES = 20_000_000


def _batch(values: int, resamples: int = RESAMPLES) -> int | None:
    """scipy's `batch` for `values` resampled values: None (all at once) while that is small."""
    if values * max(resamples, values) <= BATCH_VALUES:
        return None
    return max(1, BATCH_VALUES // values)


Interval = Literal[
    "expanded-percentile", "student-t", "bca", "percentile", "confidence-sequence", "none"
]


@dataclass(frozen=True)
class Effect:
    """Relative change, variant vs baseline, with a confidence interval and how it was made."""

    effect: float
    ci_low: float | None
    ci_high: float | None
    n_baseline: int  # samples (requests, or units when only units are known)
    n_variant: int
    interval: Interval = "none"
    units: int = 0  # paired units the effect is computed over (0: not paired)
    per_unit: tuple[float, ...] = field(default=())  # each unit's effect, in the order given
    spread: float | None = None  # standard deviation of the per-unit log ratios


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


def log_ratios(baseline: Sequence[float], variant: Sequence[float]) -> list[float]:
    """`log(variant / baseline)` per unit, paired by position; units must be positive."""
    if len(baseline) != len(variant):
        raise ValueError("paired units need as many baseline values as variant values")
    if any(b <= 0 for b in baseline) or any(v <= 0 for v in variant):
        raise ValueError("a ratio effect needs positive values on both sides")
    return [math.log(v / b) for b, v in zip(baseline, variant, strict=True)]


def paired_effect(
    baseline: Sequence[float],
    variant: Sequence[float],
    confidence: float = 0.95,
    n_baseline: int | None = None,
    n_variant: int | None = None,
) -> Effect:
    """The geometric mean of the per-unit ratios minus 1, and its Student-t interval.

    `baseline[i]` and `variant[i]` are unit i's values (e.g. a prompt's mean over its requests
    in each arm). `n_baseline` / `n_variant`: the requests behind them (default: the units).
    """
    return log_effect(log_ratios(baseline, variant), confidence, n_baseline, n_variant)


def log_effect(
    logs: Sequence[float],
    confidence: float = 0.95,
    n_baseline: int | None = None,
    n_variant: int | None = None,
) -> Effect:
    """`paired_effect` from the units' log ratios themselves (`log(variant / baseline)` per
    unit, however each unit's was formed)."""
    logs = list(logs)
    if not logs:
        raise ValueError("an effect needs at least one unit with values in both arms")
    n = len(logs)
    center = math.fsum(logs) / n
    per_unit = tuple(math.expm1(x) for x in logs)
    counts = (n if n_baseline is None else n_baseline, n if n_variant is None else n_variant)
    if n < 2:
        return Effect(math.expm1(center), None, None, *counts, "none", n, per_unit)
    spread = math.sqrt(math.fsum((x - center) ** 2 for x in logs) / (n - 1))
    if spread == 0:  # no spread at all: the interval is the point
        value = math.expm1(center)
        return Effect(value, value, value, *counts, "student-t", n, per_unit, 0.0)
    low, high, method = _mean_interval(logs, spread, confidence)
    return Effect(
        math.expm1(center), math.expm1(low), math.expm1(high), *counts, method, n, per_unit, spread
    )


def _mean_interval(
    logs: list[float], spread: float, confidence: float
) -> tuple[float, float, Interval]:
    """Student-t's interval for the mean of `logs` (their sample spread `spread`).

    Not a bootstrap: simulated at the minimum effect (bench/perf/decisions.py), the expanded
    percentile bootstrap over 16 prompts decided 5.4-6.5% of runs where the per-prompt effects
    have Student-t(3) tails, Student-t 3.8-4.5%; under normal effects both kept 5%. Where the
    effects are skewed neither keeps its level at few prompts (the `skew` guard says so);
    Hall's skewness correction, tried, moved a class of 12 prompts, all but one at -30% to
    -68%, to an upper end of +51%: at few prompts the sample skewness is one prompt's.
    """
    n = len(logs)
    t = t_quantile(0.5 + confidence / 2, n - 1)
    center = math.fsum(logs) / n
    half = t * spread / math.sqrt(n)
    return center - half, center + half, "student-t"


def skewness(logs: Sequence[float]) -> float | None:
    """The sample skewness of `logs`, adjusted for its size (None below 3 values or without
    spread)."""
    from scipy import stats as scipy_stats

    if len(logs) < 3 or max(logs) == min(logs):
        return None
    value = float(scipy_stats.skew(logs, bias=False))
    return value if math.isfinite(value) else None


def t_quantile(p: float, df: float) -> float:
    """Student-t's quantile: the function `scipy.stats.t.ppf` calls, from the far lighter
    `scipy.special` (scipy.stats takes a second to import)."""
    from scipy import special

    return float(special.stdtrit(df, p))


def normal_quantile(p: float) -> float:
    """The standard normal's quantile, as `scipy.stats.norm.ppf` computes it (`t_quantile`)."""
    from scipy import special

    return float(special.ndtri(p))


def units_needed(spread: float | None, distance: float, confidence: float = 0.95) -> int | None:
    """About how many units give an interval of half-width `distance` (log scale) at `spread`.

    The smallest n with t(n - 1) * spread / sqrt(n) < distance; None when undefined (no spread
    measured, or no distance: the effect sits on the threshold) or beyond 100,000.
    """
    if spread is None or distance <= 0:
        return None
    if spread == 0:
        return 2
    z = normal_quantile(0.5 + confidence / 2)
    n = max(2, math.ceil((z * spread / distance) ** 2))
    while n <= 100_000:
        if t_quantile(0.5 + confidence / 2, n - 1) * spread / math.sqrt(n) < distance:
            return n
        n += 1
    return None


def relative_effect(
    baseline: Sequence[float], variant: Sequence[float], confidence: float = 0.95
) -> Effect:
    """`mean(variant) / mean(baseline) - 1` over unpaired samples and its BCa bootstrap CI.

    Only for samples that are independent draws each (an import whose requests carry distinct
    prompts that cannot be paired across arms); None interval with < 2 samples.
    """
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
        return Effect(effect, effect, effect, int(a.size), int(b.size), "percentile")

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return np.mean(y, axis=axis) / np.mean(x, axis=axis) - 1

    low = high = math.nan
    used: Interval = "bca"
    for used in ("bca", "percentile"):  # BCa degenerates on odd data: fall back
        interval = scipy_stats.bootstrap(
            (a, b),
            ratio,
            n_resamples=RESAMPLES,
            confidence_level=confidence,
            method="BCa" if used == "bca" else "percentile",
            vectorized=True,
            batch=_batch(int(a.size + b.size)),
            random_state=np.random.default_rng(BOOTSTRAP_SEED),
        ).confidence_interval
        low, high = float(interval.low), float(interval.high)
        if not (math.isnan(low) or math.isnan(high)):
            break
    return Effect(effect, low, high, int(a.size), int(b.size), used)


def best_of(
    classes: Sequence[Sequence[Sequence[float]]], resamples: int = RESAMPLES
) -> tuple[int, float, list[float]]:
    """The best of several arms, resampled: `classes[c][arm][unit]` are values, higher better
    (log values, paired by unit across the arms). An arm's score is the mean over classes of its
    units' mean. Units are drawn with replacement within each class, the same draw for every
    arm (seeded). Returns the top arm of the point scores, the share of resamples it tops, and
    for every arm the share of resamples in which the top arm scores above it."""
    import numpy as np

    rng = np.random.default_rng(BOOTSTRAP_SEED)
    arms = len(classes[0])
    point = np.zeros(arms)
    drawn = np.zeros((arms, resamples))
    for values in classes:
        logs = np.asarray(values, dtype=float)
        picks = rng.integers(0, logs.shape[1], size=(resamples, logs.shape[1]))
        point += logs.mean(axis=1)
        for i in range(arms):  # one arm at a time: resamples x units values at most
            drawn[i] += logs[i][picks].mean(axis=1)
    top = int(np.argmax(point))
    wins = float(np.mean(np.argmax(drawn, axis=0) == top))
    return top, wins, [float(np.mean(drawn[top] > drawn[i])) for i in range(arms)]


def dominance_shares(
    strata: Sequence[int],
    throughput: Sequence[tuple[float, Sequence[float], Sequence[float]]],
    latency: Sequence[tuple[Sequence[int], Sequence[float]]],
    quantile: float,
    confidence: float,
    resamples: int = RESAMPLES,
) -> list[list[float]]:
    """How often each point dominates each other one, over resamples of units, to be read against
    `confidence`.

    Units are drawn with replacement within their stratum (`strata[u]`: unit u's), the same
    draw for every point (seeded). In a resample, point p's throughput is `scale × Σ tokens /
    Σ seconds` over the drawn units (`throughput[p]` = (scale, tokens per unit, seconds per
    unit), a unit counted as often as it is drawn), its latency the `quantile` (linear, as
    numpy's percentile) of its requests' values (`latency[p]` = (each request's unit, its
    value)), each request counted as often as its unit is drawn. Each resample's departure from
    the full sample is widened as the expanded percentile bootstrap widens it (`_mean_interval`),
    by sqrt(n / (n - 1)) × Student-t's quantile at `confidence` over the normal's, n the smallest
    stratum's units: at the units sweeps have, the bare bootstrap's far tails are too short.
    Returns `shares[a][b]`: the share of resamples in which a dominates b (throughput at least
    b's, latency at most b's, better in one); a point without units in a resample dominates
    nothing and is dominated by nothing in it."""
    import numpy as np

    rng = np.random.default_rng(BOOTSTRAP_SEED)
    groups = np.asarray(strata, dtype=int)
    units = groups.size
    counts = np.zeros((resamples + 1, units))
    counts[0] = 1  # the full sample, once each
    smallest = units
    for stratum in sorted(set(strata)):
        members = np.flatnonzero(groups == stratum)
        smallest = min(smallest, members.size)
        picks = members[rng.integers(0, members.size, size=(resamples, members.size))]
        flat = (np.arange(resamples)[:, None] * units + picks).ravel()
        counts[1:] += np.bincount(flat, minlength=resamples * units).reshape(resamples, units)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.array(
            [
                scale * (counts @ np.asarray(tokens)) / (counts @ np.asarray(seconds))
                for scale, tokens, seconds in throughput
            ]
        )
    lags = np.array([_drawn_quantile(counts, of, values, quantile) for of, values in latency])
    widen = 1.0
    if smallest > 1:
        t = t_quantile(confidence, smallest - 1)
        widen = math.sqrt(smallest / (smallest - 1)) * t / normal_quantile(confidence)
    rates = rates[:, :1] + widen * (rates[:, 1:] - rates[:, :1])
    lags = lags[:, :1] + widen * (lags[:, 1:] - lags[:, :1])
    shares = []
    for a in range(len(throughput)):
        row = []
        for b in range(len(throughput)):
            at_least = (rates[a] >= rates[b]) & (lags[a] <= lags[b])
            better = (rates[a] > rates[b]) | (lags[a] < lags[b])
            row.append(0.0 if a == b else float(np.mean(at_least & better)))
        shares.append(row)
    return shares


def _drawn_quantile(counts: Any, of: Sequence[int], values: Sequence[float], q: float) -> Any:
    """Per resample (a row of `counts`: each unit's draws), the `q` quantile of `values`, each
    counted as often as its unit (`of`) is drawn: numpy's linear percentile of the values so
    repeated, without repeating them. NaN where none is drawn."""
    import numpy as np

    order = np.argsort(values, kind="stable")
    ordered = np.asarray(values, dtype=float)[order]
    units = np.asarray(of, dtype=int)[order]
    out = np.full(counts.shape[0], np.nan)
    step = max(1, BATCH_VALUES // max(1, ordered.size))
    for start in range(0, counts.shape[0], step):
        reach = np.cumsum(counts[start : start + step][:, units], axis=1)  # resamples x values
        total = reach[:, -1]
        position = q * (total - 1)
        low = np.floor(position)
        # the value at repeated position k is the first whose running count exceeds k
        at_low = np.minimum((reach <= low[:, None]).sum(axis=1), ordered.size - 1)
        at_high = np.minimum((reach <= low[:, None] + 1).sum(axis=1), ordered.size - 1)
        value = ordered[at_low] + (position - low) * (ordered[at_high] - ordered[at_low])
        out[start : start + step] = np.where(total > 0, value, np.nan)
    return out


def machines_differ(groups: Sequence[Sequence[float]]) -> float:
    """The p-value that the groups' means (each machine's per-prompt log ratios) differ by no
    more than their spread allows: one-way ANOVA (scipy's `f_oneway`); 1.0 where it cannot
    tell (a group of fewer than two values, or no spread within any group)."""
    import warnings

    from scipy import stats as scipy_stats

    if len(groups) < 2 or any(len(g) < 2 for g in groups):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: no spread within the groups
        p = float(scipy_stats.f_oneway(*[list(g) for g in groups]).pvalue)
    return 1.0 if math.isnan(p) else p
