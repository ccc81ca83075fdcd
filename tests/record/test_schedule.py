"""How an open loop kept its schedule: offered and achieved rates, the client's lag told from
the wait for a slot, the rounds that fell behind, and a class whose outcome the lag changes."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import schedule, verdict
from kbgen.record.evidence import Evidence
from kbgen.run.samples import Sample
from tests.record.test_verdict import CLEAN
from tests.support.runs import make_sample

MS = 1_000_000
QUICKER_FIRST_TOKEN = Hypothesis(
    statement="the first token comes sooner",
    primary_metric="ttft_ms",
    direction="decrease",
    minimum_effect=0.05,
)


def scheduled(
    arm: str,
    prompt: int,
    round_: int,
    due_ms: float,
    ttft_ms: float,
    wait_ms: float = 0.0,
    lag_ms: float = 0.0,
    rng: random.Random | None = None,
) -> Sample:
    """A request due at `due_ms`, taken by a slot `wait_ms` later and sent `lag_ms` after that,
    its first token `ttft_ms` after its send."""
    s = make_sample(arm, "coding", prompt, 0, 50.0, rng or random.Random(prompt), tokens=8)
    due = int(due_ms * MS)
    ready, sent = due + int(wait_ms * MS), due + int((wait_ms + lag_ms) * MS)
    shift = sent + int(ttft_ms * MS) - s.chunk_ns[0]
    return s.model_copy(
        update={
            "round": round_,
            "on_schedule": True,
            "scheduled_ns": due,
            "ready_ns": ready,
            "sent_ns": sent,
            "chunk_ns": [t + shift for t in s.chunk_ns],
            "done_ns": (s.done_ns or 0) + shift,
        }
    )


def evidence(samples: list[Sample], rate: float = 10.0) -> Evidence:
    windows = {"baseline": [CLEAN, CLEAN], "ngram": [CLEAN, CLEAN]}
    return Evidence(
        "baseline",
        ["baseline", "ngram"],
        ["coding"],
        samples,
        windows,
        concurrency=4,
        request_rate=rate,
    )


def test_the_wait_for_a_slot_is_not_the_clients_lag() -> None:
    waited = scheduled("baseline", 0, 0, 1000, ttft_ms=30, wait_ms=200, lag_ms=2)
    m = waited.metrics()
    assert m["slot_wait_ms"] == pytest.approx(200) and m["lag_ms"] == pytest.approx(2)
    assert m["ttft_ms"] == pytest.approx(232) and m["ttft_sent_ms"] == pytest.approx(30)
    unknown = waited.model_copy(update={"ready_ns": None})  # a run before it was kept
    assert unknown.metrics()["lag_ms"] == pytest.approx(202)
    assert unknown.metrics()["slot_wait_ms"] == 0


def test_offered_and_achieved_rates_and_the_rounds_behind() -> None:
    # 10 requests due 100 ms apart in each round, each done 8 tokens after its first; the
    # n-gram arm's client 12 ms late in round 2 only
    samples = [
        scheduled(arm, p, r, 100.0 * p, ttft_ms=20, lag_ms=12.0 if (arm, r) == ("ngram", 1) else 1)
        for arm in ("baseline", "ngram")
        for r in (0, 1)
        for p in range(10)
    ]
    kept = {s.variant: s for s in schedule.kept(evidence(samples))}
    base, ngram = kept["baseline"], kept["ngram"]
    assert base.offered_rps == 10 and base.requests == 20
    assert base.scheduled_rps == pytest.approx(10)  # 9 gaps of 100 ms
    ends = [s.done_ns or 0 for s in samples if (s.variant, s.round) == ("baseline", 0)]
    span = (max(ends) - 0) / 1e9  # as vllm bench serve: from the first due send to the last end
    assert base.achieved_rps == pytest.approx(9 / span, rel=1e-5)  # 9 gaps, as the schedule's
    assert 8 < base.achieved_rps < 10  # it kept up: 0.9 s of gaps, then the last one's 0.16 s
    assert base.behind == [] and ngram.behind == [1]
    assert ngram.lag_p99_ms == pytest.approx(12, abs=0.01) and base.slot_wait_p99_ms == 0
    # a server that queues everything and ends it all at once completes below the schedule's
    # rate, however close together its ends are
    last = max(s.done_ns or 0 for s in samples)
    bunched = [s.model_copy(update={"done_ns": last}) for s in samples]
    queued = {s.variant: s for s in schedule.kept(evidence(bunched))}["baseline"]
    assert queued.achieved_rps < base.achieved_rps < (base.scheduled_rps or 0)
    unit, said = schedule.caveats(list(kept.values()))
    assert unit == schedule.UNIT_CAVEAT
    assert said.startswith("ngram: the client fell behind its schedule in round 2")
    assert f"over {schedule.LAG_BOUND_MS:g} ms" in said


def test_a_closed_loop_keeps_no_schedule() -> None:
    closed = [
        scheduled("baseline", p, 0, 0, 20).model_copy(update={"on_schedule": None})
        for p in range(3)
    ]
    assert schedule.kept(evidence(closed, rate=10)) == []
    rated = evidence([s.model_copy(update={"on_schedule": True}) for s in closed])
    assert schedule.kept(rated) != []
    assert schedule.kept(dataclasses.replace(rated, request_rate=None)) == []


def lagging(lag_ms: float, prompts: int = 12) -> Evidence:
    """The n-gram arm's first token truly 20% sooner (80 ms against 100), two rounds; its client
    `lag_ms` late on every request."""
    rng = random.Random(3)
    samples = []
    for r in (0, 1):
        for p in range(prompts):
            base = rng.uniform(90, 110)
            samples.append(scheduled("baseline", p, r, 200.0 * p, base, lag_ms=0.5, rng=rng))
            samples.append(scheduled("ngram", p, r, 200.0 * p, 0.8 * base, lag_ms=lag_ms, rng=rng))
    return evidence(samples)


def test_a_class_whose_outcome_the_clients_lag_changes_is_inconclusive() -> None:
    on_time = verdict.judge(lagging(0.5), QUICKER_FIRST_TOKEN, [])
    assert on_time.outcome == Outcome.SUPPORTED
    late = verdict.judge(lagging(40), QUICKER_FIRST_TOKEN, [])  # reads +20%: refuted
    coding = late.per_class["coding"]
    assert late.outcome == Outcome.INCONCLUSIVE and coding.outcome == Outcome.INCONCLUSIVE
    assert coding.reason is not None and "without its lag the class is supported" in coding.reason
    assert coding.effect > 0.15  # the effect as measured is kept


def test_a_lag_that_changes_nothing_leaves_the_outcome() -> None:
    # 6 ms late: over the bound, but the n-gram arm still reads sooner by more than 5%
    late = verdict.judge(lagging(6), QUICKER_FIRST_TOKEN, [])
    assert late.outcome == Outcome.SUPPORTED
    assert late.per_class["coding"].reason is None
    decode = verdict.judge(
        lagging(40),
        QUICKER_FIRST_TOKEN.model_copy(
            update={"primary_metric": "decode_tok_s", "direction": "increase"}
        ),
        [],
    )  # between tokens: the lag is no part of it
    assert "fell behind" not in (decode.per_class["coding"].reason or "")
