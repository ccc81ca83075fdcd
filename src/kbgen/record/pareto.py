"""Throughput against latency in a sweep: every configuration a point, and the confident front.

Evidence in, `ParetoPoint`s out: each variant at each load, its classes pooled, as aggregate
output tokens/s by Little's law against its requests' TPOT and TTFT (median, p99); the front
drops a point only when another dominates it on throughput and p99 TPOT with confidence. Why
these figures and this resampling: docs/design.md, "Many comparisons, and the best".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kbgen.kb.models import Configuration, Load, ParetoPoint
from kbgen.record import stats
from kbgen.record.evidence import Evidence, at_level
from kbgen.record.figures import end_of, rounded, timed
from kbgen.record.rule import CONFIDENCE
from kbgen.record.stats import RESAMPLES
from kbgen.run.samples import paired_by

QUANTILE = 0.99  # the front's latency: the p99 TPOT


@dataclass
class _Point:
    """One configuration's requests, as the figures and a resample of prompts need them."""

    variant: str
    load: Load
    concurrency: int
    tpot: list[tuple[int, float]] = field(default_factory=list)  # each request's (unit, ms)
    ttft: list[float] = field(default_factory=list)
    tokens: dict[int, float] = field(default_factory=dict)  # unit -> output tokens
    seconds: dict[int, float] = field(default_factory=dict)  # unit -> seconds in flight
    rounds: dict[int, int] = field(default_factory=dict)  # round -> its requests

    @property
    def in_flight(self) -> int:
        """The requests the client held in flight: its streams, but never more than a window's
        requests (a window of 4 requests at concurrency 8 never has 8 in flight)."""
        return min(self.concurrency, *self.rounds.values())

    @property
    def output_tok_s(self) -> float:
        return self.in_flight * sum(self.tokens.values()) / sum(self.seconds.values())


def front(evidence: Evidence, resamples: int = RESAMPLES) -> list[ParetoPoint]:
    """Every configuration of the evidence as a point, in the order of the loads and then of the
    variants, each on the front or dominated with confidence. Empty with fewer than two points,
    and for evidence other than kbgen's own closed-loop runs paired by prompt (`figures.timed`:
    kbgen's closed loop is what Little's law reads; an open loop, or an import's tool, paces its
    requests)."""
    if evidence.open_loop or not (evidence.paired and timed(evidence)):
        return []
    units: dict[tuple[str, int], int] = {}
    points = []
    for level, load in enumerate(evidence.loads):
        final = at_level(evidence, level).final()[0]
        for variant in evidence.variants:
            point = _Point(variant, load, evidence.concurrency_at(level))
            for s in final:
                if s.variant != variant:
                    continue
                unit = units.setdefault((s.prompt_class, paired_by(s)), len(units))
                end, measured = end_of(s), s.metrics()
                if end is not None and end > s.sent_ns and s.output_tokens:
                    point.tokens[unit] = point.tokens.get(unit, 0.0) + s.output_tokens
                    point.seconds[unit] = point.seconds.get(unit, 0.0) + (end - s.sent_ns) / 1e9
                point.rounds[s.round or 0] = point.rounds.get(s.round or 0, 0) + 1
                if "tpot_ms" in measured:
                    point.tpot.append((unit, measured["tpot_ms"]))
                if "ttft_ms" in measured:
                    point.ttft.append(measured["ttft_ms"])
            if point.tokens and point.tpot:
                points.append(point)
    if len(points) < 2:
        return []
    classes: dict[str, int] = defaultdict(lambda: len(classes))
    strata = [classes[cls] for cls, _ in units]  # in the order of the units' numbers
    shares = stats.dominance_shares(
        strata,
        [
            (
                p.in_flight,
                [p.tokens.get(u, 0.0) for u in range(len(units))],
                [p.seconds.get(u, 0.0) for u in range(len(units))],
            )
            for p in points
        ],
        [([u for u, _ in p.tpot], [v for _, v in p.tpot]) for p in points],
        QUANTILE,
        needed := 1 - (1 - CONFIDENCE) / (len(points) - 1),
        resamples,
    )
    return [
        _point(p, [points[a] for a in range(len(points)) if shares[a][b] >= needed], shares, b)
        for b, p in enumerate(points)
    ]


def _point(point: _Point, by: list[_Point], shares: list[list[float]], b: int) -> ParetoPoint:
    tpot = stats.describe([v for _, v in point.tpot])
    ttft = stats.describe(point.ttft) if point.ttft else {}
    return ParetoPoint(
        variant=point.variant,
        load=point.load,
        output_tok_s=rounded(point.output_tok_s) or 0.0,
        tpot_ms_median=rounded(tpot["median"]) or 0.0,
        tpot_ms_p99=rounded(tpot["p99"]) or 0.0,
        ttft_ms_median=rounded(ttft.get("median")),
        ttft_ms_p99=rounded(ttft.get("p99")),
        on_front=not by,
        dominance=round(max(row[b] for row in shares), 4),
        dominated_by=[Configuration(variant=d.variant, load=d.load) for d in by],
    )


def rule_text(points: int) -> str:
    """How the front is found, in words, for the record (`points`: how many there are)."""
    needed = 1 - (1 - CONFIDENCE) / (points - 1)
    return (
        "Throughput against latency: every configuration (a variant at a load, the baseline "
        "included) is a point, its classes pooled: aggregate output tokens/s by Little's law "
        "(concurrency × Σ output tokens / Σ seconds in flight of its requests, the client "
        "holding `concurrency` in flight, at most a window's requests; the window's ramps left "
        "out) against its requests' "
        "p99 TPOT, the front's latency (the medians and TTFT are shown beside it). A point "
        "leaves the front only when another dominates it (at least its throughput and at most "
        f"its p99 TPOT, better in one) in at least 1 - {1 - CONFIDENCE:.0%} / (points - 1) = "
        f"{needed:.2%} of {RESAMPLES:,} resamples of prompts (drawn within each class, the same "
        "draw for every point, seeded; a drawn prompt brings all its requests at that point), "
        "each resample's departure from the full sample widened by sqrt(n / (n - 1)) × "
        "Student-t's quantile over the normal's at that level (n: the smallest class's "
        "prompts), as the expanded percentile bootstrap widens an interval."
    )
