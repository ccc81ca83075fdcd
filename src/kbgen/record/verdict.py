"""The verdict: from the evidence's effects and intervals to supported / refuted / inconclusive.

The rules are stated once here, and written into every record they decide, so a reader sees the
rule next to the outcome. In the hypothesised direction, with minimum effect m:

- supported: the whole confidence interval lies beyond m;
- refuted: the whole interval lies short of m — the claimed gain is ruled out, which includes a
  clear change the other way;
- inconclusive: the interval contains m; or there are too few samples, too many failed
  requests, a client/server token mismatch, or no interval at all.

The overall outcome is the classes' common outcome, inconclusive when they disagree. The
effects come from bootstrap intervals over the final samples (`judge`) or, for imported
summaries without samples, from their means alone (`judge_means`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kbgen.kb.models import ClassVerdict, Hypothesis, Measurements, Outcome, Verdict
from kbgen.record import stats
from kbgen.record.evidence import Evidence
from kbgen.record.figures import known, rounded
from kbgen.record.stats import RESAMPLES, Effect

CONFIDENCE = 0.95

MIN_SAMPLES = 5  # per arm and class
MAX_FAILURE_RATE = 0.05


@dataclass
class Guards:
    """Conditions that make any comparison inconclusive, whatever the intervals say."""

    failure_rate: float = 0.0
    tokens_match: bool | None = True
    allow_summary_only: bool = False
    reasons: list[str] = field(default_factory=list)

    def blocking(self) -> list[str]:
        out = list(self.reasons)
        if self.failure_rate > MAX_FAILURE_RATE:
            out.append(f"{self.failure_rate:.1%} of requests failed (limit {MAX_FAILURE_RATE:.0%})")
        if self.tokens_match is False:
            out.append("client and server token counts disagree")
        return out


def class_outcome(effect: Effect, hypothesis: Hypothesis, guards: Guards) -> tuple[Outcome, str]:
    """The outcome for one class and, when inconclusive for a reason other than the CI, why."""
    if blocking := guards.blocking():
        return Outcome.INCONCLUSIVE, "; ".join(blocking)
    if min(effect.n_baseline, effect.n_variant) < MIN_SAMPLES and not guards.allow_summary_only:
        return Outcome.INCONCLUSIVE, f"fewer than {MIN_SAMPLES} samples per arm"
    sign = 1.0 if hypothesis.direction == "increase" else -1.0
    if effect.ci_low is None or effect.ci_high is None:
        if not guards.allow_summary_only:
            return Outcome.INCONCLUSIVE, "no confidence interval (no per-request samples)"
        low = high = sign * effect.effect
    else:
        low, high = sorted((sign * effect.ci_low, sign * effect.ci_high))
    if low > hypothesis.minimum_effect:
        return Outcome.SUPPORTED, ""
    if high < hypothesis.minimum_effect:
        return Outcome.REFUTED, ""
    return Outcome.INCONCLUSIVE, ""


def overall(outcomes: list[Outcome]) -> Outcome:
    return outcomes[0] if outcomes and len(set(outcomes)) == 1 else Outcome.INCONCLUSIVE


def rule_text(hypothesis: Hypothesis, confidence: float, summary_only: bool = False) -> str:
    """The rule in words, for the record."""
    m = (
        f"{hypothesis.minimum_effect:+.0%}"
        if hypothesis.direction == "increase"
        else (f"{-hypothesis.minimum_effect:+.0%}")
    )
    beyond = "above" if hypothesis.direction == "increase" else "below"
    short = "below" if hypothesis.direction == "increase" else "above"
    interval = (
        "the reported relative change (no samples, so no interval: summary-only verdict "
        "allowed explicitly)"
        if summary_only
        else f"a {confidence:.0%} BCa bootstrap interval over requests ({RESAMPLES:,} resamples, "
        "seeded)"
    )
    return (
        f"Effect = mean({hypothesis.primary_metric}) of the variant / baseline - 1 per class, "
        f"with {interval}. Supported: the interval lies {beyond} {m}. Refuted: it lies {short} "
        f"{m} (the claimed change is ruled out). Inconclusive: it contains {m}, or fewer than "
        f"{MIN_SAMPLES} samples per arm, or more than {MAX_FAILURE_RATE:.0%} of requests "
        "failed, or client and server token counts disagree. Overall: the classes' common "
        "outcome, inconclusive when they differ."
    )


def judge(evidence: Evidence, hypothesis: Hypothesis, caveats: list[str]) -> Verdict:
    """The verdict with bootstrap intervals over the final successful samples."""
    final, total, failed = evidence.final()
    tokens_match = [w.tokens_match for ws in evidence.windows.values() for w in ws]
    guards = Guards(
        failure_rate=failed / total if total else 0.0,
        tokens_match=None if not tokens_match else all(t is not False for t in tokens_match),
    )
    metric = hypothesis.primary_metric
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for sample in final:
        if metric in (m := sample.metrics()):
            values[(sample.variant, sample.prompt_class)].append(m[metric])
    effects: dict[str, Effect | None] = {}
    for cls in evidence.classes:
        base, other = values[(evidence.baseline, cls)], values[(evidence.challenger, cls)]
        effects[cls] = stats.relative_effect(base, other, CONFIDENCE) if base and other else None
    return _decide(evidence, hypothesis, effects, guards, caveats, summary_only=False)


def judge_means(
    evidence: Evidence,
    measurements: Measurements,
    hypothesis: Hypothesis,
    caveats: list[str],
    allow: bool,
) -> Verdict:
    """A verdict from means alone (no samples, so no interval): inconclusive unless allowed."""
    metric = hypothesis.primary_metric
    effects: dict[str, Effect | None] = {}
    for cls in evidence.classes:
        base = measurements.get(evidence.baseline, {}).get(cls, {}).get(metric)
        other = measurements.get(evidence.challenger, {}).get(cls, {}).get(metric)
        effects[cls] = (
            Effect(other.mean / base.mean - 1, None, None, base.n or 0, other.n or 0)
            if base and other
            else None
        )
    guards = Guards(allow_summary_only=allow)
    return _decide(evidence, hypothesis, effects, guards, caveats, summary_only=True)


def _decide(
    evidence: Evidence,
    hypothesis: Hypothesis,
    effects: dict[str, Effect | None],
    guards: Guards,
    caveats: list[str],
    summary_only: bool,
) -> Verdict:
    """The verdict on the first non-baseline variant from its effect in each class."""
    per_class: dict[str, ClassVerdict] = {}
    notes = []
    for cls, effect in effects.items():
        if effect is None:
            notes.append(f"{cls}: no {hypothesis.primary_metric} on one side")
            continue
        outcome, why = class_outcome(effect, hypothesis, guards)
        if why:
            notes.append(f"{cls}: {why}")
        per_class[cls] = ClassVerdict(
            outcome=outcome,
            **known(
                effect=rounded(effect.effect),
                ci_low=rounded(effect.ci_low),
                ci_high=rounded(effect.ci_high),
            ),
            n_baseline=effect.n_baseline,
            n_variant=effect.n_variant,
        )
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()]),
        variant=evidence.challenger,
        method="summary" if summary_only else "bootstrap",
        **known(confidence=None if summary_only else CONFIDENCE),
        rule=rule_text(hypothesis, CONFIDENCE, summary_only=summary_only),
        per_class=per_class,
        caveats=[*caveats, *dict.fromkeys(notes)],
    )
