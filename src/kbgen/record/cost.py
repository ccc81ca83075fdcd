"""What a run cost to learn: its starts, server and accelerator time, requests and tokens.

From its run.json and samples; for a run that stopped early or raced, what it saved. Starts are
counted as the driver makes them: a window whose arm differs from the one before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from kbgen.kb.models import Cost, Hardware, Saved, Stop
from kbgen.run.design import steps
from kbgen.run.models import RunMeta
from kbgen.run.samples import Sample


def starts(order: Sequence[tuple[int, str, int]]) -> int:
    """The server starts `order` needs: one per window whose arm is not the one before's."""
    return sum(1 for i, step in enumerate(order) if i == 0 or step[1] != order[i - 1][1])


def cost_of(
    meta: RunMeta,
    samples: Sequence[Sample],
    hardware: Hardware | None,
    stopping: bool,
    held: float | None = None,
) -> Cost:
    """The run's cost; `stopping`: its spec stops when decided; `held`: the accelerators it
    held where that is not the machine's count (a cluster's block: `cluster.num_gpus`, half a
    GPU for two blocks on one)."""
    planned = steps(list(meta.order))
    ran = {
        (w.round or 0, name, w.level or 0) for name, v in meta.variants.items() for w in v.windows
    }
    done = [s for s in planned if s in ran]
    startups = [x for v in meta.variants.values() for x in v.startup_s]
    ups = [x for v in meta.variants.values() for x in v.up_s]
    windows_s = [(w.end_ns - w.start_ns) / 1e9 for v in meta.variants.values() for w in v.windows]
    count: float | None = hardware.count if hardware is not None and hardware.accelerator else None
    count = held if count is not None and held else count
    server = sum(ups) / 60 if ups else None
    saved = None
    skipped_starts = max(0, starts(planned) - starts(done))  # a resume may start more
    skipped_windows = len(planned) - len(done)
    if skipped_windows > 0:
        minutes = (
            skipped_starts * fmean(startups or [0.0]) + skipped_windows * fmean(windows_s or [0.0])
        ) / 60
        saved = Saved(
            starts=skipped_starts,
            windows=skipped_windows,
            minutes=round(minutes, 2),
            **({"accelerator_minutes": round(minutes * count, 2)} if count else {}),
        )
    return Cost.model_validate(
        {
            "design": "when-decided" if stopping else "fixed",
            "starts": len(startups),
            "startup_minutes": round(sum(startups) / 60, 2),
            **({"server_minutes": round(server, 2)} if server is not None else {}),
            **({"accelerators": math.ceil(count)} if count else {}),
            **(
                {"accelerator_minutes": round(server * count, 2)}
                if server is not None and count
                else {}
            ),
            "window_minutes": round(sum(windows_s) / 60, 2),
            "windows": sum(len(v.windows) for v in meta.variants.values()),
            "planned_windows": len(planned),
            "requests": len(samples),
            "output_tokens": sum(s.output_tokens or 0 for s in samples if s.ok),
            **(
                {"stopped": Stop(round=meta.stopped.round + 1, reason=meta.stopped.reason)}
                if meta.stopped is not None
                else {}
            ),
            **({"left": {n: d.why for n, d in meta.dropped.items()}} if meta.dropped else {}),
            **({"saved": saved} if saved is not None else {}),
        }
    )


def pooled(costs: Sequence[Cost], accelerators: int | None = None) -> Cost:
    """The cost of a run over several machines: its blocks' costs added up (starts, minutes,
    windows, requests, tokens, what stopping saved); `accelerators`, those its blocks held
    together (blocks sharing a GPU hold one), else each block's added up."""
    first = costs[0]
    summed: dict[str, Any] = first.model_dump(exclude_unset=True)
    for name in (
        "starts", "startup_minutes", "server_minutes", "accelerators", "accelerator_minutes",
        "window_minutes", "windows", "planned_windows", "requests", "output_tokens",
    ):  # fmt: skip
        values = [getattr(c, name) for c in costs if getattr(c, name) is not None]
        if values:
            summed[name] = round(sum(values), 2) if isinstance(values[0], float) else sum(values)
    left = {k: v for c in costs for k, v in c.left.items()}
    if left:
        summed["left"] = left
    saved = [c.saved for c in costs if c.saved is not None]
    if saved:
        summed["saved"] = {
            name: round(sum(getattr(s, name) or 0 for s in saved), 2)
            if name.endswith("minutes")
            else sum(getattr(s, name) for s in saved)
            for name in ("starts", "windows", "minutes", "accelerator_minutes")
            if any(getattr(s, name) is not None for s in saved)
        }
    stops = [c.stopped for c in costs if c.stopped is not None]
    if stops:
        summed["stopped"] = max(stops, key=lambda s: s.round)
    if accelerators is not None and "accelerators" in summed:
        summed["accelerators"] = accelerators
    return Cost.model_validate(summed)
