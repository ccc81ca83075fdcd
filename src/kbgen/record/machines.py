"""The machine as a blocking factor: whether the machines of a run over several agree on an effect.

Each machine (a block) ran every arm, so its prompts pair within it and the effect is pooled
over prompt × machine units. Machines that disagree beyond their prompts' spread are a caveat,
and the class is inconclusive where the disagreement changes the outcome.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kbgen.bench.samples import block_of
from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import rule, stats
from kbgen.record.drifts import request_mean
from kbgen.record.rule import CONFIDENCE, Cells


@dataclass(frozen=True)
class Agreement:
    """What the machines of one class say: each one's effect and outcome, and the check's
    caveat and hold (empty: they agree, or one machine only)."""

    effects: dict[int, float]
    outcomes: dict[int, Outcome]
    p: float = 1.0
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
    pooled outcome changes — inconclusive — where a machine alone decides otherwise, or the
    machines without it do.
    """
    logs: dict[int, list[float]] = defaultdict(list)
    means: dict[int, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for u in paired:
        block = block_of(u)
        if block is None:
            return None
        b, v = request_mean(baseline[u].values()), request_mean(variant[u].values())
        means[block][0].append(b)
        means[block][1].append(v)
        logs[block].append(stats.log_ratios([b], [v])[0])
    if len(means) < 2:
        return None
    effects, outcomes = {}, {}
    for block, (base, var) in sorted(means.items()):
        effect = stats.paired_effect(base, var, confidence)
        effects[block] = effect.effect
        outcomes[block] = rule.interval_outcome(effect, hypothesis)[0]
    p = stats.machines_differ([logs[block] for block in sorted(logs)])
    if p >= 1 - confidence:
        return Agreement(effects, outcomes, p)
    shown = ", ".join(f"machine {block} {effects[block]:+.1%}" for block in effects)
    caveat = (
        f"the machines disagree beyond their prompts' spread ({shown}; one-way ANOVA on the "
        f"per-prompt log ratios, p = {p:.2g})"
    )
    decided = (Outcome.SUPPORTED, Outcome.REFUTED)
    changes = []
    for block, alone in outcomes.items():
        rest = [u for u in paired if block_of(u) != block]
        without = stats.paired_effect(
            [request_mean(baseline[u].values()) for u in rest],
            [request_mean(variant[u].values()) for u in rest],
            confidence,
        )
        rest_outcome = rule.interval_outcome(without, hypothesis)[0]
        if (alone in decided and alone != pooled) or rest_outcome != pooled:
            changes.append(f"machine {block} alone {alone.value}, the rest {rest_outcome.value}")
    hold = ""
    if pooled in decided and changes:
        hold = (
            f"the machines disagree and it changes the outcome ({'; '.join(changes)}): "
            "the pooled result does not hold on every machine"
        )
    return Agreement(effects, outcomes, p, caveat, hold)
