"""The rule in words, for the record: the guards', stopping's, the family's, the means'.

The rule a verdict is decided by (its unit, interval and guards, from `rule`'s data), how a
design that stops decides, how a record's family of comparisons is controlled, and the rule of
a verdict from reported means alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from kbgen.kb.models import Constraint, Family, Hypothesis, Unit
from kbgen.record.rule import CONFIDENCE, ESTIMATOR, GUARDS, target
from kbgen.record.stats import RESAMPLES

OVERALL = (
    "Overall: the classes' common outcome; mixed when they reach different decisive outcomes; "
    "inconclusive otherwise."
)


def guard_texts(hypothesis: Hypothesis, unit: Unit) -> list[str]:
    """The guards `verdict.judge` applies, in words, for the record."""
    return [g.text(hypothesis, unit) for g in GUARDS]


def rule_text(hypothesis: Hypothesis, unit: Unit) -> str:
    """The rule in words, for the record."""
    m, beyond, short = target(hypothesis)
    metric = hypothesis.primary_metric
    units = {"prompt": "prompts", "round": "rounds", "request": "requests"}[unit]
    interval = (
        f"a {CONFIDENCE:.0%} BCa bootstrap interval over requests"
        if unit == "request"
        else f"a {CONFIDENCE:.0%} Student-t interval on the {units}' log ratios (each of "
        f"the {units} a cluster of requests)"
    )
    return (
        f"Unit: the {unit}. Effect per class = {ESTIMATOR[unit]} of {metric} - 1, with "
        f"{interval}. Supported: the interval lies {beyond} {m}. Refuted: it lies {short} {m} "
        "(the claimed change is ruled out). Inconclusive: it contains "
        f"{m}, or a guard holds: " + "; ".join(guard_texts(hypothesis, unit)) + f". {OVERALL}"
    )


def stopping_text(rounds: int, unit: Unit, alphas: Sequence[float]) -> str:
    """How a design that stops when decided decides, in words, for the record (`alphas`: the
    error each round that may stop spends)."""
    units = "rounds" if unit == "round" else "prompts paired in the last round measured"
    spent = ", ".join(f"{a:.2%}" for a in alphas)
    return (
        f"Stopping: the run looks at the end of every round from the second on, when every arm "
        f"still racing has run each round so far (the evidence balanced: a linear drift of the "
        f"server cancels between the two orders of the arms), up to {rounds} rounds, and stops "
        f"when every class is decided or the budget is spent. Each look decides by the interval "
        f"above over the {units}, at its own share of the error, halving from the first look "
        f"({spent} of each comparison's): together the looks err no more than one fixed "
        "interval would (Bonferroni over the looks, whatever their dependence), so looking "
        "does not decide by chance."
    )


def family_text(
    family: Family,
    unit: Unit,
    stepped: bool = False,
    constraints: Sequence[Constraint] = (),
    sweep: bool = True,
) -> str:
    """How a record keeps its many comparisons from deciding by chance, and for a `sweep` what
    `best` means, in words, for the record; `stepped`: some of its levels are steps of an
    imported sweep whose arms were sent different loads (`sweep_step`); `constraints`: the
    hypothesis' bounds on the best."""
    units = {"prompt": "prompts", "round": "rounds", "request": "requests"}[unit]
    bounds = "; ".join(f"{c.metric} {c.statistic} at most {c.at_most:g} ms" for c in constraints)
    family_words = (
        f"Family: {family.comparisons} comparisons in the record (every variant at every load "
        "against the baseline at the same load, in every class), each decided by its "
        f"{family.cell_confidence:.2%} interval (Bonferroni: 1 - {1 - CONFIDENCE:.0%} / "
        f"{family.comparisons}), so that the chance of any wrong decisive comparison in the "
        f"whole record (its outcome, the plan tasks it ticks, what kbgen diff reads) stays "
        f"within {1 - CONFIDENCE:.0%}; the intervals shown are these."
    )
    if not sweep:
        return family_words
    return (
        family_words + " The headline (`variant`, "
        "`per_class`) is the variant that goes furthest in the hypothesised direction at the "
        "first load. Best per load: the configuration, the baseline included, with the highest "
        f"mean log {units}' value over classes; its probability is its share of "
        f"{RESAMPLES:,} resamples of {units} (paired across every arm, within each class) that "
        f"it wins; ties are the configurations it does not beat in at least 1 - "
        f"{1 - CONFIDENCE:.0%} / (configurations - 1) of them."
        + (
            " A level that is a `sweep_step` (the tool sent each arm its own load at that step "
            "of its sweep) compares no arms: its cells are inconclusive, and it has no best."
            if stepped
            else ""
        )
        + (
            f" Only a configuration that keeps {bounds} over all its requests at a load, every "
            "class pooled, can be the best there; one that breaks it, or has no figure to show "
            "it keeps it, is excluded."
            if constraints
            else ""
        )
    )


def summary_rule_text(hypothesis: Hypothesis, allowed: bool) -> str:
    """The rule of a verdict from reported means alone (`verdict.judge_means`), in words: it
    applies no guard, so it names none; and it decides only where `allowed` (a summary-only
    verdict asked for with --allow-summary-only)."""
    m, beyond, short = target(hypothesis)
    effect = (
        f"Effect = mean({hypothesis.primary_metric}) of the variant / baseline - 1 per class, "
        "from the reported means (no samples, so no interval"
    )
    if not allowed:
        return (
            f"{effect}). A summary-only verdict was not allowed (--allow-summary-only), so every "
            f"class is inconclusive: the effect is reported, not decided. {OVERALL}"
        )
    return (
        f"{effect}: a summary-only verdict, allowed explicitly with --allow-summary-only). "
        f"Supported: the reported change lies {beyond} {m}. Refuted: it lies {short} {m} (a "
        f"point estimate, nothing is ruled out with confidence). {OVERALL}"
    )
