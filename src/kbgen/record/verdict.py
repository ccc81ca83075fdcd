"""The verdict: from the evidence to supported / refuted / inconclusive / mixed, by a stated rule.

The rule is stated once here (`rule_text`, `guard_texts`) and written into every record it
decides, with the unit, estimator, interval method and counts that ran. The unit is the prompt:
per class, per arm, per prompt, the mean of the primary metric over that prompt's requests (its
repeats and rounds; per-token metrics over its tokens); arms are paired by prompt, and the effect
is the geometric mean of the per-prompt ratios with a small-sample cluster-bootstrap interval
(`stats.paired_effect`). `output_tok_s`, a window's aggregate throughput, has the round as its
unit (a window per arm per round, paired by round). In the hypothesised direction, with minimum
effect m, a class is supported when its whole interval lies beyond m, refuted when it lies short
of m, inconclusive otherwise or when a guard says so; the guards (per arm and class, every
attempt counted), the drift check across rounds and the same-output check are `judge`'s. The
overall outcome is the classes' common outcome, `mixed` when they reach different decisive
outcomes, inconclusive otherwise or when a class has no usable data. Imported summaries without
samples are judged on their means alone (`judge_means`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from kbgen.bench.machine import MachineLoad
from kbgen.bench.samples import Sample
from kbgen.kb.models import (
    ClassVerdict,
    Hypothesis,
    IntervalMethod,
    Measurements,
    Outcome,
    Unit,
    Verdict,
)
from kbgen.record import stats
from kbgen.record.evidence import Evidence
from kbgen.record.figures import known, rounded, window_throughput
from kbgen.record.stats import RESAMPLES, Effect

CONFIDENCE = 0.95
MAX_FAILURE_RATE = 0.05  # per arm and class, failed attempts over attempts, resumes included
MIN_TOKENS = 2  # a request with fewer has no decode phase
MIN_ROUNDS = 2  # for output_tok_s, whose unit is the round
BUSY_OTHER_CPU = 25.0  # % of all cores used by other processes: a neighbour as large as a core
BUSY_STEAL = 5.0  # % of CPU time stolen by the hypervisor: the VM's cores are not its own
# metrics that do not grow with the output's length: comparable even where the texts differ
LENGTH_FREE = frozenset({"decode_tok_s", "tpot_ms", "itl_ms", "chunk_gap_ms", "ttft_ms"})
PER_TOKEN = frozenset({"itl_ms", "chunk_gap_ms"})
ESTIMATOR = {
    "prompt": "geometric mean of per-prompt ratios (each prompt's mean over its requests, "
    "variant / baseline)",
    "round": "geometric mean of per-round ratios (each round's window throughput, variant / "
    "baseline)",
    "request": "ratio of the arms' means over requests (unpaired)",
}

# unit -> round -> the unit's requests in that round, each a list of values (one for a
# per-request metric, one per token for a per-token metric, one throughput for a round)
Cells = Mapping[int, Mapping[int, Sequence[Sequence[float]]]]


def decide_class(
    baseline: Cells,
    variant: Cells,
    hypothesis: Hypothesis,
    unit: Unit = "prompt",
    resamples: int = RESAMPLES,
) -> tuple[ClassVerdict, list[str]]:
    """One class's verdict from its paired units, and the caveats it raises (drift).

    Units count only with values in both arms. A class with fewer than `hypothesis.min_prompts`
    prompts (`MIN_ROUNDS` rounds) is inconclusive, its per-unit effects still given. Rounds:
    each arm is compared with itself across rounds, paired by prompt; a drift D beyond m / 2 is
    a caveat, and the verdict turns inconclusive when the interval, widened on each side by the
    rounds' disagreement (the range of the per-round effects / the number of rounds: what a
    drift falling between one round's two windows leaves on the average), would contain m.
    """
    paired = sorted(set(baseline) & set(variant))
    if not paired:
        raise ValueError("a class verdict needs a unit with values in both arms")
    means_b = [_mean(baseline[u].values()) for u in paired]
    means_v = [_mean(variant[u].values()) for u in paired]
    effect = stats.paired_effect(
        means_b,
        means_v,
        CONFIDENCE,
        resamples,
        n_baseline=sum(len(r) for u in paired for r in baseline[u].values()),
        n_variant=sum(len(r) for u in paired for r in variant[u].values()),
    )
    rounds = {r for u in paired for r in (*baseline[u], *variant[u])}
    needed = hypothesis.min_prompts if unit == "prompt" else MIN_ROUNDS
    caveats: list[str] = []
    reason = ""
    drift = widen = None
    spread = 0.0
    if unit == "prompt" and len(rounds) > 1:
        drift = max(
            _drift({u: baseline[u] for u in paired}), _drift({u: variant[u] for u in paired})
        )
        spread, count = _disagreement(baseline, variant, paired)
        widen = spread / count if count > 1 else 0.0
    outcome, why = interval_outcome(effect, hypothesis)
    drift_blocked = False  # the interval decides, the drift does not let it: more rounds would
    if drift is not None and drift > hypothesis.minimum_effect / 2:
        caveats.append(
            f"an arm drifted {drift:.1%} across rounds (more than half the minimum effect)"
        )
        if outcome != Outcome.INCONCLUSIVE and widen:
            wider = interval_outcome(_widened(effect, widen), hypothesis)[0]
            if wider != outcome:
                drift_blocked = True
                outcome, reason = (
                    Outcome.INCONCLUSIVE,
                    f"the drift across rounds could change it (rounds disagree by "
                    f"{math.expm1(spread):.1%}; more rounds, not more prompts, would tell)",
                )
    if effect.units < needed:
        what = "prompts" if unit == "prompt" else "rounds"
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            f"{effect.units} paired {what}; a class needs at least {needed}",
        )
    reason = reason or why
    verdict = ClassVerdict(
        outcome=outcome,
        **known(
            effect=rounded(effect.effect),
            ci_low=rounded(effect.ci_low),
            ci_high=rounded(effect.ci_high),
            drift=rounded(drift),
            reason=reason or None,
            prompts_needed=_needed(effect, hypothesis, needed)
            if outcome == Outcome.INCONCLUSIVE and not drift_blocked
            else None,
        ),
        n_baseline=effect.n_baseline,
        n_variant=effect.n_variant,
        unit=unit,
        interval=effect.interval,
        prompts=len(paired) if unit == "prompt" else None,
        rounds=len(rounds),
        per_unit={u: rounded(e) or 0.0 for u, e in zip(paired, effect.per_unit, strict=True)},
    )
    return verdict, caveats


def interval_outcome(effect: Effect, hypothesis: Hypothesis) -> tuple[Outcome, str]:
    """Supported / refuted / inconclusive from the interval alone, and why when no interval."""
    if effect.ci_low is None or effect.ci_high is None:
        return Outcome.INCONCLUSIVE, "no confidence interval (fewer than 2 paired units)"
    sign = 1.0 if hypothesis.direction == "increase" else -1.0
    low, high = sorted((sign * effect.ci_low, sign * effect.ci_high))
    if low > hypothesis.minimum_effect:
        return Outcome.SUPPORTED, ""
    if high < hypothesis.minimum_effect:
        return Outcome.REFUTED, ""
    return Outcome.INCONCLUSIVE, ""


def overall(outcomes: Sequence[Outcome], reasons: Sequence[str] = ()) -> Outcome:
    """The classes' common outcome; mixed when decisive outcomes differ; else inconclusive."""
    if reasons or not outcomes:
        return Outcome.INCONCLUSIVE
    if {Outcome.SUPPORTED, Outcome.REFUTED} <= set(outcomes):
        return Outcome.MIXED
    return outcomes[0] if len(set(outcomes)) == 1 else Outcome.INCONCLUSIVE


