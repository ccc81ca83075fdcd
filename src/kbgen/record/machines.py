"""The machine as a blocking factor: whether the machines of a run over several agree on an effect.

Each machine (a block) ran every arm, so its prompts pair within it and the effect is pooled
over prompt × machine units. Machines that disagree beyond their prompts' spread are a caveat,
and the class is inconclusive where the disagreement changes the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import rule, stats
from kbgen.record.drifts import request_mean
from kbgen.record.rule import CONFIDENCE, Cells
from kbgen.run.samples import block_of


@dataclass(frozen=True)
class Agreement:
    """What the machines of one class say: a caveat where they disagree, and a hold where that
    changes the outcome (empty: they agree)."""

    caveat: str = ""
    hold: str = ""


def check(
    baseline: Cells,
    variant: Cells,
    paired: list[int],
    hypothesis: Hypothesis,
    pooled: Outcome,
    confidence: float = CONFIDENCE,
) -> Agreement | None:
    """The machines' agreement on one class's paired units (None: the units are of one machine).

    Each machine's effect is judged alone with the pooled rule's interval; the machines differ
    when a one-way ANOVA on the per-prompt log ratios says so at 1 - `confidence`. Then the
    pooled outcome changes — inconclusive — where a machine alone, or the machines without it,
    decide otherwise (the rest merely undecided is fewer prompts, not a disagreement).
    """
    blocks = {u: block_of(u) for u in paired}
    if None in blocks.values() or len(set(blocks.values())) < 2:
        return None
    means = {
        u: (request_mean(baseline[u].values()), request_mean(variant[u].values())) for u in paired
    }

    def judged(units: list[int]) -> tuple[float, Outcome]:
        effect = stats.paired_effect(
            [means[u][0] for u in units], [means[u][1] for u in units], confidence
        )
        return effect.effect, rule.interval_outcome(effect, hypothesis)[0]

    machines = sorted(set(blocks.values()), key=lambda b: b or 0)
    own = {m: [u for u in paired if blocks[u] == m] for m in machines}
    p = stats.machines_differ(
        [stats.log_ratios(*zip(*(means[u] for u in own[m]), strict=True)) for m in machines]
    )
    if p >= 1 - confidence:
        return Agreement()
    alone = {m: judged(own[m]) for m in machines}
    shown = ", ".join(f"machine {m} {alone[m][0]:+.1%}" for m in machines)
    caveat = (
        f"the machines disagree beyond their prompts' spread ({shown}; one-way ANOVA on the "
        f"per-prompt log ratios, p = {p:.2g})"
    )
    decided = (Outcome.SUPPORTED, Outcome.REFUTED)
    changes = []
    for m in machines:
        rest = judged([u for u in paired if blocks[u] != m])[1]
        if any(o in decided and o != pooled for o in (alone[m][1], rest)):
            changes.append(f"machine {m} alone {alone[m][1].value}, the rest {rest.value}")
    if pooled not in decided or not changes:
        return Agreement(caveat)
    hold = (
        f"the machines disagree and it changes the outcome ({'; '.join(changes)}): "
        "the pooled result does not hold on every machine"
    )
    return Agreement(caveat, hold)
