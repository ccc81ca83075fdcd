"""The verdict: from the evidence to supported / refuted / inconclusive / mixed, by `rule`.

`judge` measures the evidence (the prompt as the unit, paired ratios, a cluster-bootstrap
interval) and walks every guard of `rule`; `judge_means` judges imported means alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kbgen.bench.samples import Sample, paired_by
from kbgen.kb.models import (
    Best,
    Cell,
    ClassVerdict,
    Family,
    Hypothesis,
    Load,
    Measurements,
    Outcome,
    Unit,
    Verdict,
)
from kbgen.record import anytime, best, drifts, machines, pareto, rule, stats
from kbgen.record.anytime import Design
from kbgen.record.drifts import request_mean as _mean
from kbgen.record.evidence import Attempts, Evidence, at_level
from kbgen.record.figures import known, rounded, window_throughput
from kbgen.record.rule import CONFIDENCE, ESTIMATOR, Cells
from kbgen.record.stats import RESAMPLES, Effect


def unit_of(evidence: Evidence, hypothesis: Hypothesis) -> Unit:
    """What the intervals resample: rounds for aggregate throughput, else prompts (requests
    where the arms cannot be paired)."""
    if hypothesis.primary_metric == "output_tok_s":
        return "round"
    return "prompt" if evidence.paired else "request"


@dataclass
class Compared:
    """One variant against the baseline at one load: its classes' verdicts, the reasons that
    make its outcome inconclusive and its caveats (each `ABOUT: what`)."""

    per_class: dict[str, ClassVerdict]
    reasons: list[str]
    notes: list[str]

    def held(self, cls: str, arms: Sequence[str]) -> str | None:
        """The first reason that concerns class `cls` or one of the `arms`, without its subject."""
        for said in self.reasons:
            about, _, what = said.partition(": ")
            if about == cls or about in arms:
                return what if about == cls else said
        return None


def judge(
    evidence: Evidence,
    hypothesis: Hypothesis,
    caveats: list[str],
    temperature: float | None = None,
    resamples: int = RESAMPLES,
    design: Design | None = None,
) -> Verdict:
    """The verdict on the evidence's final samples, every guard applied (see `rule.rule_text`).

    `temperature`: the workload's; at 0 the arms' outputs are compared by hash. One variant at
    one load is an A/B: each class decided at `CONFIDENCE`. More (a sweep) is a family of
    comparisons per class, each decided at Bonferroni's level (`sweep`). `design`: a run that
    stops when decided, each class then decided by its confidence sequence (`anytime`).
    """
    if len(evidence.challengers) * len(evidence.loads) > 1:
        return sweep(evidence, hypothesis, caveats, temperature, resamples, design)
    unit = unit_of(evidence, hypothesis)
    compared = compare(
        evidence, evidence.challenger, hypothesis, temperature, resamples, design=design
    )
    per_class, reasons = compared.per_class, compared.reasons
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], reasons),
        variant=evidence.challenger,
        method="bootstrap",
        confidence=CONFIDENCE,
        rule=rule.rule_text(hypothesis, unit) + anytime.rule_text(design, unit, CONFIDENCE),
        per_class=per_class,
        caveats=list(dict.fromkeys([*caveats, *reasons, *compared.notes])),
        unit=unit,
        estimator=ESTIMATOR[unit],
        interval=list(dict.fromkeys(c.interval for c in per_class.values() if c.interval)),
        guards=rule.guard_texts(hypothesis, unit),
        reasons=list(dict.fromkeys(reasons)),
    )


def compare(
    evidence: Evidence,
    variant: str,
    hypothesis: Hypothesis,
    temperature: float | None,
    resamples: int,
    confidence: float = CONFIDENCE,
    window_notes: bool = True,
    design: Design | None = None,
) -> Compared:
    """`variant` against the baseline over the evidence of one load, each class decided by its
    interval at `confidence` and every guard (the arms' window caveats left out unless
    `window_notes`: a sweep states them once per arm and load)."""
    final = evidence.final()[0]
    unit = unit_of(evidence, hypothesis)
    reasons: list[str] = []
    notes: list[str] = []
    for arm in (evidence.baseline, variant):
        said: list[str] = []
        _tell(arm, rule.on_windows(evidence.windows.get(arm, [])), reasons, said)
        notes += said if window_notes else []
    attempts = evidence.attempts()
    per_class: dict[str, ClassVerdict] = {}
    for cls in evidence.classes:
        case = _case(evidence, variant, cls, final, attempts, hypothesis, unit, temperature)
        decided = _decide(cls, case, unit, resamples, reasons, notes, confidence, design)
        if decided is not None:
            per_class[cls] = decided
    if unit == "prompt" and per_class and all((c.rounds or 1) < 2 for c in per_class.values()):
        notes.append(
            "one round: the arms ran one after the other, so time is confounded with the arm "
            "(no drift check)"
        )
    return Compared(per_class, reasons, notes)


def sweep(
    evidence: Evidence,
    hypothesis: Hypothesis,
    caveats: list[str],
    temperature: float | None = None,
    resamples: int = RESAMPLES,
    design: Design | None = None,
) -> Verdict:
    """Every variant against the baseline at every load, in every class: the cells, each
    decided by its simultaneous (Bonferroni) interval, so that the chance of any wrong decisive
    cell in a class stays within 1 - CONFIDENCE; per load the best configuration with its
    probability (`best.choose`); every configuration's throughput against latency, and their
    front (`pareto.front`). `variant` and `per_class` are the headline: at the first load,
    the variant whose classes' effects go furthest in the hypothesised direction."""
    unit = unit_of(evidence, hypothesis)
    comparisons = len(evidence.challengers) * len(evidence.loads)
    confidence = 1 - (1 - CONFIDENCE) / comparisons
    compared: dict[tuple[str, int], Compared] = {}
    cells: list[Cell] = []
    windows: list[str] = []  # the window guards' caveats, once per arm and load
    for level, load in enumerate(evidence.loads):
        here = at_level(evidence, level)
        for arm in evidence.variants:
            found_there = rule.on_windows(here.windows.get(arm, []))
            windows += [f"{_where(arm, load)}: {c}" for c in found_there.caveats]
        for variant in evidence.challengers:
            found = compare(
                here, variant, hypothesis, temperature, resamples, confidence, False, design
            )
            if "sweep_step" in load:  # an import's step where the arms were sent different loads
                found.reasons.insert(0, f"{variant}: {rule.UNEQUAL_LOADS}")
            compared[(variant, level)] = found
            for cls in evidence.classes:
                cells.append(cell(variant, load, cls, found, evidence.baseline))
    headline = max(
        evidence.challengers,
        key=lambda v: _going(compared[(v, 0)].per_class.values(), hypothesis),
    )
    chosen = compared[(headline, 0)]
    notes = [*chosen.notes, *windows]
    for (variant, level), found in compared.items():
        if (variant, level) != (headline, 0):
            where = _where(variant, evidence.loads[level])
            notes += [f"{where}, {said}" for said in [*found.reasons, *found.notes]]
    per_class = chosen.per_class
    family = Family(method="bonferroni", comparisons=comparisons, cell_confidence=confidence)
    points = pareto.front(evidence, resamples)
    front_rule = f" {pareto.rule_text(len(points))}" if points else ""
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], chosen.reasons),
        variant=headline,
        method="bootstrap",
        confidence=CONFIDENCE,
        rule=rule.rule_text(hypothesis, unit)
        + " "
        + rule.family_text(
            family,
            unit,
            stepped=any("sweep_step" in x for x in evidence.loads),
            constraints=hypothesis.constraints,
        )
        + front_rule
        + anytime.rule_text(design, unit, confidence),
        per_class=per_class,
        caveats=list(dict.fromkeys([*caveats, *chosen.reasons, *notes])),
        unit=unit,
        estimator=ESTIMATOR[unit],
        interval=list(
            dict.fromkeys(
                c.interval for f in compared.values() for c in f.per_class.values() if c.interval
            )
        ),
        guards=rule.guard_texts(hypothesis, unit),
        reasons=list(dict.fromkeys(chosen.reasons)),
        **known(load=evidence.loads[0] or None, pareto=points or None),
        family=family,
        cells=cells,
        best=[
            b
            for level, load in enumerate(evidence.loads)
            if unit != "request"  # unpaired requests: no draw of prompts pairs the arms
            and "sweep_step" not in load  # nor is there one load to be best at
            and (b := _best(at_level(evidence, level), load, hypothesis, unit)) is not None
        ],
    )


