"""An open-loop window's schedule: seeded, the same for every arm, gaps as the process draws."""

from __future__ import annotations

import itertools

import pytest
from scipy import stats

from kbgen.kb.models import Arrivals
from kbgen.run.arrivals import offsets


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_the_first_request_is_due_at_once_and_the_rest_in_order() -> None:
    times = offsets(None, 4.0, 100, 0, 0)
    assert len(times) == 100 and times[0] == 0.0
    assert all(gap > 0 for gap in gaps(times))
    assert offsets(None, 4.0, 0, 0, 0) == [] and offsets(None, 4.0, 1, 0, 0) == [0.0]


def test_a_round_and_level_get_the_same_times_every_time_and_others_their_own() -> None:
    again = offsets(Arrivals(seed=3), 2.0, 50, 1, 2)
    assert again == offsets(Arrivals(seed=3), 2.0, 50, 1, 2)  # the same for every arm
    assert again != offsets(Arrivals(seed=3), 2.0, 50, 2, 2)  # another round
    assert again != offsets(Arrivals(seed=3), 2.0, 50, 1, 3)  # another load level
    assert again != offsets(Arrivals(seed=4), 2.0, 50, 1, 2)  # another seed


def test_poisson_gaps_are_exponential_at_the_rate() -> None:
    drawn = gaps(offsets(None, 8.0, 5001, 0, 0))
    assert stats.kstest(drawn, stats.expon(scale=1 / 8.0).cdf).pvalue > 0.001
    assert stats.kstest(drawn, stats.expon(scale=1 / 6.0).cdf).pvalue < 1e-6  # it can tell


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_burstiness_as_shape_and_the_rate_as_mean(burstiness: float) -> None:
    process = Arrivals(process="gamma", burstiness=burstiness)
    drawn = gaps(offsets(process, 8.0, 5001, 0, 0))
    shape = stats.gamma(burstiness, scale=1 / (8.0 * burstiness))
    assert stats.kstest(drawn, shape.cdf).pvalue > 0.001
    spread = stats.variation(drawn)  # a gamma's coefficient of variation is 1/sqrt(shape)
    assert spread == pytest.approx(burstiness**-0.5, rel=0.1)


def test_gamma_of_burstiness_one_is_the_poisson_process() -> None:
    poisson = offsets(Arrivals(process="poisson", seed=5), 3.0, 200, 0, 1)
    assert offsets(Arrivals(process="gamma", burstiness=1.0, seed=5), 3.0, 200, 0, 1) == poisson


def test_constant_arrivals_are_evenly_spaced() -> None:
    times = offsets(Arrivals(process="constant"), 5.0, 11, 0, 0)
    assert times == pytest.approx([i / 5.0 for i in range(11)])


def test_burstiness_belongs_to_the_gamma_process() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="gamma process's shape"):
        Arrivals(process="poisson", burstiness=0.5)