def busy(load: MachineLoad) -> bool:
    """Whether a window ran on a busy machine (the thresholds are the rule's)."""
    return load.other_cpu_percent > BUSY_OTHER_CPU or (load.steal_percent or 0.0) > BUSY_STEAL


def guard_texts(hypothesis: Hypothesis, unit: Unit) -> list[str]:
    """The guards `judge` applies, in words, for the record."""
    m = hypothesis.minimum_effect
    count = (
        f"at least {hypothesis.min_prompts} distinct prompts per class with data in both arms"
        if unit == "prompt"
        else f"at least {MIN_ROUNDS} rounds with a window in both arms"
        if unit == "round"
        else f"at least {hypothesis.min_prompts} requests per arm and class"
    )
    return [
        count,
        f"failed attempts at most {MAX_FAILURE_RATE:.0%} of an arm's attempts in a class, "
        "attempts a resume replaced included; more failures in the variant than in the "
        "baseline is a caveat",
        f"a class without usable data, or where most of an arm's requests made fewer than "
        f"{MIN_TOKENS} tokens, makes the overall outcome inconclusive",
        "client and server token counts agree in every window; a window without the "
        "cross-check (failed /metrics scrape) is a caveat",
        f"a window where other processes used more than {BUSY_OTHER_CPU:.0f}% of all cores or "
        f"steal exceeded {BUSY_STEAL:.0f}% is a caveat",
        f"an arm drifting more than {m / 2:.1%} across rounds (half the minimum effect) is a "
        "caveat, and inconclusive where the interval widened by the rounds' disagreement "
        "would contain the minimum effect",
        "at temperature 0, outputs compared across arms by hash: where they differ the class "
        f"is decided on the prompts that agree if at least {hypothesis.min_prompts} do, else "
        "on all prompts when the metric does not grow with output length (inconclusive if it "
        "does)",
    ]


