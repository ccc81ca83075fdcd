"""The verdict on evidence: the overall outcome, and one test per guard, each building its case
from samples and asserting the overall outcome and its reason (the guards' own checks and the
rule's words: test_rule)."""

from __future__ import annotations

import random
from typing import Any, get_args

import pytest

from kbgen.kb.models import Hypothesis, MetricName, Outcome, Verdict
from kbgen.record import rule, rule_words, verdict
from kbgen.record.evidence import Evidence
from kbgen.run.counters import Counters, MachineLoad
from kbgen.run.samples import Sample
from tests.support.runs import make_sample

FASTER = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)
CLASSES = ["coding", "math"]
CLEAN = Counters(generation_tokens=1.0, client_output_tokens=1, tokens_match=True)


@pytest.mark.parametrize(
    ("outcomes", "reasons", "overall"),
    [
        ([Outcome.REFUTED] * 3, [], Outcome.REFUTED),
        ([Outcome.SUPPORTED, Outcome.SUPPORTED], [], Outcome.SUPPORTED),
        ([Outcome.SUPPORTED, Outcome.REFUTED], [], Outcome.MIXED),
        ([Outcome.SUPPORTED, Outcome.REFUTED, Outcome.INCONCLUSIVE], [], Outcome.MIXED),
        ([Outcome.SUPPORTED, Outcome.INCONCLUSIVE], [], Outcome.INCONCLUSIVE),
        ([Outcome.SUPPORTED], ["math: no usable data"], Outcome.INCONCLUSIVE),
        ([], [], Outcome.INCONCLUSIVE),
    ],
)
def test_overall(outcomes: list[Outcome], reasons: list[str], overall: Outcome) -> None:
    assert verdict.overall(outcomes, reasons) == overall


def experiment(
    gain: dict[str, float],
    prompts: int = 10,
    rounds: int = 1,
    drift: float = 0.0,
    tokens: int = 32,
    hashes: bool = True,
) -> Evidence:
    """Both arms, every class, `prompts` prompts with their own speed, 2 repeats per round; the
    variant `gain[cls]` faster; the machine `drift` faster per window (arms in ABBA order)."""
    rng = random.Random(7)
    samples = []
    speeds = {(c, p): rng.uniform(10, 16) for c in CLASSES for p in range(prompts)}
    for r in range(rounds):
        for slot, arm in enumerate(("baseline", "ngram") if r % 2 == 0 else ("ngram", "baseline")):
            machine = (1 + drift) ** (2 * r + slot)
            for (cls, p), speed in speeds.items():
                for repeat in range(2):
                    rate = speed * machine * (1 + gain[cls] if arm == "ngram" else 1)
                    s = make_sample(arm, cls, p, repeat, rate, rng, tokens=tokens)
                    s.round = r if rounds > 1 else None
                    s.output_hash = f"{cls}{p:014d}"[-16:] if hashes else None
                    samples.append(s)
    return Evidence(
        "baseline", ["baseline", "ngram"], CLASSES, samples, {"baseline": [CLEAN], "ngram": [CLEAN]}
    )


def judge(
    evidence: Evidence,
    hypothesis: Hypothesis,
    caveats: list[str],
    temperature: float | None = None,
    **given: Any,
) -> Verdict:
    """The verdict, a one-round experiment's accepted as a spec can accept it: the guards these
    tests exercise are others (the one-round guard's own tests call `verdict.judge`)."""
    given = {"time_confound_ok": True, **given}
    return verdict.judge(evidence, hypothesis, caveats, temperature, **given)


def fail(s: Sample, attempt: int = 0) -> Sample:
    return s.model_copy(
        update={"error": "HTTP 500", "chunk_ns": [], "chunk_tokens": [], "attempt": attempt}
    )


def test_a_clear_gain_is_supported_with_its_rule_on_the_record() -> None:
    decided = judge(experiment({"coding": 0.3, "math": 0.3}), FASTER, [], temperature=0)
    assert decided.outcome == Outcome.SUPPORTED, decided.caveats
    coding = decided.per_class["coding"]
    assert coding.unit == "prompt" and coding.prompts == 10 and coding.n_baseline == 20
    assert coding.interval == "student-t" and len(coding.per_unit) == 10
    assert coding.same_output == 1.0 and coding.decided_on == "all-prompts"
    assert decided.unit == "prompt" and "geometric mean" in (decided.estimator or "")
    assert decided.interval == ["student-t"] and not decided.reasons
    assert decided.guards == rule_words.guard_texts(FASTER, "prompt")  # the guards that ran
    assert all(g in decided.rule for g in decided.guards)