def _best(evidence: Evidence, load: Load, hypothesis: Hypothesis, unit: Unit) -> Best | None:
    """The best configuration at one load's evidence, those breaking a constraint left out."""
    left_out = best.excluded(evidence.final()[0], evidence.variants, hypothesis.constraints)
    return best.choose(load, _unit_means(evidence, hypothesis, unit), hypothesis, left_out)


def _unit_means(evidence: Evidence, hypothesis: Hypothesis, unit: Unit) -> best.UnitMeans:
    """arm -> class -> unit -> the unit's mean of the primary metric, over the final samples."""
    final = evidence.final()[0]
    out: dict[str, dict[str, dict[int, float]]] = {}
    for arm in evidence.variants:
        for cls in evidence.classes:
            mine = [s for s in final if (s.variant, s.prompt_class) == (arm, cls)]
            cells = _cells(mine, hypothesis.primary_metric, unit)
            out.setdefault(arm, {})[cls] = {u: _mean(r.values()) for u, r in cells.items()}
    return out


def cell(variant: str, load: Load, cls: str, found: Compared, baseline: str) -> Cell:
    """The cell of `variant` at `load` in `cls`: its class verdict, inconclusive where a reason
    holds the comparison (a token mismatch of either arm, a class without usable data)."""
    decided = found.per_class.get(cls)
    held = found.held(cls, (baseline, variant))
    if decided is None:
        return Cell.model_validate(
            {
                "variant": variant,
                "load": load,
                "class": cls,
                "outcome": Outcome.INCONCLUSIVE,
                "reason": held or "no usable data",
            }
        )
    return Cell.model_validate(
        {
            "variant": variant,
            "load": load,
            "class": cls,
            "outcome": Outcome.INCONCLUSIVE if held else decided.outcome,
            **known(
                effect=decided.effect,
                ci_low=decided.ci_low,
                ci_high=decided.ci_high,
                reason=held or decided.reason,
            ),
        }
    )