def rule_text(hypothesis: Hypothesis, unit: Unit | None, summary_only: bool = False) -> str:
    """The rule in words, for the record."""
    m = (
        f"{hypothesis.minimum_effect:+.0%}"
        if hypothesis.direction == "increase"
        else f"{-hypothesis.minimum_effect:+.0%}"
    )
    beyond = "above" if hypothesis.direction == "increase" else "below"
    short = "below" if hypothesis.direction == "increase" else "above"
    metric = hypothesis.primary_metric
    if summary_only or unit is None:
        how = (
            f"Effect = mean({metric}) of the variant / baseline - 1 per class, from the reported "
            "means (no samples, so no interval: a summary-only verdict, allowed explicitly)"
        )
    else:
        units = {"prompt": "prompts", "round": "rounds", "request": "requests"}[unit]
        interval = (
            f"a {CONFIDENCE:.0%} BCa bootstrap interval over requests"
            if unit == "request"
            else f"a {CONFIDENCE:.0%} interval over {units}: an expanded-percentile cluster "
            f"bootstrap (resampling whole {units}, {RESAMPLES:,} resamples, seeded) from "
            f"{stats.BOOTSTRAP_MIN_UNITS} {units} on, Student-t on the log ratios below"
        )
        how = (
            f"Unit: the {unit}. Effect per class = {ESTIMATOR[unit]} of {metric} - 1, with "
            f"{interval}"
        )
    overall_rule = (
        "Overall: the classes' common outcome; mixed when they reach different decisive "
        "outcomes; inconclusive otherwise."
    )
    if summary_only or unit is None:  # judge_means applies no guard: the rule names none
        return (
            f"{how}. Supported: the reported change lies {beyond} {m}. Refuted: it lies {short} "
            f"{m} (a point estimate, nothing is ruled out with confidence). {overall_rule}"
        )
    return (
        f"{how}. Supported: the interval lies {beyond} {m}. Refuted: it lies {short} {m} (the "
        f"claimed change is ruled out). Inconclusive: it contains {m}, or a guard holds: "
        + "; ".join(guard_texts(hypothesis, unit))
        + f". {overall_rule}"
    )


