"""The server's drift across rounds: each unit's effect balanced against it, and its figures.

The figures (each arm against itself across rounds, the rounds' disagreement) are what the
DRIFT guard in `rule` reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from kbgen.record import rule
from kbgen.record.rule import Cells


def request_mean(rounds: Iterable[Sequence[Sequence[float]]]) -> float:
    """The mean over every value of a unit's requests, whatever the round."""
    values = [x for requests in rounds for request in requests for x in request]
    return math.fsum(values) / len(values)


def balanced(
    baseline: Mapping[int, Sequence[Sequence[float]]],
    variant: Mapping[int, Sequence[Sequence[float]]],
) -> float:
    """A unit's log ratio (variant / baseline) with each order of the arms weighted half.

    Round r runs the arms in the seeded order when r is even and in its reverse when r is odd
    (`run.design.order`), so a linear drift of the server adds +d to the even rounds' log ratios
    and -d to the odd rounds': the mean of the two orders' means cancels it, for any number of
    rounds that has both (with 3 rounds the weights are 1/4, 1/2, 1/4). A unit with one order
    only (one round) keeps the drift: `orders` tells. Without a round in both arms: the ratio of
    the arms' means over all their requests.
    """
    both = sorted(set(baseline) & set(variant))
    if not both:
        return math.log(request_mean(variant.values()) / request_mean(baseline.values()))
    by_order: dict[int, list[float]] = {}
    for r in both:
        ratio = request_mean([variant[r]]) / request_mean([baseline[r]])
        by_order.setdefault(r % 2, []).append(math.log(ratio))
    return math.fsum(math.fsum(x) / len(x) for x in by_order.values()) / len(by_order)


def orders(baseline: Cells, variant: Cells, paired: Iterable[int]) -> int:
    """How many of the two orders of the arms (round parities) pair any of the units."""
    return len({r % 2 for u in paired for r in set(baseline[u]) & set(variant[u])})


def drift(baseline: Cells, variant: Cells, paired: list[int]) -> rule.Drift:
    """Each arm against itself across rounds (the larger drift of the two), and the range of the
    per-round effects with the number of rounds that have one."""
    return rule.Drift(
        max(
            _arm_drift({u: baseline[u] for u in paired}),
            _arm_drift({u: variant[u] for u in paired}),
        ),
        *_disagreement(baseline, variant, paired),
    )


def _arm_drift(cells: Cells) -> float:
    """An arm against itself across rounds, paired by prompt: the range of its round levels.

    A round's level is the mean log ratio of its prompts' means to the same prompts' means in
    the first round; the drift is exp(max - min) - 1 (0 with one round).
    """
    rounds = sorted({r for per_round in cells.values() for r in per_round})
    if len(rounds) < 2:
        return 0.0
    first = rounds[0]
    levels = [0.0]
    for r in rounds[1:]:
        logs = [
            math.log(request_mean([per_round[r]]) / request_mean([per_round[first]]))
            for per_round in cells.values()
            if r in per_round and first in per_round
        ]
        if logs:
            levels.append(math.fsum(logs) / len(logs))
    return math.expm1(max(levels) - min(levels))


def _disagreement(baseline: Cells, variant: Cells, paired: list[int]) -> tuple[float, int]:
    """The range of the per-round effects (mean log ratio over each round's paired prompts),
    and how many rounds have one."""
    effects = []
    for r in sorted(
        {r for u in paired for r in baseline[u]} & {r for u in paired for r in variant[u]}
    ):
        logs = [
            math.log(request_mean([variant[u][r]]) / request_mean([baseline[u][r]]))
            for u in paired
            if r in baseline[u] and r in variant[u]
        ]
        if logs:
            effects.append(math.fsum(logs) / len(logs))
    return (max(effects) - min(effects) if effects else 0.0), len(effects)
