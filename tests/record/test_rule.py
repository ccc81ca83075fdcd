"""The rule as data: every guard is stated in the rule a record carries, each check holds exactly
at the threshold its words state (one case on each side), and the hypothesised direction is
worked out once (`toward`, `outcome_of`), checked by properties."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbgen.kb import store
from kbgen.kb.models import Hypothesis, Outcome, Unit
from kbgen.record import rule, rule_words
from kbgen.record.rule import GUARDS, Finding
from kbgen.record.stats import Effect
from kbgen.run.counters import Counters, MachineLoad
from tests.support.properties import SETTINGS
from tests.support.runs import make_sample

ARMS = ("baseline", "ngram")
UNITS: tuple[Unit, ...] = get_args(Unit)


def hypothesis_(
    direction: str = "increase", m: float = 0.05, min_prompts: int = 8, metric: str = "decode_tok_s"
) -> Hypothesis:
    written = Hypothesis.model_validate(
        {
            "statement": "x",
            "primary_metric": metric,
            "direction": direction,
            "minimum_effect": min(m, 0.5),  # 1 or more is written as a percentage: set below
            "min_prompts": min_prompts,
        }
    )
    return written.model_copy(update={"minimum_effect": float(m)})


FASTER = hypothesis_()
LONGER = hypothesis_(metric="e2e_ms")  # a metric that grows with the output's length
LOWER_TTFT = hypothesis_("decrease", metric="ttft_ms")


# --- contexts a check looks at ---------------------------------------------------------------


def case(
    rates: tuple[float, float] = (0.0, 0.0),
    tokens: int = 32,
    agreement: rule.Agreement | None = None,
    hypothesis: Hypothesis = FASTER,
) -> rule.Case:
    rng = random.Random(1)
    samples = {
        arm: [make_sample(arm, "c", p, 0, 12.0, rng, tokens) for p in range(4)] for arm in ARMS
    }
    return rule.Case(hypothesis, ARMS, samples, rates, agreement)


def agreement(prompts: int, agree: int, unknown: int = 0) -> rule.Agreement:
    return rule.Agreement(
        frozenset(range(prompts)),
        frozenset(range(agree)),
        frozenset(range(prompts - unknown, prompts)),
    )


def values(baseline: set[int], variant: set[int], unit: Unit = "prompt") -> rule.Values:
    cells = tuple({u: {0: [[1.0]]} for u in units} for units in (baseline, variant))
    return rule.Values(ARMS, (cells[0], cells[1]), "e2e_ms", unit)


def decision(
    units: int = 8,
    unit: Unit = "prompt",
    drift: rule.Drift | None = None,
    ci: tuple[float, float] = (0.06, 0.2),
    hypothesis: Hypothesis = FASTER,
    orders: int = 2,
    accepted: bool = False,
    per_unit: tuple[float, ...] = (),
) -> rule.Decision:
    effect = Effect(sum(ci) / 2, *ci, 40, 40, units=units, per_unit=per_unit)
    return rule.Decision(
        hypothesis,
        unit,
        effect,
        rule.interval_outcome(effect, hypothesis)[0],
        units,
        drift,
        orders,
        accepted,
    )


# per-prompt effects, skewness +2.8 (one prompt gains much) and about 0
SKEWED = (0.0, 0.01, -0.01, 0.02, 0.0, 0.01, -0.02, 0.9)
SYMMETRIC = (-0.1, -0.05, 0.0, 0.05, 0.1, -0.02, 0.02, 0.0)


def window(cpu: float = 0.0, steal: float = 0.0, match: bool | None = True) -> Counters:
    load = MachineLoad(other_cpu_percent=cpu, steal_percent=steal, load_1m=0.1, cpu_count=2)
    return Counters(generation_tokens=1.0, client_output_tokens=1, tokens_match=match, load=load)


def check(guard: rule.Guard, context: Any) -> Finding:
    """The guard's check on the stage the context belongs to."""
    stage = {
        rule.Case: guard.samples,
        rule.Values: guard.values,
        rule.Decision: guard.effect,
        list: guard.windows,
    }[type(context)]
    assert stage is not None, f"{guard.name} has no check on {type(context).__name__}"
    return stage(context)


# --- each guard on both sides of what its words state ----------------------------------------