def test_classes_that_disagree_are_mixed() -> None:
    decided = judge(experiment({"coding": 0.3, "math": -0.3}), FASTER, [])
    assert decided.outcome == Outcome.MIXED
    assert {c.outcome for c in decided.per_class.values()} == {"supported", "refuted"}


def test_too_few_prompts_is_inconclusive_with_the_per_prompt_effects_kept() -> None:
    decided = judge(experiment({"coding": 0.3, "math": 0.3}, prompts=3), FASTER, [])
    coding = decided.per_class["coding"]
    assert decided.outcome == Outcome.INCONCLUSIVE
    assert coding.reason == "3 paired prompts; a class needs at least 8"
    assert len(coding.per_unit) == 3 and coding.interval == "student-t"


def test_a_class_of_one_token_outputs_makes_the_outcome_inconclusive() -> None:
    evidence = experiment({"coding": 0.3, "math": 0.3})
    one = experiment({"coding": 0.3, "math": 0.3}, tokens=1).samples
    evidence.samples = [s for s in evidence.samples if s.prompt_class == "coding"] + [
        s for s in one if s.prompt_class == "math"
    ]
    decided = judge(evidence, FASTER, [])
    assert decided.per_class["coding"].outcome == Outcome.SUPPORTED
    assert decided.outcome == Outcome.INCONCLUSIVE
    assert "math: most of baseline's requests made fewer than 2 tokens (20 of 20)" in (
        decided.reasons
    )
    assert "math: no usable decode_tok_s in baseline and ngram" in decided.reasons


def test_failures_in_the_variant_only_are_a_caveat_and_over_the_limit_inconclusive() -> None:
    evidence = experiment({"coding": 0.3, "math": 0.3})
    variant = [i for i, s in enumerate(evidence.samples) if s.variant == "ngram"]
    evidence.samples[variant[0]] = fail(evidence.samples[variant[0]])  # 1 of 20 coding: 5%
    decided = judge(evidence, FASTER, [])
    assert decided.outcome == Outcome.SUPPORTED
    assert decided.per_class["coding"].failure_rate_variant == 0.05
    assert any(
        "the variant failed more often than the baseline (5.0% vs 0.0%" in c
        for c in (decided.caveats)
    )
    evidence.samples[variant[1]] = fail(evidence.samples[variant[1]])  # 10%
    decided = judge(evidence, FASTER, [])
    assert decided.outcome == Outcome.INCONCLUSIVE
    assert decided.per_class["coding"].reason == "10.0% of ngram's attempts failed (limit 5%)"


def test_failures_replaced_by_resume_still_count() -> None:
    evidence = experiment({"coding": 0.3, "math": 0.3})
    lost = [fail(s) for s in evidence.samples if s.variant == "ngram" and s.prompt_index < 2]
    evidence.samples += lost  # 8 coding and math attempts that failed and were redone
    for s in evidence.samples[: -len(lost)]:
        if s.variant == "ngram" and s.prompt_index < 2:
            s.attempt = 1
    assert evidence.final()[1:] == (88, 8)
    decided = judge(evidence, FASTER, [])
    assert decided.outcome == Outcome.INCONCLUSIVE
    assert decided.per_class["math"].failure_rate_variant == pytest.approx(4 / 24, rel=1e-5)
    assert decided.per_class["math"].reason == "16.7% of ngram's attempts failed (limit 5%)"


def test_a_failed_scrape_is_a_caveat_not_silence() -> None:
    evidence = experiment({"coding": 0.3, "math": 0.3})
    evidence.windows["ngram"] = [CLEAN, Counters()]  # the second window's closing scrape failed
    decided = judge(evidence, FASTER, [])
    assert decided.outcome == Outcome.SUPPORTED
    assert "ngram: 1 of 2 windows have no client/server token cross-check" in " ".join(
        decided.caveats
    )
    evidence.windows["ngram"] = [CLEAN.model_copy(update={"tokens_match": False})]
    decided = judge(evidence, FASTER, [])
    assert decided.outcome == Outcome.INCONCLUSIVE
    assert decided.reasons == ["ngram: client and server token counts disagree"]


