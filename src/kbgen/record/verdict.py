"""The verdict: from the evidence to supported / refuted / inconclusive / mixed, by `rule`.

`judge` measures the evidence (the prompt as the unit, paired ratios, a cluster-bootstrap
interval) and walks every guard of `rule`; `judge_means` judges imported means alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kbgen.kb.cards import configuration_words
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
from kbgen.record import anytime, best, class_verdict, pareto, rule, rule_words, schedule
from kbgen.record.drifts import request_mean as _mean
from kbgen.record.evidence import Attempts, Evidence, at_level
from kbgen.record.figures import known, rounded, window_throughput
from kbgen.record.rule import CONFIDENCE, ESTIMATOR
from kbgen.record.stats import RESAMPLES
from kbgen.run.design import Design
from kbgen.run.samples import Sample, paired_by


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
    time_confound_ok: bool = False,
    refusals: Sequence[str] = (),
) -> Verdict:
    """The verdict on the evidence's final samples, every guard applied (`rule_words.rule_text`).

    `temperature`: the workload's; at 0 the arms' outputs are compared by hash. One variant at
    one load is an A/B: each class decided at `CONFIDENCE`. More (a sweep) is a family of
    comparisons per class, each decided at Bonferroni's level (`sweep`). `design`: a run that
    stops when decided, each class then decided at its look's share of the error (`anytime`).
    `time_confound_ok`: the spec accepts a verdict from one round. `refusals`: what makes the
    whole comparison inconclusive beyond the guards (`confounds.drafting`).
    """
    if len(evidence.challengers) * len(evidence.loads) > 1:
        return sweep(
            evidence,
            hypothesis,
            caveats,
            temperature,
            resamples,
            design,
            time_confound_ok,
            refusals,
        )
    unit = unit_of(evidence, hypothesis)
    family = family_of(evidence)
    confidence = family.cell_confidence if family else CONFIDENCE
    compared = compare(
        evidence,
        evidence.challenger,
        hypothesis,
        temperature,
        confidence,
        design=design,
        time_confound_ok=time_confound_ok,
    )
    per_class, reasons = compared.per_class, [*refusals, *compared.reasons]
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], reasons),
        variant=evidence.challenger,
        method="samples",
        confidence=CONFIDENCE,
        rule=rule_words.rule_text(hypothesis, unit)
        + (" " + rule_words.family_text(family, unit, sweep=False) if family else "")
        + anytime.rule_text(design, unit, confidence),
        **known(family=family),
        per_class=per_class,
        caveats=list(dict.fromkeys([*caveats, *reasons, *compared.notes])),
        unit=unit,
        estimator=ESTIMATOR[unit],
        interval=list(dict.fromkeys(c.interval for c in per_class.values() if c.interval)),
        guards=rule_words.guard_texts(hypothesis, unit),
        reasons=list(dict.fromkeys(reasons)),
    )


def compare(
    evidence: Evidence,
    variant: str,
    hypothesis: Hypothesis,
    temperature: float | None,
    confidence: float = CONFIDENCE,
    window_notes: bool = True,
    design: Design | None = None,
    time_confound_ok: bool = False,
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
        named = (evidence.groups or {}).get(cls)
        decided = _decide(
            cls, case, unit, reasons, notes, confidence, design, time_confound_ok, named
        )
        if decided is not None:
            per_class[cls] = decided
    return Compared(per_class, reasons, notes)


def sweep(
    evidence: Evidence,
    hypothesis: Hypothesis,
    caveats: list[str],
    temperature: float | None = None,
    resamples: int = RESAMPLES,
    design: Design | None = None,
    time_confound_ok: bool = False,
    refusals: Sequence[str] = (),
) -> Verdict:
    """Every variant against the baseline at every load, in every class: the cells, each
    decided by its simultaneous (Bonferroni) interval, so that the chance of any wrong decisive
    cell in a class stays within 1 - CONFIDENCE; per load the best configuration with its
    probability (`best.choose`); every configuration's throughput against latency, and their
    front (`pareto.front`). `variant` and `per_class` are the headline: at the first load,
    the variant whose classes' effects go furthest in the hypothesised direction."""
    unit = unit_of(evidence, hypothesis)
    family = family_of(evidence)
    assert family is not None  # a sweep has several comparisons
    confidence = family.cell_confidence
    compared = comparisons(evidence, hypothesis, temperature, design, time_confound_ok, refusals)
    cells = [
        cell(variant, evidence.loads[level], cls, found, evidence.baseline)
        for (variant, level), found in compared.items()
        for cls in evidence.classes
    ]
    windows: list[str] = []  # the window guards' caveats, once per arm and load
    for level, load in enumerate(evidence.loads):
        here = at_level(evidence, level)
        for arm in evidence.variants:
            found_there = rule.on_windows(here.windows.get(arm, []))
            windows += [f"{configuration_words(arm, load)}: {c}" for c in found_there.caveats]
    headline = max(
        evidence.challengers,
        key=lambda v: _going(compared[(v, 0)].per_class.values(), hypothesis),
    )
    chosen = compared[(headline, 0)]
    notes = [*chosen.notes, *windows]
    for (variant, level), found in compared.items():
        if (variant, level) != (headline, 0):
            where = configuration_words(variant, evidence.loads[level])
            notes += [f"{where}, {said}" for said in [*found.reasons, *found.notes]]
    bests = [
        b
        for level, load in enumerate(evidence.loads)
        if unit != "request"  # unpaired requests: no draw of prompts pairs the arms
        and "sweep_step" not in load  # nor is there one load to be best at
        and (b := _best(at_level(evidence, level), load, hypothesis, unit)) is not None
    ]
    for b in bests:
        others = {c: arm for c, arm in (b.per_class or {}).items() if arm != b.variant}
        if others:
            notes.append(
                f"best {configuration_words(b.variant, b.load)} over the classes' average, not in "
                + ", ".join(f"{c} (there {arm})" for c, arm in others.items())
            )
    per_class = chosen.per_class
    points = pareto.front(evidence, resamples)
    front_rule = f" {pareto.rule_text(len(points))}" if points else ""
    return Verdict(
        outcome=overall([Outcome(c.outcome) for c in per_class.values()], chosen.reasons),
        variant=headline,
        method="samples",
        confidence=CONFIDENCE,
        rule=rule_words.rule_text(hypothesis, unit)
        + " "
        + rule_words.family_text(
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
        guards=rule_words.guard_texts(hypothesis, unit),
        reasons=list(dict.fromkeys(chosen.reasons)),
        **known(load=evidence.loads[0] or None, pareto=points or None),
        family=family,
        cells=cells,
        best=bests,
    )


def comparisons(
    evidence: Evidence,
    hypothesis: Hypothesis,
    temperature: float | None,
    design: Design | None = None,
    time_confound_ok: bool = False,
    refusals: Sequence[str] = (),
) -> dict[tuple[str, int], Compared]:
    """Every variant against the baseline at every load level, each at the family's level
    (`family_of`), with what holds it: an import's step where the arms were sent different
    loads, a refusal of either arm (`judge`'s)."""
    family = family_of(evidence)
    confidence = family.cell_confidence if family else CONFIDENCE
    out: dict[tuple[str, int], Compared] = {}
    for level, load in enumerate(evidence.loads):
        here = at_level(evidence, level)
        for variant in evidence.challengers:
            found = compare(
                here, variant, hypothesis, temperature, confidence, False, design, time_confound_ok
            )
            if "sweep_step" in load:  # an import's step where the arms were sent different loads
                found.reasons.insert(0, f"{variant}: {rule.UNEQUAL_LOADS}")
            arms = (evidence.baseline, variant)
            found.reasons[:0] = [r for r in refusals if r.partition(": ")[0] in arms]
            out[(variant, level)] = found
    return out


def family_of(evidence: Evidence) -> Family | None:
    """The record's family of comparisons, every variant at every load in every class, and the
    level each is decided at so that the chance of any wrong decisive one stays within
    1 - CONFIDENCE (Bonferroni); None for one comparison."""
    comparisons = len(evidence.challengers) * len(evidence.loads) * len(evidence.classes)
    if comparisons < 2:
        return None
    return Family(
        method="bonferroni",
        comparisons=comparisons,
        cell_confidence=1 - (1 - CONFIDENCE) / comparisons,
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
        rule=rule_words.summary_rule_text(hypothesis, allow),
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
    reasons: list[str],
    notes: list[str],
    confidence: float = CONFIDENCE,
    design: Design | None = None,
    time_confound_ok: bool = False,
    named: Sequence[str | None] | None = None,
) -> ClassVerdict | None:
    """One class's verdict, every guard on its samples, values and effect applied (None when it
    has no usable values); what the guards found is added to `reasons` and `notes`. `named`:
    each prompt's group, by prompt index, where the suite names them."""
    hypothesis, arms = case.hypothesis, case.arms
    found = rule.on_samples(case)
    _tell(cls, found, reasons, notes)
    keep, metric = found.keep, hypothesis.primary_metric
    kept = {
        arm: [s for s in case.samples[arm] if keep is None or paired_by(s) in keep] for arm in arms
    }

    def decide_on(
        kept: dict[str, list[Sample]], tell: bool = True
    ) -> tuple[ClassVerdict, list[str]] | None:
        baseline, variant = (_cells(kept[arm], metric, unit) for arm in arms)
        values = rule.Values(arms, (baseline, variant), metric, unit)
        _tell(cls, rule.on_values(values), reasons if tell else [], notes if tell else [])
        if not values.paired:
            return None
        if unit == "request":
            return class_verdict.unpaired(*values.cells, hypothesis, confidence, time_confound_ok)
        groups = None
        if named is not None and unit == "prompt":
            groups = {
                paired_by(s): g
                for s in [*kept[arms[0]], *kept[arms[1]]]
                if s.prompt_index < len(named) and (g := named[s.prompt_index]) is not None
            }
        return class_verdict.decide(
            *values.cells, hypothesis, unit, confidence, design, time_confound_ok, groups
        )

    found_here = decide_on(kept)
    if found_here is None:
        return None
    decided, raised = found_here
    notes += [f"{cls}: {c}" for c in raised]
    hold = found.hold or schedule.lag_holds(kept, metric, decided, decide_on)
    if hold:  # more prompts would not lift it: no prompts_needed
        decided = decided.model_copy(
            update={
                "outcome": Outcome.INCONCLUSIVE.value,  # as validation stores it
                "reason": hold,
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
