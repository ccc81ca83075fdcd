"""How an open loop kept its schedule: offered and achieved rates, the client's lag behind it.

A request waits from its scheduled time to its send for a free slot (the load's queue) or for
the client itself (`run.samples.schedule_lag_ns`); only the second is the client's fault. A round
whose lag p99 passes `LAG_BOUND_MS` fell behind, and a class it changes is inconclusive.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from kbgen.kb.cards import configuration_words
from kbgen.kb.models import ClassVerdict, Outcome, Schedule
from kbgen.record import stats
from kbgen.record.evidence import Evidence, at_level
from kbgen.record.figures import end_of, rounded
from kbgen.run.samples import Sample, clock_of, schedule_lag_ns

LAG_BOUND_MS = 5.0  # the client's lag p99 a window may have and still be on its schedule
UNIT_CAVEAT = (  # bench/perf/queueing.py --mixes 20, 1,000 runs a row, on 2026-12-07
    "sent open loop: the verdict is about this traffic, these prompts in this mix at this rate; "
    "requests in flight share each engine step, so a prompt's speed depends on the others'. In "
    "simulation at 75% of a batching server's capacity the stated error held for the traffic "
    "sent (0-0.1% of verdicts at its boundary decisive, 5% stated; with rare 20-fold stalls "
    "6-7% over two rounds, 3-6% over four), while another draw of prompts moved the effect by "
    "3-5 points (SD): to claim it for other traffic, measure that traffic"
)
SCHEDULED = ("ttft_ms", "e2e_ms")  # the metrics counted from the scheduled time


def kept(evidence: Evidence) -> list[Schedule]:
    """Each arm's schedule at each load level: offered and achieved rates, slot wait and lag
    p99, the rounds that fell behind (none for a closed loop)."""
    out = []
    for level, load in enumerate(evidence.loads):
        rate = evidence.rate_at(level)
        here = at_level(evidence, level)
        for arm in evidence.variants:
            mine = [s for s in here.samples if s.variant == arm and s.on_schedule]
            if rate is None or not mine:
                continue
            waits, lags = zip(*(schedule_lag_ns(s) for s in mine), strict=True)
            turns = evidence.turns  # sessions: the rate counts their first turns
            firsts = [s for s in mine if not turns or s.prompt_index % turns == 0]
            windows = _windows(firsts).values()
            achieved = [r for w in windows if (r := _achieved(w)) is not None]
            drawn = [r for w in windows if (r := _drawn(w)) is not None]
            out.append(
                Schedule(
                    variant=arm,
                    load=load,
                    offered_rps=rate,
                    scheduled_rps=rounded(sum(drawn) / len(drawn)) if drawn else None,
                    achieved_rps=rounded(sum(achieved) / len(achieved)) if achieved else 0.0,
                    requests=len(mine),
                    slot_wait_p99_ms=rounded(_p99(waits) / 1e6) or 0.0,
                    lag_p99_ms=rounded(_p99(lags) / 1e6) or 0.0,
                    behind=behind_rounds(mine),
                )
            )
    return out


def behind_rounds(samples: Sequence[Sample]) -> list[int]:
    """The rounds whose windows' client lag p99 went over `LAG_BOUND_MS`."""
    by_round: dict[int, list[int]] = defaultdict(list)
    for s in samples:
        if s.on_schedule:
            by_round[s.round or 0].append(schedule_lag_ns(s)[1])
    return sorted(r for r, lags in by_round.items() if _p99(lags) / 1e6 > LAG_BOUND_MS)


def caveats(schedules: Sequence[Schedule]) -> list[str]:
    """An open loop's: the unit's reach under load, and one per arm and load whose client fell
    behind its schedule, naming the bound."""
    return [UNIT_CAVEAT] * bool(schedules) + [
        f"{configuration_words(s.variant, s.load)}: the client fell behind its schedule in "
        f"round{'s' if len(s.behind) > 1 else ''} {', '.join(str(r + 1) for r in s.behind)} "
        f"(its lag p99 over "
        f"{LAG_BOUND_MS:g} ms; {s.lag_p99_ms:.3g} ms over all rounds): latencies counted from "
        "the schedule hold some of the client's own time"
        for s in schedules
        if s.behind
    ]


def without_lag(samples: Sequence[Sample]) -> list[Sample]:
    """The samples as a client without lag would have sent them: each scheduled time moved on
    by the client's own lag, so that latencies counted from it leave that lag out."""
    return [
        s.model_copy(update={"scheduled_ns": s.scheduled_ns + schedule_lag_ns(s)[1]})
        if s.on_schedule
        else s
        for s in samples
    ]


Decide = Callable[[dict[str, list[Sample]], bool], tuple[ClassVerdict, list[str]] | None]


def lag_holds(
    kept: Mapping[str, list[Sample]], metric: str, decided: ClassVerdict, decide: Decide
) -> str | None:
    """Why a class whose client fell behind its schedule is inconclusive: decided again by
    `decide` (quietly) without the client's own lag, its latency from the schedule gives another
    outcome (None: the same, a metric not counted from the schedule, or no round behind)."""
    if metric not in SCHEDULED or not any(behind_rounds(samples) for samples in kept.values()):
        return None
    again = decide({arm: without_lag(samples) for arm, samples in kept.items()}, False)
    if again is None or again[0].outcome == decided.outcome:
        return None
    return (
        f"the client fell behind its schedule (lag p99 over {LAG_BOUND_MS:g} ms), and "
        f"without its lag the class is {Outcome(again[0].outcome).value}"
    )


def _windows(samples: Sequence[Sample]) -> dict[tuple[int, int, int, int], list[Sample]]:
    """Samples by the window that sent them: round, level, clock."""
    out: dict[tuple[int, int, int, int], list[Sample]] = defaultdict(list)
    for s in samples:
        out[(s.round or 0, s.level or 0, *clock_of(s))].append(s)
    return out


def _achieved(window: Sequence[Sample]) -> float | None:
    """A window's completion rate, as `vllm bench serve`'s request throughput counts it (from
    the first send to the last end) and in gaps, as `_drawn` counts the schedule's: a server
    that keeps up completes at about the schedule's rate, one that queues below it."""
    ends = [e for s in window if s.ok and (e := end_of(s)) is not None]
    span = (max(ends) - min(s.scheduled_ns for s in window)) / 1e9 if ends else 0.0
    return (len(ends) - 1) / span if span > 0 and len(ends) > 1 else None


def _drawn(window: Sequence[Sample]) -> float | None:
    """The rate a window's schedule asked for: its gaps' count over their span."""
    times = [s.scheduled_ns for s in window]
    span = (max(times) - min(times)) / 1e9
    return (len(times) - 1) / span if span > 0 else None


def _p99(values: Sequence[float]) -> float:
    return float(stats.describe(values)["p99"]) if values else 0.0