def _going(verdicts: Iterable[ClassVerdict], hypothesis: Hypothesis) -> float:
    """How far a variant's classes go in the hypothesised direction: the mean of their effects
    on the log scale, as the hypothesis reads them (-inf without one)."""
    logs = [rule.toward(hypothesis, math.log1p(v.effect)) for v in verdicts if v.effect > -1]
    return math.fsum(logs) / len(logs) if logs else -math.inf


def _where(variant: str, load: Load) -> str:
    """A cell's variant and load in words: `ngram-k3 at concurrency 8`."""
    if not load:
        return variant
    return f"{variant} at " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in load.items())


def decide_class(
    baseline: Cells,
    variant: Cells,
    hypothesis: Hypothesis,
    unit: Unit = "prompt",
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    design: Design | None = None,
) -> tuple[ClassVerdict, list[str]]:
    """One class's verdict from its paired units, with the guards on its effect applied, and the
    caveats they raise. Units count only with values in both arms; a class with too few is
    inconclusive, its per-unit effects still given. With `design` (a run that stops when
    decided) the interval is a confidence sequence, over the prompts paired in the last round
    that has any (`anytime.Design.terms`)."""
    paired = sorted(set(baseline) & set(variant))
    if not paired:
        raise ValueError("a class verdict needs a unit with values in both arms")
    terms, early = None, ""
    if design is not None:
        paired, terms, early = anytime.looked(baseline, variant, paired, unit, design, confidence)
    effect = stats.paired_effect(
        [_mean(baseline[u].values()) for u in paired],
        [_mean(variant[u].values()) for u in paired],
        confidence,
        resamples,
        n_baseline=sum(len(r) for u in paired for r in baseline[u].values()),
        n_variant=sum(len(r) for u in paired for r in variant[u].values()),
        anytime=terms,
    )
    rounds = {r for u in paired for r in (*baseline[u], *variant[u])}
    drift = (
        drifts.drift(baseline, variant, paired) if unit == "prompt" and len(rounds) > 1 else None
    )
    outcome, why = rule.interval_outcome(effect, hypothesis)
    found = rule.on_effect(rule.Decision(hypothesis, unit, effect, outcome, effect.units, drift))
    agreed = (
        machines.check(baseline, variant, paired, hypothesis, outcome, confidence)
        if unit == "prompt" and not (found.hold or early)
        else None
    )
    apart = agreed.hold if agreed else ""  # the machines disagree: more prompts would not lift it
    hold = found.hold or apart
    caveats = [*found.caveats, *([agreed.caveat] if agreed and agreed.caveat else [])]
    outcome = Outcome.INCONCLUSIVE if hold or early else outcome
    verdict = ClassVerdict(
        outcome=outcome,
        **known(
            effect=rounded(effect.effect),
            ci_low=rounded(effect.ci_low),
            ci_high=rounded(effect.ci_high),
            drift=None if drift is None else rounded(drift.most),
            reason=hold or early or why or None,
            prompts_needed=_needed(
                effect, hypothesis, rule.minimum_units(hypothesis, unit), confidence, terms
            )
            if outcome == Outcome.INCONCLUSIVE and found.lifts and not early and not apart
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


def overall(outcomes: Sequence[Outcome], reasons: Sequence[str] = ()) -> Outcome:
    """The classes' common outcome; mixed when decisive outcomes differ; else inconclusive."""
    if reasons or not outcomes:
        return Outcome.INCONCLUSIVE
    if {Outcome.SUPPORTED, Outcome.REFUTED} <= set(outcomes):
        return Outcome.MIXED
    return outcomes[0] if len(set(outcomes)) == 1 else Outcome.INCONCLUSIVE


def judge_means(
    evidence: Evidence,
    measurements: Measurements,
    hypothesis: Hypothesis,
    caveats: list[str],
    allow: bool,
) -> Verdict:
    """A verdict from means alone (no samples, so no interval): inconclusive unless allowed."""
    metric = hypothesis.primary_metric
    per_class: dict[str, ClassVerdict] = {}
    reasons = []
    for cls in evidence.classes:
        base = measurements.get(evidence.baseline, {}).get(cls, {}).get(metric)
        other = measurements.get(evidence.challenger, {}).get(cls, {}).get(metric)
        if not (base and other and base.mean):
            reasons.append(f"{cls}: no {metric} on one side")
            continue
        effect = other.mean / base.mean - 1
        per_class[cls] = ClassVerdict(
            outcome=rule.outcome_of(hypothesis, effect, effect) if allow else Outcome.INCONCLUSIVE,
            effect=rounded(effect) or 0.0,
            n_baseline=base.n or 0,
            n_variant=other.n or 0,
            **known(reason=None if allow else "no confidence interval (no per-request samples)"),
        )
    notes = [f"{cls}: {c.reason}" for cls, c in per_class.items() if c.reason]
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], reasons),
        variant=evidence.challenger,
        method="summary",
        rule=rule.summary_rule_text(hypothesis, allow),
        per_class=per_class,
        caveats=list(dict.fromkeys([*caveats, *reasons, *notes])),
        estimator="ratio of the reported means",
        reasons=reasons,
    )