@dataclass(frozen=True)
class Side:
    """A guard's check on a context, and what it must find there: the kinds of finding it makes
    (refusal, hold, caveat); none on the clear side of the threshold."""

    guard: rule.Guard
    context: Any
    finds: frozenset[str] = frozenset()


def finds(found: Finding) -> frozenset[str]:
    kinds = {"refusal": found.refusals, "hold": found.hold, "caveat": found.caveats}
    return frozenset(k for k, v in kinds.items() if v)


MAX, TOKENS, CPU, STEAL = (
    rule.MAX_FAILURE_RATE,
    rule.MIN_TOKENS,
    rule.BUSY_OTHER_CPU,
    rule.BUSY_STEAL,
)
HALF = FASTER.minimum_effect / 2
WIDE = rule.Drift(HALF * 1.01, spread=0.5, rounds=2)  # widened by 0.25: any decision would turn
SIDES = {
    "count: 7 of 8 prompts": Side(rule.COUNT, decision(units=7), frozenset({"hold"})),
    "count: 8 of 8 prompts": Side(rule.COUNT, decision(units=8)),
    "count: 1 of 2 rounds": Side(rule.COUNT, decision(units=1, unit="round"), frozenset({"hold"})),
    "count: 2 of 2 rounds": Side(rule.COUNT, decision(units=2, unit="round")),
    "count: 7 requests": Side(rule.COUNT, decision(units=7, unit="request"), frozenset({"hold"})),
    "count: 8 requests": Side(rule.COUNT, decision(units=8, unit="request")),
    "failures: over the limit": Side(
        rule.FAILURES, case(rates=(MAX, MAX + 1e-9)), frozenset({"hold", "caveat"})
    ),
    "failures: at the limit": Side(rule.FAILURES, case(rates=(MAX, MAX))),
    "failures: baseline over": Side(rule.FAILURES, case(rates=(MAX * 2, 0.0)), frozenset({"hold"})),
    "usable: short outputs": Side(rule.USABLE, case(tokens=TOKENS - 1), frozenset({"refusal"})),
    "usable: long enough": Side(rule.USABLE, case(tokens=TOKENS)),
    "usable: nothing paired": Side(rule.USABLE, values({1}, {2}), frozenset({"refusal"})),
    "usable: an arm empty": Side(rule.USABLE, values({1}, set()), frozenset({"refusal"})),
    "usable: one paired": Side(rule.USABLE, values({1, 2}, {2})),
    "tokens: disagree": Side(rule.TOKENS, [window(match=False)], frozenset({"refusal"})),
    "tokens: no window": Side(rule.TOKENS, [], frozenset({"caveat"})),
    "tokens: not cross-checked": Side(rule.TOKENS, [window(), Counters()], frozenset({"caveat"})),
    "tokens: agree": Side(rule.TOKENS, [window()]),
    "busy: other processes": Side(rule.BUSY, [window(cpu=CPU + 0.1)], frozenset({"caveat"})),
    "busy: steal": Side(rule.BUSY, [window(steal=STEAL + 0.1)], frozenset({"caveat"})),
    "busy: at the thresholds": Side(rule.BUSY, [window(cpu=CPU, steal=STEAL)]),
    "drift: beyond half": Side(
        rule.DRIFT, decision(drift=rule.Drift(HALF * 1.01, 0.0, 2)), frozenset({"caveat"})
    ),
    "drift: could change it": Side(rule.DRIFT, decision(drift=WIDE), frozenset({"caveat", "hold"})),
    "drift: at half": Side(rule.DRIFT, decision(drift=rule.Drift(HALF, 0.5, 2))),
    "drift: one round": Side(rule.DRIFT, decision(drift=None)),
    "one round: both orders": Side(rule.ONE_ROUND, decision(orders=2)),
    "one round: one order": Side(rule.ONE_ROUND, decision(orders=1), frozenset({"hold"})),
    "one round: accepted": Side(
        rule.ONE_ROUND, decision(orders=1, accepted=True), frozenset({"caveat"})
    ),
    "one round: rounds as the unit": Side(rule.ONE_ROUND, decision(orders=1, unit="round")),
    "skew: one prompt gains much": Side(
        rule.SKEW, decision(per_unit=SKEWED), frozenset({"caveat"})
    ),
    "skew: symmetric": Side(rule.SKEW, decision(per_unit=SYMMETRIC)),
    "same output: too few agree": Side(
        rule.SAME_OUTPUT,
        case(agreement=agreement(10, 7), hypothesis=LONGER),
        frozenset({"refusal", "hold", "caveat"}),
    ),
    "same output: enough agree": Side(
        rule.SAME_OUTPUT, case(agreement=agreement(10, 8)), frozenset({"caveat"})
    ),
    "same output: per-token metric": Side(
        rule.SAME_OUTPUT,
        case(agreement=agreement(10, 0)),
        frozenset({"caveat"}),
    ),
    "same output: all agree": Side(rule.SAME_OUTPUT, case(agreement=agreement(10, 10))),
    "same output: not compared": Side(rule.SAME_OUTPUT, case(agreement=None)),
}


