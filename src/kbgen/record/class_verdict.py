"""One class's verdict from its paired units: the effect, its interval and the guards on it.

`decide` takes each arm's units (a prompt's requests per round, or a round's throughput) and
returns the class's verdict; `unpaired` does it for requests that cannot be paired. Numbers
in, a `ClassVerdict` out: the simulations (bench/perf/decisions.py) call it as the verdict does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kbgen.kb.models import ClassVerdict, Hypothesis, Outcome, Unit
from kbgen.record import anytime, drifts, machines, rule, stats
from kbgen.record.drifts import request_mean as _mean
from kbgen.record.figures import known, rounded
from kbgen.record.rule import CONFIDENCE, Cells
from kbgen.record.stats import Effect
from kbgen.run.design import Design


def decide(
    baseline: Cells,
    variant: Cells,
    hypothesis: Hypothesis,
    unit: Unit = "prompt",
    confidence: float = CONFIDENCE,
    design: Design | None = None,
    time_confound_ok: bool = False,
    groups: Mapping[int, str] | None = None,
) -> tuple[ClassVerdict, list[str]]:
    """One class's verdict from its paired units, with the guards on its effect applied, and the
    caveats they raise. Units count only with values in both arms; a class with too few is
    inconclusive, its per-unit effects still given. Each unit's log ratio weighs the two orders
    of the arms alike (`drifts.balanced`), and a class measured in one order only is
    inconclusive unless `time_confound_ok`. With `design` (a run that stops when decided) the
    interval is at the look's share of the error, over the prompts paired in the last round
    that has any (`anytime.looked`). With `groups` (unit -> its group: a template, a source) the
    interval's unit is the group, each the mean of its units' log ratios: prompts written from
    one template share their effect, and the claim is then about the templates."""
    paired = sorted(set(baseline) & set(variant))
    if not paired:
        raise ValueError("a class verdict needs a unit with values in both arms")
    early = ""
    if design is not None:  # decided at the look's own share of the error
        paired, confidence, early = anytime.looked(
            baseline, variant, paired, unit, design, confidence
        )
    logs = [drifts.balanced(baseline[u], variant[u]) for u in paired]
    clusters = _grouped(paired, logs, groups) if groups else None
    effect = stats.log_effect(
        logs if clusters is None else [math.fsum(g) / len(g) for g in clusters.values()],
        confidence,
        n_baseline=sum(len(r) for u in paired for r in baseline[u].values()),
        n_variant=sum(len(r) for u in paired for r in variant[u].values()),
    )
    rounds = {r for u in paired for r in (*baseline[u], *variant[u])}
    drift = (
        drifts.drift(baseline, variant, paired) if unit == "prompt" and len(rounds) > 1 else None
    )
    outcome, why = rule.interval_outcome(effect, hypothesis)
    orders = drifts.orders(baseline, variant, paired)
    found = rule.on_effect(
        rule.Decision(
            hypothesis,
            unit,
            effect,
            outcome,
            effect.units,
            drift,
            orders,
            time_confound_ok,
            grouped=clusters is not None,
        )
    )
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
                effect, hypothesis, rule.minimum_units(hypothesis, unit), confidence
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
        per_unit={u: rounded(math.expm1(x)) or 0.0 for u, x in zip(paired, logs, strict=True)},
        **known(groups=None if clusters is None else len(clusters)),
    )
    return verdict, caveats


def _grouped(
    units: list[int], logs: list[float], groups: Mapping[int, str]
) -> dict[str, list[float]]:
    """The units' log ratios by group (a unit without one is a group of its own)."""
    out: dict[str, list[float]] = {}
    for u, x in zip(units, logs, strict=True):
        out.setdefault(groups.get(u, f"unit {u}"), []).append(x)
    return out


def _needed(
    effect: Effect,
    hypothesis: Hypothesis,
    at_least: int,
    confidence: float = CONFIDENCE,
) -> int | None:
    """About how many units would decide at the minimum effect, from the spread between them
    (never fewer than the rule's minimum, `at_least`). None where that is no more than the
    class has: then more units are not what it lacks."""
    threshold = rule.toward(hypothesis, hypothesis.minimum_effect)
    if threshold <= -1 or effect.effect <= -1:
        return None
    distance = abs(math.log1p(effect.effect) - math.log1p(threshold))
    needed = stats.units_needed(effect.spread, distance, confidence)
    if needed is None or max(needed, at_least) <= effect.units:
        return None
    return max(needed, at_least)


def unpaired(
    baseline: Cells,
    variant: Cells,
    hypothesis: Hypothesis,
    confidence: float = CONFIDENCE,
    time_confound_ok: bool = False,
) -> tuple[ClassVerdict, list[str]]:
    """A class of unpaired requests (each its own prompt): a two-sample bootstrap over them."""
    b = [_mean(per_round.values()) for per_round in baseline.values()]
    v = [_mean(per_round.values()) for per_round in variant.values()]
    effect = stats.relative_effect(b, v, confidence)
    outcome, why = rule.interval_outcome(effect, hypothesis)
    found = rule.on_effect(
        rule.Decision(
            hypothesis,
            "request",
            effect,
            outcome,
            min(len(b), len(v)),
            orders=len(_parities(baseline) & _parities(variant)),
            time_confound_ok=time_confound_ok,
        )
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


def _parities(cells: Cells) -> set[int]:
    """The orders of the arms (round parities) an arm's units ran in."""
    return {r % 2 for per_round in cells.values() for r in per_round}
