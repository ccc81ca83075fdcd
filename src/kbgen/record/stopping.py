"""A look at a running experiment that stops when decided: whether every class is decided.

And which of a sweep's variants leave the race (ruled out at every load). `kbgen bench` hands
`looker` to the driver, which calls it every batch of requests and at the end of every window;
the decision is the verdict's own, on the samples so far.
"""

from __future__ import annotations

from kbgen.kb.models import Cell, Hypothesis, Outcome
from kbgen.record import verdict
from kbgen.record.evidence import Evidence, evidence_of_run
from kbgen.record.rule import STRADDLES, toward
from kbgen.run.design import Design, Look, Looked
from kbgen.run.folder import RunFolder
from kbgen.run.spec import ExperimentSpec


def looker(spec: ExperimentSpec, folder: RunFolder) -> Look:
    """The look of `spec`'s run in `folder`: nothing decided in a round that may not stop."""
    design = Design(spec.workload.rounds)

    def look(round_: int) -> Looked:
        if round_ not in design.looks():
            return Looked()
        evidence = evidence_of_run(folder, spec)
        found = cells(
            evidence,
            spec.hypothesis,
            spec.workload.temperature,
            design,
            spec.workload.accept_time_confound,
        )
        drop = {}
        if len(found) > len(evidence.classes):  # a sweep: who is ruled out leaves the race
            for variant in evidence.challengers:
                why = _left(variant, found, evidence.challengers, spec.hypothesis)
                if why:
                    drop[variant] = f"{why} by round {round_ + 1}"
        gone = set(folder.meta().dropped) | set(drop)  # those left need no deciding
        decided = all(c.outcome != Outcome.INCONCLUSIVE for c in found if c.variant not in gone)
        return Looked(decided=decided, drop=drop)

    return look


def cells(
    evidence: Evidence,
    hypothesis: Hypothesis,
    temperature: float | None,
    design: Design,
    time_confound_ok: bool = False,
) -> list[Cell]:
    """Every comparison's (variant, load level) cell per class under a stopping design, as the
    verdict would decide them now: each at the family's level, so that all hold together."""
    found = verdict.comparisons(evidence, hypothesis, temperature, design, time_confound_ok)
    return [
        verdict.cell(variant, evidence.loads[level], cls, compared, evidence.baseline)
        for (variant, level), compared in found.items()
        for cls in evidence.classes
    ]


def _left(variant: str, found: list[Cell], others: list[str], hypothesis: Hypothesis) -> str:
    """Why `variant` leaves a sweep's race, or '': refuted in every class at every load, or
    worse than another variant in every one of them, their intervals apart (the family's
    intervals hold together, so one lying wholly beyond the other decides it)."""
    mine = {(str(c.load), c.prompt_class): c for c in found if c.variant == variant}
    if mine and all(c.outcome == Outcome.REFUTED for c in mine.values()):
        return "refuted in every class at every load: the claimed change is ruled out"
    for other in others:
        theirs = {(str(c.load), c.prompt_class): c for c in found if c.variant == other}
        if (
            other != variant
            and mine
            and all(
                key in theirs and _below(cell, theirs[key], hypothesis)
                for key, cell in mine.items()
            )
        ):
            return f"worse than {other} in every class at every load, their intervals apart"
    return ""


def _below(mine: Cell, theirs: Cell, hypothesis: Hypothesis) -> bool:
    """Whether `mine`'s interval lies wholly short of `theirs` in the hypothesised direction
    (neither held by a guard)."""
    bounds = (mine.ci_low, mine.ci_high, theirs.ci_low, theirs.ci_high)
    held = [c.reason for c in (mine, theirs) if c.reason and not c.reason.startswith(STRADDLES)]
    if any(b is None for b in bounds) or held:
        return False
    low, high, their_low, their_high = (toward(hypothesis, b or 0.0) for b in bounds)
    return max(low, high) < min(their_low, their_high)
