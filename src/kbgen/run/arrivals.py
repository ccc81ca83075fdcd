"""When an open-loop window's requests are due: gaps drawn from the workload's arrival process.

Pure and seeded. As `vllm bench serve` sends them: the first request at once, each next one a
gap later, the gaps of a gamma distribution of shape B (`--burstiness`) and mean 1/rate
(B = 1: exponential, a Poisson process), or all 1/rate. The stream of the draw is the seed, the
round and the load level, never the arm: every arm of a round and level gets the same times.
"""

from __future__ import annotations

import itertools
import random

from kbgen.kb.models import Arrivals

POISSON = Arrivals()  # a request rate without `arrivals`


def offsets(arrivals: Arrivals | None, rate: float, count: int, *stream: int) -> list[float]:
    """Seconds from the window's start at which each of `count` requests is due, drawn for
    `stream` (the round and the load level) from `arrivals` (None: Poisson, seed 0)."""
    process = arrivals or POISSON
    if count <= 0:
        return []
    if process.process == "constant":
        gaps = [1.0 / rate] * (count - 1)
    else:
        shape = process.burstiness if process.process == "gamma" else 1.0
        draw = random.Random(":".join(map(str, [process.seed, *stream])))
        gaps = [draw.gammavariate(shape, 1.0 / (rate * shape)) for _ in range(count - 1)]
    return [0.0, *itertools.accumulate(gaps)]
