"""Seeded simulation of whole experiments: does the class rule decide as often as it should?

The parameters come from the committed samples (records/2026-11-29-ngram-vs-baseline.samples
.jsonl.gz, read with record.evidence.read_samples):

- prompt-to-prompt spread of the effect: SD 0.15 of the per-prompt log ratios (coding's ratios
  were +2%, -28%, -13%: SD 0.17; math's and explanatory's 0.05 and 0.18);
- prompts' own speed: SD 0.10 (log) between the prompts' baseline rates (12.5 to 17 tok/s);
- timing noise: SD 0.04 (log) per request (repeat-to-repeat spread within an arm, the drift
  removed);
- round drift: the machine's speed jumps by 14.5% (the committed baseline's jump between its
  repeats), up or down, at a uniformly random moment of every experiment, plus 1% per-window
  jitter; arms run in ABBA order, prompts shuffled within each window.

"Standard error of the prompt-level estimate": the standard deviation of the per-class
log-effect over the 400 simulated experiments at the null (prompt spread, timing noise and the
drift the interleaving leaves), measured, not assumed. Measured when written (Student-t
intervals, each order of the arms weighted half; decisive at the minimum effect / supported at
+3 SE): 8 prompts 2.5%, 24 prompts 3.5% / 81.75%. bench/perf/decisions.py widens the noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kbgen.kb.models import ClassVerdict, Hypothesis, Outcome
from kbgen.record import class_verdict

HYPOTHESIS = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)
EFFECT_SPREAD, SPEED_SPREAD, TIMING_NOISE = 0.15, 0.10, 0.04
JUMP, JITTER = 0.145, 0.01
EXPERIMENTS = 400


def experiment(
    rng: np.random.Generator,
    prompts: int,
    log_effect: float,
    rounds: int = 2,
    repeats: int = 2,
) -> ClassVerdict:
    """One class of one simulated experiment, decided by the production rule."""
    speed = math.log(14) + rng.normal(0, SPEED_SPREAD, prompts)
    gain = log_effect + rng.normal(0, EFFECT_SPREAD, prompts)
    jump_at, jump = rng.uniform(0, 2 * rounds), JUMP * rng.choice([-1.0, 1.0])
    jitter = rng.normal(0, JITTER, 2 * rounds)
    cells: tuple[dict[int, dict[int, list[list[float]]]], ...] = ({}, {})
    for r in range(rounds):
        for slot, arm in enumerate((0, 1) if r % 2 == 0 else (1, 0)):
            window = 2 * r + slot
            position = rng.permutation(prompts) / prompts
            for p in range(prompts):
                for k in range(repeats):
                    at = window + position[p] + k / (repeats * prompts)
                    level = jitter[window] + (jump if at > jump_at else 0.0)
                    rate = speed[p] + (gain[p] if arm else 0.0) + level
                    value = math.exp(rate + rng.normal(0, TIMING_NOISE))
                    cells[arm].setdefault(p, {}).setdefault(r, []).append([value])
    return class_verdict.decide(cells[0], cells[1], HYPOTHESIS)[0]


def simulate(prompts: int, log_effect: float, seed: int) -> list[ClassVerdict]:
    rng = np.random.default_rng(seed)
    return [experiment(rng, prompts, log_effect) for _ in range(EXPERIMENTS)]


def share(verdicts: list[ClassVerdict], *outcomes: Outcome) -> float:
    return sum(v.outcome in outcomes for v in verdicts) / len(verdicts)


NULL = math.log1p(HYPOTHESIS.minimum_effect)


@pytest.mark.parametrize("prompts", [8, 24])
def test_at_the_minimum_effect_verdicts_are_rarely_decisive(prompts: int) -> None:
    verdicts = simulate(prompts, NULL, seed=prompts)
    assert share(verdicts, Outcome.SUPPORTED, Outcome.REFUTED) <= 0.07


def test_an_effect_three_standard_errors_beyond_is_supported() -> None:
    at_null = simulate(24, NULL, seed=24)
    standard_error = float(np.std([math.log1p(v.effect) for v in at_null]))
    verdicts = simulate(24, NULL + 3 * standard_error, seed=2)
    assert share(verdicts, Outcome.SUPPORTED) >= 0.80


def test_three_prompts_are_never_decisive() -> None:
    rng = np.random.default_rng(3)
    for log_effect in (NULL, math.log(1.5), math.log(0.5)):  # even a large effect either way
        verdicts = [experiment(rng, 3, log_effect) for _ in range(50)]
        assert share(verdicts, Outcome.SUPPORTED, Outcome.REFUTED) == 0
        assert all(len(v.per_unit) == 3 and v.reason for v in verdicts)