# --- the pieces -----------------------------------------------------------------------------


def _tell(about: str, found: rule.Finding, reasons: list[str], notes: list[str]) -> None:
    """Add what guards found about a variant or a class to the verdict's reasons and caveats."""
    reasons += [f"{about}: {r}" for r in found.refusals]
    notes += [f"{about}: {c}" for c in found.caveats]


def _case(
    evidence: Evidence,
    variant: str,
    cls: str,
    final: list[Sample],
    attempts: Mapping[tuple[str, str, int], Attempts],
    hypothesis: Hypothesis,
    unit: Unit,
    temperature: float | None,
) -> rule.Case:
    """One class's final samples per arm, its failure rates, and at temperature 0 the arms'
    output agreement."""
    arms = (evidence.baseline, variant)
    mine = {arm: [s for s in final if (s.variant, s.prompt_class) == (arm, cls)] for arm in arms}
    rates = [
        next((a.failure_rate for k, a in attempts.items() if k[:2] == (arm, cls)), 0.0)
        for arm in arms
    ]
    agreement = _agreement(mine) if unit == "prompt" and temperature == 0 else None
    return rule.Case(hypothesis, arms, mine, (rates[0], rates[1]), agreement)


def _decide(
    cls: str,
    case: rule.Case,
    unit: Unit,
    resamples: int,
    reasons: list[str],
    notes: list[str],
    confidence: float = CONFIDENCE,
    design: Design | None = None,
) -> ClassVerdict | None:
    """One class's verdict, every guard on its samples, values and effect applied (None when it
    has no usable values); what the guards found is added to `reasons` and `notes`."""
    hypothesis, arms = case.hypothesis, case.arms
    found = rule.on_samples(case)
    _tell(cls, found, reasons, notes)
    keep, metric = found.keep, hypothesis.primary_metric
    kept = {
        arm: [s for s in case.samples[arm] if keep is None or paired_by(s) in keep] for arm in arms
    }
    baseline, variant = (_cells(kept[arm], metric, unit) for arm in arms)
    values = rule.Values(arms, (baseline, variant), metric, unit)
    _tell(cls, rule.on_values(values), reasons, notes)
    if not values.paired:
        return None
    if unit == "request":
        decided, raised = _unpaired(*values.cells, hypothesis, confidence)
    else:
        decided, raised = decide_class(
            *values.cells, hypothesis, unit, resamples, confidence, design
        )
    notes += [f"{cls}: {c}" for c in raised]
    if found.hold:  # more prompts would not lift it: no prompts_needed
        decided = decided.model_copy(
            update={
                "outcome": Outcome.INCONCLUSIVE.value,  # as validation stores it
                "reason": found.hold,
                "prompts_needed": None,
            }
        )
    if decided.reason:
        notes.append(f"{cls}: {decided.reason}")
    agreement = case.agreement
    decided_on = None
    if agreement is not None:
        decided_on = "all-prompts" if keep == agreement.prompts else "same-output-prompts"
    return decided.model_copy(
        update=known(
            failure_rate_baseline=rounded(case.rates[0]),
            failure_rate_variant=rounded(case.rates[1]),
            same_output=None if agreement is None else rounded(agreement.share),
            decided_on=decided_on,
        )
    )


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
            out[index if unit == "request" else paired_by(s)][s.round or 0].append(values)
    return out


