"""Anytime-valid decisions: where a design that stops when decided may look, at what error.

A run with `workload.stop: when-decided` is judged by confidence sequences; their error is
split over the rounds it may stop in, halving from the first (docs/design.md, "Stopping").
"""

from __future__ import annotations

from dataclasses import dataclass

from kbgen.kb.models import Unit
from kbgen.record import rule, rule_words
from kbgen.record.rule import Cells
from kbgen.record.stats import Anytime


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

    def terms(self, unit: Unit, last_round: int, units: int, alpha: float) -> Anytime | None:
        """The confidence sequence a class is decided by, its last round `last_round` and
        `units` its prompts (or rounds) so far. Rounds as the unit are one sequence, tightest
        at the planned rounds; prompts one sequence per round, over the prompts paired in it."""
        if unit == "round":
            return Anytime(alpha, self.rounds)
        spent = self.alpha_at(last_round, alpha)
        return None if spent is None else Anytime(spent, units)


def looked(
    baseline: Cells,
    variant: Cells,
    paired: list[int],
    unit: Unit,
    design: Design,
    confidence: float,
) -> tuple[list[int], Anytime, str]:
    """A stopping design's units and confidence sequence: with prompts, those paired in the
    last round that pairs any (each with all its rounds); and why the class cannot be decided
    yet (a round that may not stop), or ''."""
    both = {u: set(baseline[u]) & set(variant[u]) for u in paired}
    if not any(both.values()):  # values in both arms, never in one round
        return paired, Anytime(1 - confidence, len(paired)), rule.NO_ROUND
    last = max(max(r) for r in both.values() if r)
    if unit == "prompt":
        paired = [u for u in paired if last in both[u]]
    planned = len(set(baseline) | set(variant))
    terms = design.terms(unit, last, planned, 1 - confidence)
    if terms is None:
        return paired, Anytime(1 - confidence, planned), rule.EARLY
    return paired, terms, ""


def rule_text(design: Design | None, unit: Unit, confidence: float) -> str:
    """The stopping design's rule in words, after a space; '' without one."""
    if design is None:
        return ""
    spent = [a for r in design.looks() if (a := design.alpha_at(r, 1 - confidence))]
    return " " + rule_words.stopping_text(design.rounds, unit, spent)
