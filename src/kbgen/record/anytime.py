"""Decisions that may stop early: where a design that stops when decided looks, at what error.

A run with `workload.stop: when-decided` looks at the end of each round that may stop; each
look spends its share of the error, halving from the first (docs/design.md, "Stopping").
"""

from __future__ import annotations

from kbgen.kb.models import Unit
from kbgen.record import rule, rule_words
from kbgen.record.rule import Cells
from kbgen.run.design import Design


def looked(
    baseline: Cells,
    variant: Cells,
    paired: list[int],
    unit: Unit,
    design: Design,
    confidence: float,
) -> tuple[list[int], float, str]:
    """A stopping design's units and the level they are decided at: with prompts, those paired
    in the last round that pairs any (each with all its rounds); and why the class cannot be
    decided yet (a round that may not stop), or ''."""
    both = {u: set(baseline[u]) & set(variant[u]) for u in paired}
    if not any(both.values()):  # values in both arms, never in one round
        return paired, confidence, rule.NO_ROUND
    last = max(max(r) for r in both.values() if r)
    if unit == "prompt":
        paired = [u for u in paired if last in both[u]]
    level = design.level_at(last, confidence)
    if level is None:
        return paired, confidence, rule.EARLY
    return paired, level, ""


def rule_text(design: Design | None, unit: Unit, confidence: float) -> str:
    """The stopping design's rule in words, after a space; '' without one."""
    if design is None:
        return ""
    spent = [a for r in design.looks() if (a := design.alpha_at(r, 1 - confidence))]
    return " " + rule_words.stopping_text(design.rounds, unit, spent)