def judge(
    evidence: Evidence,
    hypothesis: Hypothesis,
    caveats: list[str],
    temperature: float | None = None,
    resamples: int = RESAMPLES,
) -> Verdict:
    """The verdict on the evidence's final samples, every guard applied (see `rule_text`).

    `temperature`: the workload's; at 0 the arms' outputs are compared by hash.
    """
    final = evidence.final()[0]
    metric = hypothesis.primary_metric
    unit: Unit = "round" if metric == "output_tok_s" else "prompt" if evidence.paired else "request"
    reasons, notes = _window_checks(evidence)
    attempts = evidence.attempts()
    arms = (evidence.baseline, evidence.challenger)
    per_class: dict[str, ClassVerdict] = {}
    methods: list[IntervalMethod] = []
    for cls in evidence.classes:
        mine = {
            arm: [s for s in final if (s.variant, s.prompt_class) == (arm, cls)] for arm in arms
        }
        rates = [attempts[(a, cls)].failure_rate if (a, cls) in attempts else 0.0 for a in arms]
        if rates[1] > rates[0]:
            notes.append(
                f"{cls}: the variant failed more often than the baseline ({rates[1]:.1%} vs "
                f"{rates[0]:.1%} of attempts)"
            )
        for arm in arms:
            short = sum(
                1 for s in mine[arm] if (s.metrics().get("output_tokens") or 0) < MIN_TOKENS
            )
            if mine[arm] and short > len(mine[arm]) / 2:
                reasons.append(
                    f"{cls}: most of {arm}'s requests made fewer than {MIN_TOKENS} tokens "
                    f"({short} of {len(mine[arm])})"
                )
        decided_on = same = None
        blocked = ""  # a guard that makes this class inconclusive whatever its interval says
        if unit == "prompt" and temperature == 0:
            keep, same, decided_on, why = _same_output(cls, mine, hypothesis, notes)
            if why:
                reasons.append(why)
                blocked = why.removeprefix(f"{cls}: ")
            mine = {arm: [s for s in mine[arm] if s.prompt_index in keep] for arm in arms}
        cells = [_cells(mine[arm], metric, unit) for arm in arms]
        if not (set(cells[0]) & set(cells[1])):
            missing = [a for a, c in zip(arms, cells, strict=True) if not c]
            reasons.append(
                f"{cls}: no usable {metric} in {' and '.join(missing)}"
                if missing
                else f"{cls}: no {unit} with {metric} in both arms"
            )
            continue
        if unit == "request":
            decided, raised = _unpaired(cells[0], cells[1], hypothesis)
        else:
            decided, raised = decide_class(cells[0], cells[1], hypothesis, unit, resamples)
        notes += [f"{cls}: {c}" for c in raised]
        if max(rates) > MAX_FAILURE_RATE:
            worst = arms[rates.index(max(rates))]
            blocked = (
                f"{max(rates):.1%} of {worst}'s attempts failed (limit {MAX_FAILURE_RATE:.0%})"
            )
        if blocked:  # more prompts would not lift it: no prompts_needed
            decided = decided.model_copy(
                update={
                    "outcome": Outcome.INCONCLUSIVE.value,  # as validation stores it
                    "reason": blocked,
                    "prompts_needed": None,
                }
            )
        if decided.reason:
            notes.append(f"{cls}: {decided.reason}")
        per_class[cls] = decided.model_copy(
            update=known(
                failure_rate_baseline=rounded(rates[0]),
                failure_rate_variant=rounded(rates[1]),
                same_output=rounded(same),
                decided_on=decided_on,
            )
        )
        if decided.interval and decided.interval not in methods:
            methods.append(decided.interval)
    if unit == "prompt" and per_class and all((c.rounds or 1) < 2 for c in per_class.values()):
        notes.append(
            "one round: the arms ran one after the other, so time is confounded with the arm "
            "(no drift check)"
        )
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], reasons),
        variant=evidence.challenger,
        method="bootstrap",
        confidence=CONFIDENCE,
        rule=rule_text(hypothesis, unit),
        per_class=per_class,
        caveats=list(dict.fromkeys([*caveats, *reasons, *notes])),
        unit=unit,
        estimator=ESTIMATOR[unit],
        interval=methods,
        guards=guard_texts(hypothesis, unit),
        reasons=list(dict.fromkeys(reasons)),
    )


def judge_means(
    evidence: Evidence,
    measurements: Measurements,
    hypothesis: Hypothesis,
    caveats: list[str],
    allow: bool,
) -> Verdict:
    """A verdict from means alone (no samples, so no interval): inconclusive unless allowed."""
    metric = hypothesis.primary_metric
    sign = 1.0 if hypothesis.direction == "increase" else -1.0
    per_class: dict[str, ClassVerdict] = {}
    reasons = []
    for cls in evidence.classes:
        base = measurements.get(evidence.baseline, {}).get(cls, {}).get(metric)
        other = measurements.get(evidence.challenger, {}).get(cls, {}).get(metric)
        if not (base and other and base.mean):
            reasons.append(f"{cls}: no {metric} on one side")
            continue
        effect = other.mean / base.mean - 1
        if not allow:
            outcome, why = Outcome.INCONCLUSIVE, "no confidence interval (no per-request samples)"
        elif sign * effect > hypothesis.minimum_effect:
            outcome, why = Outcome.SUPPORTED, ""
        elif sign * effect < hypothesis.minimum_effect:
            outcome, why = Outcome.REFUTED, ""
        else:
            outcome, why = Outcome.INCONCLUSIVE, ""
        per_class[cls] = ClassVerdict(
            outcome=outcome,
            effect=rounded(effect) or 0.0,
            n_baseline=base.n or 0,
            n_variant=other.n or 0,
            **known(reason=why or None),
        )
    notes = [f"{cls}: {c.reason}" for cls, c in per_class.items() if c.reason]
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], reasons),
        variant=evidence.challenger,
        method="summary",
        rule=rule_text(hypothesis, None, summary_only=True),
        per_class=per_class,
        caveats=list(dict.fromkeys([*caveats, *reasons, *notes])),
        estimator="ratio of the reported means",
        reasons=reasons,
    )