def test_outputs_that_differ_across_arms_are_seen() -> None:
    evidence = experiment({"coding": 0.3, "math": 0.3})
    for s in evidence.samples:
        if s.variant == "ngram" and s.prompt_class == "coding" and s.prompt_index < 2:
            s.output_hash = "ffffffffffffffff"
    decided = judge(evidence, FASTER, [], temperature=0)
    coding = decided.per_class["coding"]
    assert decided.outcome == Outcome.SUPPORTED
    assert coding.same_output == 0.8 and coding.decided_on == "same-output-prompts"
    assert coding.prompts == 8
    assert "coding: the arms generated different outputs for 2 of 10 prompts" in decided.caveats
    e2e = Hypothesis(
        statement="x", primary_metric="e2e_ms", direction="decrease", minimum_effect=0.05
    )
    strict = e2e.model_copy(update={"min_prompts": 9})
    decided = judge(evidence, strict, [], temperature=0)
    assert decided.outcome == Outcome.INCONCLUSIVE
    assert decided.reasons[0].startswith(
        "coding: the arms generated different outputs and e2e_ms grows with output length"
    )
    blocked = decided.per_class["coding"]  # the class itself says so, as its guard text does
    assert blocked.outcome == Outcome.INCONCLUSIVE and blocked.prompts_needed is None
    assert (blocked.reason or "").startswith("the arms generated different outputs")
    unhashed = judge(experiment({"coding": 0.3, "math": 0.3}, hashes=False), FASTER, [], 0)
    assert unhashed.per_class["coding"].same_output is None
    assert any("without a hash" in c for c in unhashed.caveats)


def test_an_arm_that_generated_nothing_is_refused_by_each_guard_in_turn() -> None:
    """The samples' guards speak before the values' guard: short outputs, then different
    outputs, then nothing usable (the order every record has kept)."""
    evidence = experiment({"coding": 0.3, "math": 0.3})
    for s in evidence.samples:
        if s.variant == "ngram" and s.prompt_class == "math":
            s.chunk_ns, s.chunk_tokens, s.output_tokens, s.done_ns = [], [], 0, None
            s.output_hash = "e3b0c44298fc1c14"  # the empty text's
    e2e = Hypothesis(
        statement="x", primary_metric="e2e_ms", direction="decrease", minimum_effect=0.05
    )
    decided = judge(evidence, e2e, [], temperature=0)
    assert decided.outcome == Outcome.INCONCLUSIVE and set(decided.per_class) == {"coding"}
    assert decided.reasons == [
        "math: most of ngram's requests made fewer than 2 tokens (20 of 20)",
        "math: the arms generated different outputs and e2e_ms grows with output length (only 0 "
        "prompts agree; 8 needed)",
        "math: no usable e2e_ms in ngram",
    ]


def test_a_busy_window_is_a_caveat() -> None:
    evidence = experiment({"coding": 0.3, "math": 0.3})
    calm = MachineLoad(other_cpu_percent=3.0, steal_percent=0.0, load_1m=0.5, cpu_count=2)
    loud = MachineLoad(other_cpu_percent=40.0, steal_percent=1.0, load_1m=2.5, cpu_count=2)
    evidence.windows = {
        "baseline": [CLEAN.model_copy(update={"load": calm})],
        "ngram": [CLEAN.model_copy(update={"load": loud})],
    }
    decided = judge(evidence, FASTER, [])
    assert decided.outcome == Outcome.SUPPORTED
    busy = [c for c in decided.caveats if "busy machine" in c]
    assert busy == [
        "ngram: 1 of 1 windows ran on a busy machine (other processes up to 40% of all cores, "
        "steal up to 1%)"
    ]


def test_drift_across_rounds_is_a_caveat_and_can_make_it_inconclusive() -> None:
    steady = judge(experiment({"coding": 0.08, "math": 0.08}, rounds=2), FASTER, [])
    assert steady.per_class["coding"].drift is not None
    assert steady.per_class["coding"].drift < 0.025 and steady.per_class["coding"].rounds == 2
    drifting = judge(experiment({"coding": 0.08, "math": 0.08}, rounds=2, drift=0.06), FASTER, [])
    coding = drifting.per_class["coding"]
    assert coding.drift is not None and coding.drift > 0.025
    assert any("drifted" in c for c in drifting.caveats)
    assert drifting.outcome == Outcome.INCONCLUSIVE
    assert (coding.reason or "").startswith("the drift across rounds could change it")
    assert coding.prompts_needed is None  # more prompts would not settle a drift: more rounds


