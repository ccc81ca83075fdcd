"""Statistics against known answers."""

from __future__ import annotations

import numpy as np
import pytest

from kbgen.record import stats


def test_describe_known_values() -> None:
    got = stats.describe([1.0, 2.0, 3.0, 4.0])
    assert got["n"] == 4 and got["mean"] == 2.5 and got["median"] == 2.5
    assert got["p90"] == pytest.approx(3.7) and got["p99"] == pytest.approx(3.97)
    assert got["stdev"] == pytest.approx(1.2909944487)


def test_describe_one_value_has_no_stdev() -> None:
    assert stats.describe([5.0]) == {
        "n": 1,
        "mean": 5.0,
        "median": 5.0,
        "p90": 5.0,
        "p99": 5.0,
        "stdev": None,
    }


def test_a_scaled_copy_has_exactly_that_effect() -> None:
    base = np.random.default_rng(1).normal(100, 5, 40)
    effect = stats.relative_effect(list(base), list(base * 1.2))
    assert effect.effect == pytest.approx(0.2)
    assert effect.ci_low is not None and effect.ci_high is not None
    assert effect.ci_low < 0.2 < effect.ci_high and effect.ci_high - effect.ci_low < 0.08


def test_intervals_cover_the_truth_about_as_often_as_they_claim() -> None:
    rng = np.random.default_rng(20261129)
    covered = 0
    for _ in range(100):
        base, variant = rng.normal(50, 5, 15), rng.normal(55, 5, 15)  # true effect +10%
        effect = stats.relative_effect(list(base), list(variant))
        assert effect.ci_low is not None and effect.ci_high is not None
        covered += effect.ci_low <= 0.1 <= effect.ci_high
    assert 88 <= covered <= 100  # nominal 95%; BCa at n=15 runs a little under


def test_recomputation_gives_the_same_interval() -> None:
    rng = np.random.default_rng(3)
    a, b = list(rng.normal(10, 1, 12)), list(rng.normal(11, 1, 12))
    assert stats.relative_effect(a, b) == stats.relative_effect(a, b)


def test_degenerate_inputs() -> None:
    assert stats.relative_effect([10.0], [12.0]).ci_low is None  # one sample: no interval
    flat = stats.relative_effect([10.0] * 5, [12.0] * 5)
    assert flat.ci_low == flat.ci_high == pytest.approx(0.2)
    with pytest.raises(ValueError, match="non-zero baseline"):
        stats.relative_effect([0.0, 0.0], [1.0, 2.0])


def test_paired_effect_is_the_geometric_mean_of_the_ratios() -> None:
    got = stats.paired_effect([10.0, 20.0, 40.0], [12.5, 16.0, 40.0])  # +25%, -20%, 0%
    assert got.effect == pytest.approx(0.0) and got.units == 3
    assert got.per_unit == pytest.approx((0.25, -0.2, 0.0)) and got.interval == "student-t"


@pytest.mark.parametrize("units", [5, 12])
def test_paired_effect_covers_at_small_samples(units: int) -> None:
    """Nominal 95% at 5 and 12 prompts: a plain bootstrap would cover about 88-92% here."""
    rng = np.random.default_rng(8)
    covered = 0
    for _ in range(200):
        base = rng.lognormal(2.6, 0.1, units)
        variant = base * np.exp(np.log(1.1) + rng.normal(0, 0.15, units))
        got = stats.paired_effect(list(base), list(variant))
        assert got.interval == "student-t" and got.ci_low is not None and got.ci_high is not None
        covered += got.ci_low <= 0.1 <= got.ci_high
    assert 182 <= covered <= 198


def test_skewness_of_one_prompt_far_from_the_rest() -> None:
    assert stats.skewness([0.0, 0.01, -0.01, 0.02, 0.0, 0.01, -0.02, 0.6]) == pytest.approx(
        2.81, abs=0.01
    )
    assert stats.skewness([1.0, 1.0, 1.0]) is None and stats.skewness([1.0, 2.0]) is None


def test_paired_effect_degenerate_inputs() -> None:
    assert stats.paired_effect([10.0], [12.0]).ci_low is None
    flat = stats.paired_effect([10.0, 20.0], [12.0, 24.0])
    assert flat.ci_low == flat.ci_high == pytest.approx(0.2)
    with pytest.raises(ValueError, match="positive"):
        stats.paired_effect([0.0, 1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    ("spread", "distance", "needed"),
    [
        (0.15, 0.05, 38),  # t(37) * 0.15 / sqrt(38) = 0.0493; at 37: 0.05001
        (0.15, 0.0, None),
        (None, 0.05, None),
        (0.0, 0.05, 2),
    ],
)
def test_units_needed(spread: float | None, distance: float, needed: int | None) -> None:
    assert stats.units_needed(spread, distance) == needed


@pytest.mark.parametrize("q", [0.0, 0.5, 0.99, 1.0])
def test_a_drawn_quantile_is_numpy_s_of_the_values_repeated(q: float) -> None:
    """Each request counted as often as its unit is drawn: the quantile is the one of the values
    so repeated (and none where no unit is drawn)."""
    rng = np.random.default_rng(3)
    values = rng.lognormal(0, 0.5, 30)
    of = rng.integers(0, 6, 30)
    counts = rng.integers(0, 3, (50, 6)).astype(float)
    counts[1:, 0] += 1  # a unit drawn in every resample but the first
    counts[0] = 0
    got = stats._drawn_quantile(counts, list(of), list(values), q)
    assert np.isnan(got[0])
    for row, value in zip(counts[1:], got[1:], strict=True):
        repeated = np.repeat(values, row[of].astype(int))
        assert value == pytest.approx(np.percentile(repeated, q * 100))


def test_dominance_shares_of_a_point_better_on_both_and_of_a_twin() -> None:
    """Twice the tokens per second at half the latency, on every unit: dominates always; a point
    against its own copy: never (better in one is needed)."""
    strata = [0, 0, 0, 1, 1, 1]
    tokens, seconds = [10.0] * 6, [1.0, 2.0, 1.5, 1.0, 3.0, 2.0]
    units, lags = list(range(6)), [5.0, 6.0, 7.0, 5.0, 9.0, 6.0]
    shares = stats.dominance_shares(
        strata,
        [(1.0, tokens, seconds), (2.0, tokens, seconds), (1.0, tokens, seconds)],
        [(units, lags), (units, [x / 2 for x in lags]), (units, lags)],
        0.99,
        0.95,
        resamples=500,
    )
    assert shares[1][0] == 1.0 and shares[1][2] == 1.0 and shares[0][1] == 0.0
    assert shares[0][2] == shares[2][0] == 0.0


@pytest.mark.parametrize(("p", "df"), [(0.975, 1), (0.975, 15), (0.95, 2.0), (0.999, 400)])
def test_quantiles_are_scipy_stats_own(p: float, df: float) -> None:
    from scipy import stats as scipy_stats

    assert stats.t_quantile(p, df) == float(scipy_stats.t.ppf(p, df))
    assert stats.normal_quantile(p) == float(scipy_stats.norm.ppf(p))