# --- the pieces -----------------------------------------------------------------------------


def _mean(rounds: Iterable[Sequence[Sequence[float]]]) -> float:
    """The mean over every value of a unit's requests, whatever the round."""
    values = [x for requests in rounds for request in requests for x in request]
    return math.fsum(values) / len(values)


def _cells(
    samples: list[Sample], metric: str, unit: Unit
) -> dict[int, dict[int, list[list[float]]]]:
    """unit -> round -> requests' values of one arm and class (see `Cells`)."""
    out: dict[int, dict[int, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    if unit == "round":
        by_round: dict[int, list[Sample]] = defaultdict(list)
        for s in samples:
            by_round[s.round or 0].append(s)
        for r, group in by_round.items():
            throughput = window_throughput(group)
            if throughput:
                out[r][r].append([throughput])
        return out
    for index, s in enumerate(samples):
        value = s.metrics().get(metric)
        values = value if isinstance(value, list) else [] if value is None else [value]
        if values and all(v > 0 for v in values):
            # unpaired requests are each their own unit
            out[index if unit == "request" else s.prompt_index][s.round or 0].append(values)
    return out


def _drift(cells: Mapping[int, Mapping[int, Sequence[Sequence[float]]]]) -> float:
    """An arm against itself across rounds, paired by prompt: the range of its round levels.

    A round's level is the mean log ratio of its prompts' means to the same prompts' means in
    the first round; the drift is exp(max - min) - 1 (0 with one round).
    """
    rounds = sorted({r for per_round in cells.values() for r in per_round})
    if len(rounds) < 2:
        return 0.0
    first = rounds[0]
    levels = [0.0]
    for r in rounds[1:]:
        logs = [
            math.log(_mean([per_round[r]]) / _mean([per_round[first]]))
            for per_round in cells.values()
            if r in per_round and first in per_round
        ]
        if logs:
            levels.append(math.fsum(logs) / len(logs))
    return math.expm1(max(levels) - min(levels))


def _disagreement(baseline: Cells, variant: Cells, paired: list[int]) -> tuple[float, int]:
    """The range of the per-round effects (mean log ratio over each round's paired prompts),
    and how many rounds have one: range / rounds is the log-scale widening of the drift rule."""
    effects = []
    for r in sorted(
        {r for u in paired for r in baseline[u]} & {r for u in paired for r in variant[u]}
    ):
        logs = [
            math.log(_mean([variant[u][r]]) / _mean([baseline[u][r]]))
            for u in paired
            if r in baseline[u] and r in variant[u]
        ]
        if logs:
            effects.append(math.fsum(logs) / len(logs))
    return (max(effects) - min(effects) if effects else 0.0), len(effects)


def _widened(effect: Effect, by: float) -> Effect:
    """The interval with `by` (log scale) added on each side."""
    assert effect.ci_low is not None and effect.ci_high is not None
    return Effect(
        effect.effect,
        math.expm1(math.log1p(effect.ci_low) - by),
        math.expm1(math.log1p(effect.ci_high) + by),
        effect.n_baseline,
        effect.n_variant,
    )


def _needed(effect: Effect, hypothesis: Hypothesis, at_least: int) -> int | None:
    """About how many units would decide at the minimum effect, from the spread between them
    (never fewer than the rule's minimum, `at_least`)."""
    threshold = hypothesis.minimum_effect * (1 if hypothesis.direction == "increase" else -1)
    if threshold <= -1 or effect.effect <= -1:
        return None
    distance = abs(math.log1p(effect.effect) - math.log1p(threshold))
    needed = stats.units_needed(effect.spread, distance, CONFIDENCE)
    return None if needed is None else max(needed, at_least)


def _same_output(
    cls: str, mine: dict[str, list[Sample]], hypothesis: Hypothesis, notes: list[str]
) -> tuple[set[int], float | None, str, str]:
    """Prompts to decide on, the share whose outputs agree, which prompts, and a blocking reason.

    A prompt agrees when every successful request of both arms produced one and the same hash.
    """
    arms = list(mine)
    prompts = {s.prompt_index for s in mine[arms[0]]} & {s.prompt_index for s in mine[arms[1]]}
    hashes = {
        p: [{s.output_hash for s in mine[a] if s.prompt_index == p} for a in arms] for p in prompts
    }
    unknown = {p for p, sets in hashes.items() if any(None in h for h in sets)}
    agree = {p for p, (a, b) in hashes.items() if p not in unknown and a == b and len(a) == 1}
    known_ = len(prompts) - len(unknown)
    if unknown:
        notes.append(
            f"{cls}: {len(unknown)} of {len(prompts)} prompts have outputs without a hash: "
            "whether both arms generated the same text is unknown"
        )
    share = len(agree) / known_ if known_ else None
    differ = known_ - len(agree)
    if not differ:
        return prompts, share, "all-prompts", ""
    notes.append(f"{cls}: the arms generated different outputs for {differ} of {known_} prompts")
    if len(agree) >= hypothesis.min_prompts:
        notes.append(f"{cls}: decided on the {len(agree)} prompts whose outputs agree")
        return agree, share, "same-output-prompts", ""
    if hypothesis.primary_metric in LENGTH_FREE:
        notes.append(
            f"{cls}: decided on all prompts ({hypothesis.primary_metric} is a per-token figure), "
            "though they compare different texts"
        )
        return prompts, share, "all-prompts", ""
    return (
        prompts,
        share,
        "all-prompts",
        f"{cls}: the arms generated different outputs and {hypothesis.primary_metric} grows "
        f"with output length (only {len(agree)} prompts agree; {hypothesis.min_prompts} needed)",
    )


def _unpaired(
    baseline: Cells, variant: Cells, hypothesis: Hypothesis
) -> tuple[ClassVerdict, list[str]]:
    """A class of unpaired requests (each its own prompt): a two-sample bootstrap over them."""
    b = [_mean(per_round.values()) for per_round in baseline.values()]
    v = [_mean(per_round.values()) for per_round in variant.values()]
    effect = stats.relative_effect(b, v, CONFIDENCE)
    outcome, why = interval_outcome(effect, hypothesis)
    if min(len(b), len(v)) < hypothesis.min_prompts:
        outcome = Outcome.INCONCLUSIVE
        why = f"fewer than {hypothesis.min_prompts} requests per arm"
    return (
        ClassVerdict(
            outcome=outcome,
            **known(
                effect=rounded(effect.effect),
                ci_low=rounded(effect.ci_low),
                ci_high=rounded(effect.ci_high),
                reason=why or None,
            ),
            n_baseline=len(b),
            n_variant=len(v),
            unit="request",
            interval=effect.interval,
        ),
        [],
    )


def _window_checks(evidence: Evidence) -> tuple[list[str], list[str]]:
    """Blocking reasons (token counts that disagree) and caveats (no cross-check, busy windows)."""
    reasons, notes = [], []
    for v in evidence.variants:
        windows = evidence.windows.get(v, [])
        checked = [
            w for w in windows if w.tokens_match is not None and w.generation_tokens is not None
        ]
        if any(w.tokens_match is False for w in checked):
            reasons.append(f"{v}: client and server token counts disagree")
        if not windows:
            notes.append(
                f"{v}: no /metrics window: the client's token counts are not cross-checked"
            )
        elif len(checked) < len(windows):
            notes.append(
                f"{v}: {len(windows) - len(checked)} of {len(windows)} windows have no "
                "client/server token cross-check (a failed /metrics scrape, no generation-token "
                "counter, or an import)"
            )
        loads = [w.load for w in windows if w.load is not None]
        heavy = [load for load in loads if busy(load)]
        if heavy:
            notes.append(
                f"{v}: {len(heavy)} of {len(windows)} windows ran on a busy machine (other "
                f"processes up to {max(x.other_cpu_percent for x in heavy):.0f}% of all cores, "
                f"steal up to {max(x.steal_percent or 0.0 for x in heavy):.0f}%)"
            )
    return reasons, notes