@pytest.mark.parametrize("side", SIDES.values(), ids=list(SIDES))
def test_each_check_finds_what_its_side_of_the_threshold_says(side: Side) -> None:
    assert finds(check(side.guard, side.context)) == side.finds


def test_every_guard_is_exercised_on_both_sides() -> None:
    clear = {s.guard.name for s in SIDES.values() if not s.finds}
    held = {s.guard.name for s in SIDES.values() if s.finds}
    assert clear == held == {g.name for g in GUARDS}


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("direction", ["increase", "decrease"])
def test_every_guard_is_stated_in_the_rule_a_record_carries(unit: Unit, direction: str) -> None:
    hypothesis = hypothesis_(direction)
    text = rule_words.rule_text(hypothesis, unit)
    assert all(g.text(hypothesis, unit) in text for g in GUARDS)
    assert len({g.name for g in GUARDS}) == len(GUARDS)
    assert all(g.windows or g.samples or g.values or g.effect for g in GUARDS)  # each checks


def test_the_guards_a_written_record_lists_are_the_rule_s() -> None:
    """The golden record's `verdict.guards`, written by `kbgen record`, are the guards' own
    texts in `GUARDS` order: a guard added, dropped, reordered or reworded changes the records."""
    golden = Path(__file__).parents[1] / "golden" / "record__filled-in.yaml"
    data = store.load_fast(golden)  # placeholders for its dates: read as data, not a Record
    hypothesis, unit = Hypothesis.model_validate(data["hypothesis"]), data["verdict"]["unit"]
    assert data["verdict"]["guards"] == [g.text(hypothesis, unit) for g in GUARDS]


@pytest.mark.parametrize("allowed", [True, False])
def test_a_summary_only_rule_states_no_guard(allowed: bool) -> None:
    text = rule_words.summary_rule_text(FASTER, allowed)
    assert not any(g.text(FASTER, "prompt") in text for g in GUARDS)


def test_a_summary_only_rule_says_whether_it_was_allowed() -> None:
    """Only a verdict asked for with --allow-summary-only says it was allowed and how it
    decides; one that was not says every class is left inconclusive."""
    allowed, held = (
        rule_words.summary_rule_text(FASTER, True),
        rule_words.summary_rule_text(FASTER, False),
    )
    assert "allowed explicitly with --allow-summary-only" in allowed
    assert "Supported: the reported change lies above +5%" in allowed
    assert "allowed explicitly" not in held and "Supported:" not in held
    assert "was not allowed (--allow-summary-only), so every class is inconclusive" in held


@SETTINGS
@given(st.integers(min_value=2, max_value=10_000), st.sampled_from(["prompt", "request"]))
def test_the_count_holds_below_the_number_its_words_state(needed: int, unit: Unit) -> None:
    hypothesis = hypothesis_(min_prompts=needed)
    assert f"at least {needed} " in rule.COUNT.text(hypothesis, unit)
    assert check(rule.COUNT, decision(needed - 1, unit, hypothesis=hypothesis)).hold
    assert check(rule.COUNT, decision(needed, unit, hypothesis=hypothesis)) == rule.NOTHING


