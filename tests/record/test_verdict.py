"""The verdict rules, on constructed effects and on constructed samples."""

from __future__ import annotations

import numpy as np
import pytest

from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import stats, verdict
from kbgen.record.stats import Effect

FASTER = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)
LOWER_TTFT = Hypothesis(
    statement="lower TTFT", primary_metric="ttft_ms", direction="decrease", minimum_effect=0.05
)


def effect(
    low: float | None, high: float | None, n: int = 20, point: float | None = None
) -> Effect:
    mid = point if point is not None else ((low or 0) + (high or 0)) / 2
    return Effect(mid, low, high, n, n)


@pytest.mark.parametrize(
    ("hypothesis", "eff", "guards", "outcome", "why"),
    [
        (FASTER, effect(0.15, 0.25), verdict.Guards(), Outcome.SUPPORTED, ""),
        (FASTER, effect(0.051, 0.09), verdict.Guards(), Outcome.SUPPORTED, ""),
        (FASTER, effect(-0.30, -0.20), verdict.Guards(), Outcome.REFUTED, ""),
        (FASTER, effect(-0.01, 0.02), verdict.Guards(), Outcome.REFUTED, ""),  # gain ruled out
        (FASTER, effect(-0.02, 0.12), verdict.Guards(), Outcome.INCONCLUSIVE, ""),
        (FASTER, effect(0.03, 0.40), verdict.Guards(), Outcome.INCONCLUSIVE, ""),
        (LOWER_TTFT, effect(-0.25, -0.15), verdict.Guards(), Outcome.SUPPORTED, ""),
        (LOWER_TTFT, effect(0.10, 0.20), verdict.Guards(), Outcome.REFUTED, ""),
        (FASTER, effect(0.15, 0.25, n=4), verdict.Guards(), Outcome.INCONCLUSIVE, "fewer than 5"),
        (
            FASTER,
            effect(0.15, 0.25),
            verdict.Guards(failure_rate=0.1),
            Outcome.INCONCLUSIVE,
            "10.0% of requests failed",
        ),
        (
            FASTER,
            effect(0.15, 0.25),
            verdict.Guards(tokens_match=False),
            Outcome.INCONCLUSIVE,
            "token counts disagree",
        ),
        (
            FASTER,
            effect(None, None, point=0.2),
            verdict.Guards(),
            Outcome.INCONCLUSIVE,
            "no confidence interval",
        ),
        (
            FASTER,
            effect(None, None, n=1, point=0.2),
            verdict.Guards(allow_summary_only=True),
            Outcome.SUPPORTED,
            "",
        ),
    ],
    ids=[
        "supported",
        "supported-just",
        "refuted-slower",
        "refuted-no-gain",
        "straddles",
        "straddles-wide",
        "decrease-supported",
        "decrease-refuted",
        "too-few",
        "failures",
        "token-mismatch",
        "no-ci",
        "summary-only-allowed",
    ],
)
def test_class_outcome(
    hypothesis: Hypothesis, eff: Effect, guards: verdict.Guards, outcome: Outcome, why: str
) -> None:
    got, reason = verdict.class_outcome(eff, hypothesis, guards)
    assert got == outcome
    assert why in reason if why else reason == ""


def test_no_difference_is_inconclusive_not_supported() -> None:
    rng = np.random.default_rng(11)
    base, same = rng.normal(60, 6, 8), rng.normal(60, 6, 8)  # one population, realistic noise
    eff = stats.relative_effect(list(base), list(same))
    outcome, _ = verdict.class_outcome(eff, FASTER, verdict.Guards())
    assert outcome == Outcome.INCONCLUSIVE


def test_a_known_slowdown_is_refuted_and_a_known_gain_supported() -> None:
    rng = np.random.default_rng(12)
    base = rng.normal(60, 3, 20)
    slower = stats.relative_effect(list(base), list(rng.normal(45, 3, 20)))  # -25%
    faster = stats.relative_effect(list(base), list(rng.normal(75, 3, 20)))  # +25%
    assert verdict.class_outcome(slower, FASTER, verdict.Guards())[0] == Outcome.REFUTED
    assert verdict.class_outcome(faster, FASTER, verdict.Guards())[0] == Outcome.SUPPORTED


@pytest.mark.parametrize(
    ("outcomes", "overall"),
    [
        ([Outcome.REFUTED] * 3, Outcome.REFUTED),
        ([Outcome.SUPPORTED, Outcome.SUPPORTED], Outcome.SUPPORTED),
        ([Outcome.SUPPORTED, Outcome.REFUTED], Outcome.INCONCLUSIVE),
        ([], Outcome.INCONCLUSIVE),
    ],
)
def test_overall(outcomes: list[Outcome], overall: Outcome) -> None:
    assert verdict.overall(outcomes) == overall


def test_rule_text_states_the_thresholds() -> None:
    text = verdict.rule_text(FASTER, 0.95)
    assert "+5%" in text and "95% BCa bootstrap" in text and "fewer than 5 samples" in text
    assert "lies below -5%" in verdict.rule_text(LOWER_TTFT, 0.95)
