"""The best configuration at one load of a sweep, as a distribution: a probability, and ties.

Numbers in, a `Best` out (the resampling is `stats.best_of`); docs/design.md, "Many
comparisons, and the best".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kbgen.kb.models import Best, Constraint, Hypothesis, Load
from kbgen.record import stats
from kbgen.record.rule import CONFIDENCE
from kbgen.record.stats import RESAMPLES
from kbgen.run.samples import Sample

# arm -> class -> unit (prompt index or round) -> the unit's mean value of the primary metric
UnitMeans = Mapping[str, Mapping[str, Mapping[int, float]]]


def choose(
    load: Load,
    means: UnitMeans,
    hypothesis: Hypothesis,
    excluded: list[str] | None = None,
    resamples: int = RESAMPLES,
) -> Best | None:
    """The best of the arms in `means` (those `excluded` by a constraint left out) at `load`;
    None with fewer than two arms left, or no class with two units that every arm measured."""
    excluded = excluded or []
    arms = [a for a in means if a not in excluded]
    if len(arms) < 2:
        return None
    sign = 1.0 if hypothesis.direction == "increase" else -1.0
    classes = []
    alone: dict[str, str] = {}
    for cls in sorted({c for a in arms for c in means[a]}):
        units = sorted(set.intersection(*(set(means[a].get(cls, {})) for a in arms)))
        if len(units) >= 2:
            logs = [[sign * math.log(means[a][cls][u]) for u in units] for a in arms]
            classes.append(logs)
            alone[cls] = arms[max(range(len(arms)), key=lambda i: math.fsum(logs[i]))]
    if not classes:
        return None
    top, wins, beats = stats.best_of(classes, resamples)
    beaten = 1 - (1 - CONFIDENCE) / (len(arms) - 1)
    ties = [arm for i, arm in enumerate(arms) if i != top and beats[i] < beaten]
    return Best(
        load=load,
        variant=arms[top],
        probability_best=round(wins, 4),
        ties=ties,
        excluded=list(excluded),
        per_class=alone if len(alone) > 1 else None,
    )


def excluded(
    final: Sequence[Sample], arms: Sequence[str], constraints: Sequence[Constraint]
) -> list[str]:
    """The arms whose requests in `final` (one load's final samples, every class) break one of
    the `constraints`, or have no figure of its metric to show they keep it."""
    out = []
    for arm in arms:
        mine = [s.metrics() for s in final if s.variant == arm]
        for bound in constraints:
            values: list[float] = []
            for m in mine:
                value = m.get(bound.metric)
                values += value if isinstance(value, list) else [] if value is None else [value]
            figure = stats.describe(values).get(bound.statistic) if values else None
            if figure is None or figure > bound.at_most:
                out.append(arm)
                break
    return out
