"""A look at a running experiment that stops when decided: whether every class is decided.

And which of a sweep's variants leave the race (ruled out at every load). `kbgen bench` hands
`looker` to the driver, which calls it every batch of requests and at the end of every window;
the decision is the verdict's own, on the samples so far.
"""

from __future__ import annotations

from kbgen.bench.driver import Look, Looked
from kbgen.bench.runs import RunFolder
from kbgen.bench.spec import ExperimentSpec
from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import verdict
from kbgen.record.anytime import Design
from kbgen.record.evidence import Evidence, at_level, evidence_of_run
from kbgen.record.rule import CONFIDENCE
from kbgen.record.stats import RESAMPLES


def looker(spec: ExperimentSpec, folder: RunFolder) -> Look:
    """The look of `spec`'s run in `folder`: nothing decided in a round that may not stop."""
    design = Design(spec.workload.rounds)

    def look(round_: int) -> Looked:
        if round_ not in design.looks():
            return Looked()
        evidence = evidence_of_run(folder, spec)
        found = outcomes(evidence, spec.hypothesis, spec.workload.temperature, design)
        decided = all(o != Outcome.INCONCLUSIVE for c in found.values() for o in c.values())
        drop = {}
        if len(found) > 1:  # a sweep: who is ruled out at every load leaves
            for variant in evidence.challengers:
                mine = [o for (v, _), c in found.items() if v == variant for o in c.values()]
                if mine and all(o == Outcome.REFUTED for o in mine):
                    drop[variant] = (
                        f"refuted in every class at every load by round {round_ + 1}: "
                        "the claimed change is ruled out"
                    )
        return Looked(decided=decided, drop=drop)

    return look


def outcomes(
    evidence: Evidence, hypothesis: Hypothesis, temperature: float | None, design: Design
) -> dict[tuple[str, int], dict[str, Outcome]]:
    """Each comparison's (variant, load level) outcome per class under a stopping design, as
    the verdict would decide them now."""
    comparisons = len(evidence.challengers) * len(evidence.loads)
    confidence = 1 - (1 - CONFIDENCE) / comparisons
    out: dict[tuple[str, int], dict[str, Outcome]] = {}
    for level, load in enumerate(evidence.loads):
        here = at_level(evidence, level)
        for variant in evidence.challengers:
            found = verdict.compare(
                here, variant, hypothesis, temperature, RESAMPLES, confidence, False, design
            )
            out[(variant, level)] = {
                cls: Outcome(verdict.cell(variant, load, cls, found, evidence.baseline).outcome)
                for cls in evidence.classes
            }
    return out