@SETTINGS
@given(st.integers(min_value=2, max_value=40), st.integers(min_value=1, max_value=40))
def test_same_output_decides_on_agreeing_prompts_from_the_number_its_words_state(
    needed: int, agree: int
) -> None:
    hypothesis = hypothesis_(min_prompts=needed, metric="e2e_ms")
    assert f"if at least {needed} do" in rule.SAME_OUTPUT.text(hypothesis, "prompt")
    shared = agreement(agree + 1, agree)
    found = check(rule.SAME_OUTPUT, case(agreement=shared, hypothesis=hypothesis))
    assert (found.keep == shared.agree) == (agree >= needed)
    assert bool(found.hold) == (agree < needed)


@SETTINGS
@given(st.floats(min_value=0.001, max_value=10))
def test_drift_is_a_caveat_beyond_the_half_its_words_state(m: float) -> None:
    hypothesis = hypothesis_(m=m)
    assert f"more than {m / 2:.1%}" in rule.DRIFT.text(hypothesis, "prompt")
    beyond = rule.Drift(m / 2 * (1 + 1e-9) + 1e-12, 0.0, 2)
    assert check(rule.DRIFT, decision(drift=beyond, hypothesis=hypothesis)).caveats
    at = rule.Drift(m / 2, 0.0, 2)
    assert check(rule.DRIFT, decision(drift=at, hypothesis=hypothesis)) == rule.NOTHING


def test_the_fixed_thresholds_are_the_ones_the_words_state() -> None:
    words = {g.name: g.text(FASTER, "prompt") for g in GUARDS}
    assert f"at most {MAX:.0%} " in words["failures"]
    assert f"fewer than {TOKENS} tokens" in words["usable-data"]
    assert f"more than {CPU:.0f}% of all cores" in words["busy-machine"]
    assert f"steal exceeded {STEAL:.0f}%" in words["busy-machine"]
    assert f"at least {rule.MIN_ROUNDS} rounds" in rule.COUNT.text(FASTER, "round")


def test_the_first_hold_wins_and_only_a_count_lifts_with_more_units() -> None:
    short_and_drifting = rule.on_effect(decision(units=7, drift=WIDE))
    assert short_and_drifting.hold.startswith("7 paired prompts")
    assert not short_and_drifting.lifts  # more prompts would not settle the drift
    assert rule.on_effect(decision(units=7)).lifts
    failing = rule.on_samples(case((0.0, 0.5), agreement=agreement(10, 0), hypothesis=LONGER))
    assert failing.hold.startswith("50.0% of ngram's attempts failed")
    assert failing.refusals[0].startswith("the arms generated different outputs")


# --- the hypothesised direction --------------------------------------------------------------

CHANGES = st.floats(min_value=-0.99, max_value=10, allow_nan=False)
# a hypothesis's direction and minimum effect: a decrease's is below 1 (a metric cannot fall 100%)
AIMS = st.one_of(
    st.tuples(st.just("increase"), st.floats(min_value=0, max_value=10, allow_nan=False)),
    st.tuples(st.just("decrease"), st.floats(min_value=0, max_value=1, exclude_max=True)),
)


@SETTINGS
@given(AIMS, CHANGES)
def test_toward_reads_a_change_the_hypothesis_way(aim: tuple[str, float], change: float) -> None:
    direction, m = aim
    hypothesis = hypothesis_(direction, m)
    assert rule.toward(hypothesis, rule.toward(hypothesis, change)) == change
    assert rule.toward(hypothesis, change) == (change if direction == "increase" else -change)


@SETTINGS
@given(AIMS, CHANGES, CHANGES)
def test_an_interval_is_decided_only_wholly_beyond_or_short_of_the_minimum(
    aim: tuple[str, float], low: float, high: float
) -> None:
    direction, m = aim
    hypothesis = hypothesis_(direction, m)
    outcome = rule.outcome_of(hypothesis, low, high)
    assert outcome == rule.outcome_of(hypothesis, high, low)  # the bounds' order does not matter
    if m < 1:  # a minimum effect either direction may have
        mirrored = hypothesis_("decrease" if direction == "increase" else "increase", m)
        assert outcome == rule.outcome_of(mirrored, -low, -high)
    read = [rule.toward(hypothesis, x) for x in (low, high)]
    if all(x > m for x in read):
        assert outcome == Outcome.SUPPORTED
    if all(x < m for x in read):
        assert outcome == Outcome.REFUTED
    target = rule.toward(hypothesis, m)  # the minimum effect as a change
    if min(low, high) <= target <= max(low, high):
        assert outcome == Outcome.INCONCLUSIVE


