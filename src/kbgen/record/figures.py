"""A record's figures from its evidence: measurements per variant × class × metric, spec decoding.

Numbers are kept to `SIGNIFICANT` digits: enough to recompute, short enough to read. Beside
vLLM's acceptance figures, the ones speed follows (docs/design.md, "Figures").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from kbgen.kb.models import (
    LoadMeasurements,
    MeasuredMetric,
    Measurements,
    MetricStats,
    PrefixCache,
    SpecDecodeStats,
)
from kbgen.record import stats
from kbgen.record.evidence import Evidence, at_level
from kbgen.run import counters
from kbgen.run.samples import Sample, clock_of

SIGNIFICANT = 6  # digits kept on a record: enough to recompute, short enough to read
PER_REQUEST: tuple[MeasuredMetric, ...] = (
    "decode_tok_s",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    *("ttft_sent_ms", "e2e_sent_ms", "slot_wait_ms", "lag_ms"),  # an open loop's (`run.samples`)
)
PER_TOKEN: tuple[MeasuredMetric, ...] = ("itl_ms", "chunk_gap_ms")
# a class's aggregate throughput per round: over its whole window, and over the window's steady
# state (at concurrency > 1)
PER_ROUND: tuple[MeasuredMetric, ...] = ("output_tok_s", "steady_output_tok_s")


def rounded(value: float | None) -> float | None:
    """`value` to SIGNIFICANT digits; None for no value or NaN."""
    if value is None or math.isnan(value):
        return None
    return float(f"{value:.{SIGNIFICANT}g}")


def known(**values: Any) -> dict[str, Any]:
    """The values that are not None: a field left unset is not written on the record."""
    return {k: v for k, v in values.items() if v is not None}


def metric_stats(values: dict[str, Any]) -> MetricStats:
    """The statistics of stats.describe (or an importer's), rounded; `n` kept exact."""
    return MetricStats(**known(**{k: v if k == "n" else rounded(v) for k, v in values.items()}))


def measurements(evidence: Evidence) -> Measurements:
    """variant → class → metric → statistics, from the final successful samples (a sweep's at
    its first load level: `by_load` gives each)."""
    if len(evidence.loads) > 1:
        return measurements(at_level(evidence, 0))
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    final = evidence.final()[0]
    by_round: dict[tuple[str, str, int], list[Sample]] = defaultdict(list)
    for sample in final:
        by_round[(sample.variant, sample.prompt_class, sample.round or 0)].append(sample)
    # the aggregate throughput, one value per round (its unit)
    steady = {} if evidence.open_loop else steady_states(evidence.samples, evidence.concurrency)
    for (variant, cls, _), group in sorted(by_round.items()) if timed(evidence) else []:
        if (throughput := window_throughput(group)) is not None:
            values[(variant, cls, "output_tok_s")].append(throughput)
        if (throughput := steady_throughput(group, steady)) is not None:
            values[(variant, cls, "steady_output_tok_s")].append(throughput)
    # a per-token ITL of only the requests whose chunks proved one token each (usage at the end
    # of the stream) would be a biased subset: all of a variant's class, or none of it
    unsized = {
        (s.variant, s.prompt_class)
        for s in final
        if s.ok and s.chunks_complete and s.chunk_ns and not s.chunk_tokens
    }
    for sample in final:
        m = sample.metrics()
        for metric in PER_REQUEST:
            if metric in m:
                values[(sample.variant, sample.prompt_class, metric)].append(m[metric])
        for metric in PER_TOKEN:
            if metric == "itl_ms" and (sample.variant, sample.prompt_class) in unsized:
                continue
            values[(sample.variant, sample.prompt_class, metric)].extend(m.get(metric, []))
    out: Measurements = {}
    for variant in evidence.variants:
        for cls in evidence.classes:
            for metric in (*PER_REQUEST, *PER_TOKEN, *PER_ROUND):
                series = values.get((variant, cls, metric))
                if series:
                    by_metric = out.setdefault(variant, {}).setdefault(cls, {})
                    by_metric[metric] = metric_stats(stats.describe(series))
    return out


def by_load(evidence: Evidence) -> list[LoadMeasurements]:
    """A sweep's measurements at each of its load levels (none for a run of one load)."""
    if len(evidence.loads) == 1:
        return []
    return [
        LoadMeasurements(load=load, measurements=measurements(at_level(evidence, level)))
        for level, load in enumerate(evidence.loads)
    ]


def timed(evidence: Evidence) -> bool:
    """Whether the evidence's request times share a clock, so that an aggregate throughput can
    be computed from them: kbgen's own runs, whose windows say how long they were (an import's
    request times share none)."""
    return any(w.window_s is not None for ws in evidence.windows.values() for w in ws)


def window_throughput(samples: list[Sample]) -> float | None:
    """Aggregate output tokens/s of a window's successful samples: their output tokens over the
    time at least one of them was in flight (first send to last done, less idle gaps).

    For requests sent back to back this is Σ output tokens / (last done - first send); gaps
    where none of these requests ran (the server busy with another class) are not counted.
    Times compare only within one clock (`clock_of`: an attempt on one machine). None without a
    duration.
    """
    spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    tokens = 0
    for s in samples:
        end = end_of(s)
        if s.ok and end is not None and s.output_tokens:
            spans[clock_of(s)].append((s.sent_ns, end))
            tokens += s.output_tokens
    busy = sum(_covered(intervals) for intervals in spans.values())
    return tokens / (busy / 1e9) if busy > 0 else None


def end_of(sample: Sample) -> int | None:
    """When a request stopped occupying its stream: its stream's end, else its last token."""
    if sample.done_ns is not None:
        return sample.done_ns
    return sample.chunk_ns[-1] if sample.chunk_ns else None


Window = tuple[str, int, int, int]  # a window's samples: (variant, round, block, attempt)


def steady_states(samples: list[Sample], concurrency: int) -> dict[Window, tuple[int, int]]:
    """Each measurement window's steady state at `concurrency` > 1, as [start, end] in ns.

    kbgen's client runs `concurrency` streams, each sending its next request as its last one
    ends. All of them are busy from the moment the `concurrency`-th request is sent until the
    first request to end after the last one was sent (from then on a stream stays idle): that
    interval is the steady state, with the ramp-up before it and the ramp-down after it left
    out. Every request of the window counts, failed ones too (they held a stream). A window
    with fewer requests than streams has no steady state, and neither has concurrency 1 (its
    steady state is the whole window).
    """
    if concurrency < 2:
        return {}
    windows: dict[Window, list[Sample]] = defaultdict(list)
    for s in samples:
        windows[(s.variant, s.round or 0, *clock_of(s))].append(s)
    out = {}
    for key, group in windows.items():
        sends = sorted(s.sent_ns for s in group)
        if len(sends) < concurrency:
            continue
        start, last = sends[concurrency - 1], sends[-1]
        ends = [end for s in group if (end := end_of(s)) is not None and end > last]
        if ends and min(ends) > start:
            out[key] = (start, min(ends))
    return out


def steady_throughput(samples: list[Sample], steady: dict[Window, tuple[int, int]]) -> float | None:
    """Aggregate output tokens/s of one class's successful samples in their windows' steady
    states (`steady_states`): the tokens that arrived in one (after its start, up to its end;
    each chunk's count) over the time in it during which at least one of these requests was in
    flight — `window_throughput`, less the ramps. None where no window of theirs has a steady
    state, none of their tokens arrived in it, or a chunk's count is unknown."""
    if any(s.ok and s.chunk_ns and not s.chunk_tokens for s in samples):
        return None  # a chunk's tokens unknown (usage at the end only): the count would be short
    spans: dict[Window, list[tuple[int, int]]] = defaultdict(list)
    tokens = 0
    for s in samples:
        key = (s.variant, s.round or 0, *clock_of(s))
        end = end_of(s)
        if key not in steady or end is None or not s.ok:
            continue
        start, stop = steady[key]
        if s.sent_ns < stop and end > start:
            spans[key].append((max(s.sent_ns, start), min(end, stop)))
        tokens += sum(
            n for t, n in zip(s.chunk_ns, s.chunk_tokens, strict=False) if start < t <= stop
        )
    busy = sum(_covered(intervals) for intervals in spans.values())
    return tokens / (busy / 1e9) if busy > 0 and tokens else None


def _covered(intervals: list[tuple[int, int]]) -> int:
    """Nanoseconds covered by the union of `intervals`."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def spec_decode(evidence: Evidence) -> dict[str, SpecDecodeStats]:
    """Acceptance figures per variant, from the summed counter deltas of its windows."""
    out = {}
    for variant, windows in evidence.windows.items():
        parts = [w.spec_decode for w in windows if w.spec_decode is not None]
        if not parts:
            continue
        positions = max(len(p.accepted_per_position) for p in parts)
        summed = counters.SpecDecodeCounters.of(
            sum(p.drafts for p in parts),
            sum(p.draft_tokens for p in parts),
            sum(p.accepted_tokens for p in parts),
            [
                sum(p.accepted_per_position[i] for p in parts if i < len(p.accepted_per_position))
                for i in range(positions)
            ],
        )
        per_position = summed.per_position_acceptance
        generated = _generated(w for w in windows if w.spec_decode is not None)
        steps = 0.0 if generated is None else engine_steps(generated, summed)
        out[variant] = SpecDecodeStats(
            drafts=int(summed.drafts),
            draft_tokens=int(summed.draft_tokens),
            accepted_tokens=int(summed.accepted_tokens),
            **known(
                acceptance_rate=rounded(summed.acceptance_rate),
                mean_acceptance_length=rounded(summed.mean_acceptance_length),
                generation_tokens=None if generated is None else int(generated),
                tokens_per_engine_step=rounded(generated / steps)
                if generated is not None and steps > 0
                else None,
                drafted_step_share=rounded(summed.drafts / steps) if steps > 0 else None,
                per_position_acceptance=None
                if per_position is None
                else [rounded(a) for a in per_position],
            ),
        )
    return out


def prefix_cache(evidence: Evidence) -> list[PrefixCache]:
    """Each arm's prefix-cache lookups and hits at each load level, summed over its windows
    (none where the server counted none), beside the hit rate its prefixes' design expects."""
    designed = designed_hits(evidence)
    out = []
    for level, load in enumerate(evidence.loads):
        for variant, windows in evidence.windows.items():
            counted = [
                (w.prefix_cache_queries, w.prefix_cache_hits)
                for w in windows
                if (w.level or 0) == level
                and w.prefix_cache_queries is not None
                and w.prefix_cache_hits is not None
            ]
            if not counted:
                continue
            queries, hits = (math.fsum(x) for x in zip(*counted, strict=True))
            out.append(
                PrefixCache(
                    variant=variant,
                    load=load,
                    queries=queries,
                    hits=hits,
                    **known(
                        hit_rate=rounded(hits / queries) if queries else None,
                        designed_hit_rate=rounded(designed[(variant, level)])
                        if (variant, level) in designed
                        else None,
                    ),
                )
            )
    return out


def designed_hits(evidence: Evidence) -> dict[tuple[str, int], float]:
    """The share of prompt tokens the prefix cache should hold, per arm and load level: each
    server start's requests in the order they were sent (a start ends where another arm's
    requests come), a request holding the blocks its shared prefix fills once a request with
    it came before, and its whole prompt but the last token once the same prompt and prefix
    did; {} without prefixes, a block size, or every request's prompt token count."""
    design = evidence.prefixes
    sent = sorted((s for s in evidence.samples if s.ok), key=lambda s: (clock_of(s), s.sent_ns))
    if design is None or not design.block_size or any(s.prompt_tokens is None for s in sent):
        return {}
    block = design.block_size
    held: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    start: tuple[object, ...] = ()
    seen: set[object] = set()
    for s in sent:
        if (clock_of(s), s.variant) != start:  # another server start: an empty cache
            start, seen = (clock_of(s), s.variant), set()
        tokens = s.prompt_tokens or 0
        whole = (s.prefix, s.prompt_class, s.prompt_index)
        if whole in seen:
            cached = (tokens - 1) // block * block
        elif s.prefix is not None and s.prefix in seen:
            cached = min(design.shared_tokens[s.prefix], tokens - 1) // block * block
        else:
            cached = 0
        seen |= {whole, s.prefix}
        counted = held[(s.variant, s.level or 0)]
        counted[0] += cached
        counted[1] += tokens
    return {key: hits / tokens for key, (hits, tokens) in held.items() if tokens}


def engine_steps(generated: float, summed: counters.SpecDecodeCounters) -> float:
    """The engine steps of the requests that generated `generated` tokens.

    Every step yields one token plus the drafted tokens it accepted: generated - accepted. But
    vLLM counts the accepted tokens of a step that ran past a request's stop (`max_tokens`),
    which `generated` does not hold, so that count can fall below the drafts, each of which is a
    step. The larger of the two keeps the drafted share within 1 and, as no draft accepts more
    than its positions, tokens per step within 1 + the positions.
    """
    return max(generated - summed.accepted_tokens, float(summed.drafts))


def _generated(windows: Iterable[counters.Counters]) -> float | None:
    """Tokens generated over the windows: the server's count, else the client's (an import
    has only the tool's own); None when a window has neither."""
    total = 0.0
    for w in windows:
        tokens = w.generation_tokens if w.generation_tokens is not None else w.client_output_tokens
        if tokens is None:
            return None
        total += tokens
    return total
