"""A stopping run's wall-time budget (`max_minutes`): whether it is spent, and how long the rest
of a round will take, as long as this run's own starts and windows took."""

from __future__ import annotations

import time
from collections.abc import Sequence
from statistics import fmean

from kbgen.bench.run_models import RunMeta

Step = tuple[int, str, int]  # (round, arm, load level), as the driver's


def spent(limit_minutes: float | None, began: float, more_s: float = 0.0) -> bool:
    """Whether `more_s` seconds from now end at or past `limit_minutes` after `began`
    (time.monotonic's); never without a limit."""
    return limit_minutes is not None and time.monotonic() - began + more_s >= limit_minutes * 60


def seconds(meta: RunMeta, rest: Sequence[Step], serving: str | None) -> float:
    """How long the windows `rest` (in the order they run) will take, as this run's did: each
    arm's mean start where its server must start (the window before is another arm's; `serving`:
    the arm whose server runs now), then its mean window at that load level. An arm not
    started yet takes the mean start of all arms, one not measured at that level the mean
    window of all. Warm-up requests are not counted: they are a window's few seconds."""
    starts = {arm: run.startup_s for arm, run in meta.variants.items() if run.startup_s}
    spans: dict[tuple[str, int], list[float]] = {}
    for arm, run in meta.variants.items():
        for window in run.windows:
            span = (window.end_ns - window.start_ns) / 1e9
            spans.setdefault((arm, window.level or 0), []).append(span)
    every_start = [s for arm in starts.values() for s in arm]
    every_span = [s for level in spans.values() for s in level]
    total, previous = 0.0, serving
    for _, arm, level in rest:
        if arm != previous:
            total += fmean(starts.get(arm) or every_start or [0.0])
        total += fmean(spans.get((arm, level)) or every_span or [0.0])
        previous = arm
    return total