def test_one_round_decides_nothing_unless_the_spec_accepts_it() -> None:
    """A +30% gain in one round: inconclusive, and what would separate the arms from time."""
    held = verdict.judge(experiment({"coding": 0.3, "math": 0.3}), FASTER, [])
    assert held.outcome == Outcome.INCONCLUSIVE
    coding = held.per_class["coding"]
    assert coding.outcome == Outcome.INCONCLUSIVE and coding.prompts_needed is None
    assert coding.reason == f"{rule.CONFOUNDED}: two rounds (AB, then BA) would separate them"
    accepted = verdict.judge(
        experiment({"coding": 0.3, "math": 0.3}), FASTER, [], None, time_confound_ok=True
    )
    assert accepted.outcome == Outcome.SUPPORTED
    assert f"coding: {rule.CONFOUNDED}, accepted by the spec ({rule.ACCEPT_FIELD})" in (
        accepted.caveats
    )
    two = verdict.judge(experiment({"coding": 0.3, "math": 0.3}, rounds=2), FASTER, [])
    assert two.outcome == Outcome.SUPPORTED


def test_a_linear_drift_cancels_between_the_two_orders_of_the_arms() -> None:
    """The server 5% faster every window, ABBA: each prompt's rounds, each order of the arms
    weighted half, give the true +8%; with 3 rounds (ABBAAB) a plain mean over every request
    would give +9.8% (the variant's windows later on average)."""
    drifting = verdict.judge(
        experiment({"coding": 0.08, "math": 0.08}, rounds=2, drift=0.05), FASTER, []
    )
    for found in drifting.per_class.values():
        assert found.effect == pytest.approx(0.08, abs=0.006)
    three = verdict.judge(
        experiment({"coding": 0.08, "math": 0.08}, rounds=3, drift=0.05), FASTER, []
    )
    for found in three.per_class.values():
        assert found.effect == pytest.approx(0.08, abs=0.006)


def test_an_inconclusive_class_says_how_many_prompts_would_decide_it() -> None:
    decided = judge(experiment({"coding": 0.09, "math": 0.09}, prompts=4), FASTER, [])
    needed = decided.per_class["coding"].prompts_needed
    assert needed is not None and needed > 4


@pytest.mark.parametrize("metric", get_args(MetricName))
def test_every_primary_metric_is_decidable(metric: str) -> None:
    """Each MetricName a hypothesis may name is decided, none crashes or is silently skipped."""
    hypothesis = Hypothesis.model_validate(
        {
            "statement": "x",
            "primary_metric": metric,
            "direction": "decrease" if metric.endswith("_ms") else "increase",
            "minimum_effect": 0.05,
        }
    )
    decided = judge(experiment({"coding": 0.3, "math": 0.3}, rounds=2), hypothesis, [])
    assert set(decided.per_class) == set(CLASSES), decided.reasons
    assert decided.per_class["coding"].unit == ("round" if metric == "output_tok_s" else "prompt")


def test_a_metric_that_cannot_be_decided_is_refused() -> None:
    with pytest.raises(ValueError, match="primary_metric"):
        Hypothesis.model_validate(
            {
                "statement": "x",
                "primary_metric": "tokens_per_joule",
                "direction": "increase",
                "minimum_effect": 0.05,
            }
        )


def test_named_groups_are_the_unit_and_the_record_says_how_many() -> None:
    """Ten prompts written from five templates, two each: the interval resamples the five
    templates (each the mean of its prompts), so it is wider and the claim rests on five."""
    evidence = experiment({"coding": 0.3, "math": 0.3}, rounds=2)
    alone = verdict.judge(evidence, FASTER, [])
    evidence.groups = {cls: [f"t{p // 2}" for p in range(10)] for cls in CLASSES}
    grouped = verdict.judge(evidence, FASTER, [])
    one, five = alone.per_class["coding"], grouped.per_class["coding"]
    assert (one.groups, five.groups, five.prompts) == (None, 5, 10) and len(five.per_unit) == 10
    assert five.effect == pytest.approx(one.effect, abs=1e-3)  # each template weighs the same
    assert (five.ci_high or 0) - (five.ci_low or 0) > (one.ci_high or 0) - (one.ci_low or 0)
    assert five.reason == "5 paired prompt groups; a class needs at least 8"  # min_prompts
