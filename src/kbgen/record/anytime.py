"""Decisions that may stop early: where a design that stops when decided looks, at what error.

A run with `workload.stop: when-decided` looks at the end of each round that may stop; each
look spends its share of the error, halving from the first (docs/design.md, "Stopping").
"""

from __future__ import annotations

from dataclasses import dataclass

from kbgen.kb.models import Unit
from kbgen.record import rule, rule_words
from kbgen.record.rule import Cells


@dataclass(frozen=True)
class Design:
    """A design that stops when decided: at most `rounds` rounds."""

    rounds: int

    def looks(self) -> list[int]:
        """The rounds a look may stop in: every round from the second (two rounds, one of each
        order, are the fewest with a drift check), the one round of a one-round design."""
        return [0] if self.rounds == 1 else list(range(1, self.rounds))

    def alpha_at(self, round_: int, alpha: float) -> float | None:
        """The error the looks inside round `round_` spend, of `alpha` in all: half of it in
        the first round that may stop, a quarter in the next, and so on, scaled to sum to
        `alpha`; None in a round that may not stop."""
        looks = self.looks()
        if round_ not in looks:
            return None
        k = looks.index(round_)
        return alpha * 0.5 ** (k + 1) / (1 - 0.5 ** len(looks))

    def level_at(self, last_round: int, confidence: float) -> float | None:
        """The confidence a look at round `last_round`'s end decides at: 1 - its share of
        the error (`alpha_at`), so that every look together errs at most 1 - `confidence`
        (Bonferroni over the looks, whatever their dependence); None where it may not stop."""
        spent = self.alpha_at(last_round, 1 - confidence)
        return None if spent is None else 1 - spent


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