@SETTINGS
@given(AIMS, CHANGES, CHANGES, st.floats(min_value=0, max_value=5))
def test_moving_an_interval_the_hypothesis_way_never_undoes_support(
    aim: tuple[str, float], low: float, high: float, by: float
) -> None:
    direction, m = aim
    hypothesis = hypothesis_(direction, m)
    step = rule.toward(hypothesis, by)
    moved = rule.outcome_of(hypothesis, low + step, high + step)
    if rule.outcome_of(hypothesis, low, high) == Outcome.SUPPORTED:
        assert moved == Outcome.SUPPORTED
    if moved == Outcome.REFUTED:
        assert rule.outcome_of(hypothesis, low, high) == Outcome.REFUTED


@SETTINGS
@given(AIMS, CHANGES, CHANGES)
def test_the_interval_outcome_is_the_outcome_of_its_bounds(
    aim: tuple[str, float], low: float, high: float
) -> None:
    direction, m = aim
    hypothesis = hypothesis_(direction, m)
    low, high = sorted((low, high))
    effect = Effect((low + high) / 2, low, high, 10, 10)
    outcome, why = rule.interval_outcome(effect, hypothesis)
    assert outcome == rule.outcome_of(hypothesis, low, high)
    assert bool(why) == (outcome == Outcome.INCONCLUSIVE)  # it says why: the interval straddles


def test_no_interval_is_inconclusive_and_says_why() -> None:
    outcome, why = rule.interval_outcome(Effect(0.3, None, None, 1, 1), FASTER)
    assert outcome == Outcome.INCONCLUSIVE and why.startswith("no confidence interval")


@pytest.mark.parametrize(
    ("direction", "m", "stated"),
    [
        ("increase", 0.05, "above +5%"),
        ("decrease", 0.05, "below -5%"),
        ("decrease", 0, "below -0%"),
    ],
)
def test_the_rule_states_the_minimum_as_a_change_in_the_hypothesised_direction(
    direction: str, m: float, stated: str
) -> None:
    for unit in UNITS:
        assert f"lies {stated}" in rule_words.rule_text(hypothesis_(direction, m), unit)
    assert f"lies {stated}" in rule_words.summary_rule_text(hypothesis_(direction, m), True)


def interval(low: float | None, high: float | None) -> Effect:
    return Effect(((low or 0) + (high or 0)) / 2, low, high, 20, 20)


@pytest.mark.parametrize(
    ("hypothesis", "eff", "outcome"),
    [
        (FASTER, interval(0.15, 0.25), Outcome.SUPPORTED),
        (FASTER, interval(0.051, 0.09), Outcome.SUPPORTED),
        (FASTER, interval(-0.30, -0.20), Outcome.REFUTED),
        (FASTER, interval(-0.01, 0.02), Outcome.REFUTED),  # the claimed gain is ruled out
        (FASTER, interval(-0.02, 0.12), Outcome.INCONCLUSIVE),
        (FASTER, interval(None, None), Outcome.INCONCLUSIVE),
        (LOWER_TTFT, interval(-0.25, -0.15), Outcome.SUPPORTED),
        (LOWER_TTFT, interval(0.10, 0.20), Outcome.REFUTED),
    ],
    ids=[
        "supported",
        "just",
        "slower",
        "no-gain",
        "straddles",
        "no-ci",
        "decrease-supported",
        "decrease-refuted",
    ],
)
def test_interval_outcome(hypothesis: Hypothesis, eff: Effect, outcome: Outcome) -> None:
    assert rule.interval_outcome(eff, hypothesis)[0] == outcome


def test_rule_text_states_the_unit_interval_and_guards() -> None:
    text = rule_words.rule_text(FASTER, "prompt")
    assert "Unit: the prompt" in text and "geometric mean of per-prompt ratios" in text
    assert "Student-t interval on the prompts' log ratios" in text and "+5%" in text
    assert "each order of the arms (AB, BA) weighted half" in text
    assert "at least 8 distinct prompts" in text and "drifting more than 2.5%" in text
    assert "lies below -5%" in rule_words.rule_text(LOWER_TTFT, "prompt")
