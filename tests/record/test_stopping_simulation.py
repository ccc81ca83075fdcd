"""Seeded simulation of runs that stop when decided: do the looks, each at its share of the
error, keep the error, and do they save what they should?

The noise model is test_simulation's (issue 11's): per-prompt spread of the effect 0.15, the
prompts' own speed 0.10, timing noise 0.04 per request, a 14.5% jump of the machine's speed at
a random moment of every run plus 1% jitter per window; arms in ABBA order, each window's
requests shuffled. A run has a budget of 4 rounds of 48 prompts x 2 repeats and looks at each
round's end from the second round on, as the driver does (`bench.driver`: a look inside a
window sees one arm's newest requests and not the other's), and stops at the first decisive
look. bench/perf/decisions.py widens the noise (drift, heavy tails, outliers, sweeps).

Measured when written (200 runs each): at the minimum effect (+5%) the looks at their share
of the error decided 3% of the runs; the fixed design's 95% intervals at every look decided
6%. At three times the minimum (+15%) the runs stopped, in the median, at the second round's
end (50% of the fixed design's requests), and 78.5% were supported, none refuted.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import class_verdict
from kbgen.run.design import Design
from tests.record.test_simulation import EFFECT_SPREAD, JITTER, JUMP, SPEED_SPREAD, TIMING_NOISE

HYPOTHESIS = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)
PROMPTS, ROUNDS, REPEATS, RUNS = 48, 4, 2, 200
Request = tuple[int, int, int, int, int, float]  # round, slot, arm, prompt, place, value


def requests(rng: np.random.Generator, log_effect: float) -> list[Request]:
    """Every request of a full run of the budget, with its window and place in the window."""
    speed = math.log(14) + rng.normal(0, SPEED_SPREAD, PROMPTS)
    gain = log_effect + rng.normal(0, EFFECT_SPREAD, PROMPTS)
    jump_at, jump = rng.uniform(0, 2 * ROUNDS), JUMP * rng.choice([-1.0, 1.0])
    jitter = rng.normal(0, JITTER, 2 * ROUNDS)
    out = []
    for r in range(ROUNDS):
        for slot, arm in enumerate((0, 1) if r % 2 == 0 else (1, 0)):
            window = 2 * r + slot
            for place, q in enumerate(rng.permutation(PROMPTS * REPEATS)):
                p = int(q) % PROMPTS
                level = jitter[window] + (
                    jump if window + place / (PROMPTS * REPEATS) > jump_at else 0
                )
                rate = speed[p] + (gain[p] if arm else 0.0) + level + rng.normal(0, TIMING_NOISE)
                out.append((r, slot, arm, p, place, math.exp(rate)))
    return out


Cells = dict[int, dict[int, list[list[float]]]]


def looked(sent: list[Request], round_: int, done: int) -> tuple[Cells, Cells]:
    """Each arm's cells at a look: every round before `round_`, its first window, and the first
    `done` requests of its second."""
    cells: tuple[Cells, Cells] = ({}, {})
    for r, slot, arm, p, place, value in sent:
        if r < round_ or (r == round_ and (slot == 0 or place < done)):
            cells[arm].setdefault(p, {}).setdefault(r, []).append([value])
    return cells


def stopped(rng: np.random.Generator, log_effect: float, anytime: bool) -> tuple[Outcome, float]:
    """One run: its outcome at the first decisive look (or at the budget's end) and the share
    of the fixed design's requests it had sent by then."""
    sent = requests(rng, log_effect)
    window = PROMPTS * REPEATS
    design = Design(ROUNDS)
    for r in design.looks():  # at each round's end, as the driver looks
        b, v = looked(sent, r, window)
        found = class_verdict.decide(b, v, HYPOTHESIS, design=design if anytime else None)[0]
        if found.outcome != Outcome.INCONCLUSIVE:
            return Outcome(found.outcome), (r + 1) / ROUNDS
    return Outcome.INCONCLUSIVE, 1.0


def runs(log_effect: float, anytime: bool, seed: int) -> list[tuple[Outcome, float]]:
    rng = np.random.default_rng(seed)
    return [stopped(rng, log_effect, anytime) for _ in range(RUNS)]


def decisive(results: list[tuple[Outcome, float]]) -> float:
    return sum(o != Outcome.INCONCLUSIVE for o, _ in results) / len(results)


def test_looks_at_their_share_of_the_error_keep_it() -> None:
    at_minimum = math.log1p(HYPOTHESIS.minimum_effect)
    assert decisive(runs(at_minimum, anytime=True, seed=1)) <= 0.05


def test_a_large_effect_stops_well_before_the_fixed_design() -> None:
    results = runs(math.log1p(3 * HYPOTHESIS.minimum_effect), anytime=True, seed=3)
    assert float(np.median([used for _, used in results])) <= 0.6
    assert sum(o == Outcome.SUPPORTED for o, _ in results) / RUNS >= 0.6
    assert not any(o == Outcome.REFUTED for o, _ in results)


@pytest.mark.parametrize("rounds", [1, 2, 4, 6])
def test_the_error_split_over_the_rounds_sums_to_alpha(rounds: int) -> None:
    design = Design(rounds)
    spent = [design.alpha_at(r, 0.05) for r in range(rounds)]
    assert math.isclose(sum(a or 0.0 for a in spent), 0.05)
    assert (spent[0] is None) == (rounds > 1)  # a longer design never stops on its first round


def test_a_class_whose_arms_share_no_round_is_inconclusive_not_an_error() -> None:
    # a prompt's values in one arm in round 0 only and in the other in round 1 only (the rest
    # unusable, as a request with no decode time has no decode rate)
    baseline = {p: {0: [[10.0]]} for p in range(8)}
    variant = {p: {1: [[20.0]]} for p in range(8)}
    found = class_verdict.decide(baseline, variant, HYPOTHESIS, design=Design(4))[0]
    assert found.outcome == Outcome.INCONCLUSIVE and found.reason is not None
    assert "in one round" in found.reason