def _needed(
    effect: Effect,
    hypothesis: Hypothesis,
    at_least: int,
    confidence: float = CONFIDENCE,
    anytime: stats.Anytime | None = None,
) -> int | None:
    """About how many units would decide at the minimum effect, from the spread between them
    (never fewer than the rule's minimum, `at_least`); with `anytime`, by its sequence."""
    threshold = rule.toward(hypothesis, hypothesis.minimum_effect)
    if threshold <= -1 or effect.effect <= -1:
        return None
    distance = abs(math.log1p(effect.effect) - math.log1p(threshold))
    needed = stats.units_needed(effect.spread, distance, confidence, anytime)
    return None if needed is None else max(needed, at_least)


def _agreement(mine: Mapping[str, list[Sample]]) -> rule.Agreement:
    """The arms' outputs compared prompt by prompt: a prompt agrees when every successful
    request of both arms produced one and the same hash."""
    arms = list(mine)
    prompts = {paired_by(s) for s in mine[arms[0]]} & {paired_by(s) for s in mine[arms[1]]}
    hashes = {
        p: [{s.output_hash for s in mine[a] if paired_by(s) == p} for a in arms] for p in prompts
    }
    unknown = {p for p, sets in hashes.items() if any(None in h for h in sets)}
    agree = {p for p, (a, b) in hashes.items() if p not in unknown and a == b and len(a) == 1}
    return rule.Agreement(frozenset(prompts), frozenset(agree), frozenset(unknown))


def _unpaired(
    baseline: Cells, variant: Cells, hypothesis: Hypothesis, confidence: float = CONFIDENCE
) -> tuple[ClassVerdict, list[str]]:
    """A class of unpaired requests (each its own prompt): a two-sample bootstrap over them."""
    b = [_mean(per_round.values()) for per_round in baseline.values()]
    v = [_mean(per_round.values()) for per_round in variant.values()]
    effect = stats.relative_effect(b, v, confidence)
    outcome, why = rule.interval_outcome(effect, hypothesis)
    found = rule.on_effect(
        rule.Decision(hypothesis, "request", effect, outcome, min(len(b), len(v)))
    )
    return (
        ClassVerdict(
            outcome=Outcome.INCONCLUSIVE if found.hold else outcome,
            **known(
                effect=rounded(effect.effect),
                ci_low=rounded(effect.ci_low),
                ci_high=rounded(effect.ci_high),
                reason=found.hold or why or None,
            ),
            n_baseline=len(b),
            n_variant=len(v),
            unit="request",
            interval=effect.interval,
        ),
        list(found.caveats),
    )
