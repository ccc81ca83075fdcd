"""A stopping run's time budget (`max_minutes`): what the rest of a round will take.

Predicted from the run's own measurements (run.json): each arm's server starts, its windows at
each load level, and what passes between two windows (warm-up, scrapes, stopping a server).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from kbgen.run.design import Step
from kbgen.run.models import RunMeta


def spent(limit_minutes: float | None, began: float, more_s: float = 0.0) -> bool:
    """Whether `more_s` seconds from now end at or past `limit_minutes` after `began`
    (time.monotonic's); never without a limit."""
    return limit_minutes is not None and time.monotonic() - began + more_s >= limit_minutes * 60


@dataclass(frozen=True)
class _Gaps:
    """Between two windows of one attempt: beyond the start-up where the arm changed (the old
    server stopped, the port freed, the new one warmed up), and where it did not (warm-up and
    scrapes), in seconds; 0 where the run has none."""

    changed: float
    same: float


def _gaps(meta: RunMeta, starts: dict[str, float]) -> _Gaps:
    """What passed between two windows of one attempt, by whether the arm changed (beyond the
    mean start of the arm it changed to, `starts`)."""
    ordered = sorted(
        (w.attempt, w.start_ns, w.end_ns, arm)
        for arm, run in meta.variants.items()
        for w in run.windows
    )
    changed, same = [], []
    for (attempt, _, end, arm), (next_attempt, start, _, next_arm) in itertools.pairwise(ordered):
        if attempt != next_attempt:
            continue
        gap = (start - end) / 1e9
        if arm == next_arm:
            same.append(gap)
        else:
            changed.append(gap - starts.get(next_arm, 0.0))
    return _Gaps(
        changed=max(0.0, fmean(changed)) if changed else 0.0,
        same=fmean(same) if same else 0.0,
    )


def seconds(meta: RunMeta, rest: Sequence[Step], serving: str | None) -> float:
    """How long the windows `rest` (in the order they run) will take, as this run's did: where
    the arm changes (`serving`: the arm whose server runs now), its mean start and what a change
    took beyond a start, else what passes between two windows on one server; then its mean
    window at that load level. An arm not started yet takes the mean start of all arms (one
    measured without a timed start, none: an external or reused server); one not measured at
    that level, the mean window of all. An arm whose only start was a fresh machine's first
    (cold caches) is predicted as slow to start again: a margin the spec's budget must leave."""
    starts = {arm: fmean(run.startup_s) for arm, run in meta.variants.items() if run.startup_s}
    spans: dict[tuple[str, int], list[float]] = {}
    for arm, run in meta.variants.items():
        for window in run.windows:
            span = (window.end_ns - window.start_ns) / 1e9
            spans.setdefault((arm, window.level or 0), []).append(span)  # None: one load
    every_start = fmean([s for run in meta.variants.values() for s in run.startup_s] or [0.0])
    every_span = fmean([s for times in spans.values() for s in times] or [0.0])
    measured = {arm for arm, _ in spans}
    gaps = _gaps(meta, starts)
    total, previous = 0.0, serving
    for _, arm, level in rest:
        if arm == previous:
            total += gaps.same
        elif arm in starts:
            total += starts[arm] + gaps.changed
        else:
            total += (0.0 if arm in measured else every_start) + gaps.changed
        total += fmean(spans.get((arm, level)) or [every_span])
        previous = arm
    return total
