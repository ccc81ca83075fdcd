"""figures: the speculative-decoding figures per variant, from a real vLLM capture and built cases.

The expected numbers come from the capture's raw text and its SSE streams (tests/fixtures/vllm,
two requests of 64 tokens between the two scrapes of the n-gram server), never from the code
under test.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from kbgen.bench import metrics
from kbgen.kb.models import MeasuredMetric, MetricStats
from kbgen.record import figures
from kbgen.record.evidence import Evidence, read_samples, samples_bytes
from kbgen.run.counters import Counters, SpecDecodeCounters
from kbgen.run.models import PrefixDesign
from kbgen.run.samples import Sample

VLLM = Path(__file__).parents[1] / "fixtures" / "vllm"
STREAMS = ("ngram-completion.sse", "ngram-chat.sse")
K = 5  # num_speculative_tokens of the captured server (README)


def _scraped() -> Counters:
    before, after = (
        metrics.parse((VLLM / f"ngram-metrics-{t}.txt").read_text()) for t in ("before", "after")
    )
    return metrics.window(before, after)


def _token_chunks(name: str) -> int:
    """Stream events that added tokens: one per engine step of the request."""
    previous, chunks = 0, 0
    for event in (VLLM / name).read_text().split("\n\n"):
        payload = event.strip().removeprefix("data: ")
        if not payload or payload == "[DONE]":
            continue
        tokens = json.loads(payload)["usage"]["completion_tokens"]
        chunks += tokens > previous
        previous = tokens
    return chunks


def _evidence(*windows: Counters) -> Evidence:
    return Evidence("baseline", ["baseline", "ngram"], ["all"], [], {"ngram": list(windows)})


def _window(
    generated: float | None, drafts: int, drafted: int, accepted: int, **kw: int
) -> Counters:
    """A window's counters, its accepted tokens filling the draft's positions in order (each
    accepts at most one token a draft)."""
    positions = -(-drafted // drafts)
    per_position: list[float] = [
        min(drafts, max(0, accepted - i * drafts)) for i in range(positions)
    ]
    return Counters(
        generation_tokens=generated,
        spec_decode=SpecDecodeCounters.of(drafts, drafted, accepted, per_position),
        **kw,
    )


def test_tokens_per_engine_step_on_a_real_capture() -> None:
    window = _scraped()
    assert window.generation_tokens == 128 and window.spec_decode is not None
    accepted, drafts = window.spec_decode.accepted_tokens, window.spec_decode.drafts
    assert (accepted, drafts) == (59, 31)
    stats = figures.spec_decode(_evidence(window))["ngram"]
    assert stats.generation_tokens == 128
    assert stats.tokens_per_engine_step == pytest.approx(128 / (128 - 59), rel=1e-5)
    assert stats.drafted_step_share == pytest.approx(31 / (128 - 59), rel=1e-5)
    # vLLM's figure counts drafted steps only: it is far above what speed follows
    assert stats.mean_acceptance_length == pytest.approx(1 + 59 / 31, rel=1e-5)
    # Each stream event is one engine step of its request: the formula's steps are the events,
    # less the drafted tokens vLLM accepted past the max_tokens stop (at most K per request).
    events = sum(_token_chunks(name) for name in STREAMS)
    steps = 128 - 59
    assert 0 <= events - steps <= K * len(STREAMS)


@pytest.mark.parametrize(
    ("windows", "per_step", "share"),
    [
        # summed over the windows: (60 + 40) tokens, (20 + 10) accepted, (8 + 4) drafts
        ([_window(60, 8, 30, 20), _window(40, 4, 15, 10)], 100 / 70, 12 / 70),
        # an import has only the tool's own output token count
        ([_window(None, 8, 30, 20, client_output_tokens=60)], 60 / 40, 8 / 40),
        # one window with no token count at all: no per-step figures
        ([_window(60, 8, 30, 20), _window(None, 4, 15, 10)], None, None),
        # nothing but accepted tokens (impossible): at least a step a draft, no division by zero
        ([_window(20, 8, 30, 20)], 20 / 8, 8 / 8),
        # accepted tokens counted past max_tokens: 20 tokens less 16 accepted leaves 4 steps,
        # fewer than the 8 drafts, each a step (the share would be 2, tokens a step 5)
        ([_window(20, 8, 32, 16)], 20 / 8, 8 / 8),
    ],
    ids=["summed", "client-count", "unknown-tokens", "no-steps", "past-max-tokens"],
)
def test_per_step_figures_from_summed_windows(
    windows: list[Counters], per_step: float | None, share: float | None
) -> None:
    stats = figures.spec_decode(_evidence(*windows))["ngram"]
    assert stats.tokens_per_engine_step == (
        None if per_step is None else pytest.approx(per_step, rel=1e-5)
    )
    assert stats.drafted_step_share == (None if share is None else pytest.approx(share, rel=1e-5))


# --- steady state at concurrency > 1 -----------------------------------------------------------

MS = 1_000_000
STEP = 10 * MS  # every request streams one token per 10 ms


def _closed_loop(
    streams: int, classes: list[str], offsets: list[int], tokens: int = 10, variant: str = "v"
) -> list[Sample]:
    """Requests of `classes` (in queue order) sent by `streams` streams as kbgen's client sends
    them: each stream starts at its offset (ns) and sends its next request as its last ends.
    A request streams `tokens` tokens, one every STEP, and ends with its last."""
    free = list(offsets)
    out = []
    for index, cls in enumerate(classes):
        stream = min(range(streams), key=lambda k: (free[k], k))
        sent = free[stream]
        times = [sent + (i + 1) * STEP for i in range(tokens)]
        free[stream] = times[-1]
        out.append(
            Sample(
                variant=variant,
                prompt_class=cls,
                prompt_index=index,
                repeat=0,
                scheduled_ns=sent,
                sent_ns=sent,
                chunk_ns=times,
                chunk_tokens=[1] * tokens,
                done_ns=times[-1],
                output_tokens=tokens,
            )
        )
    return out


# a record keeps figures to 6 significant digits (figures.SIGNIFICANT): compared to 1e-5
def _measured(
    samples: list[Sample], concurrency: int
) -> dict[str, dict[MeasuredMetric, MetricStats]]:
    evidence = Evidence("v", ["v"], sorted({s.prompt_class for s in samples}), samples)
    evidence.windows = {"v": [Counters(window_s=1.0)]}  # a kbgen run: its windows are timed
    evidence.concurrency = concurrency
    return figures.measurements(evidence)["v"]


def test_the_steady_state_leaves_out_the_ramps() -> None:
    """Four streams starting 25 ms apart (a ramp up), three requests each (a ramp down as they
    finish 25 ms apart): in between all four stream, 4 × 100 tok/s; over the whole window less."""
    streams, per_stream = 4, 3
    samples = _closed_loop(streams, ["all"] * streams * per_stream, [k * 25 * MS for k in range(4)])
    sends = sorted(s.sent_ns for s in samples)
    ends = sorted(s.done_ns or 0 for s in samples)
    assert figures.steady_states(samples, streams) == {
        ("v", 0, -1, 0): (sends[streams - 1], min(e for e in ends if e > sends[-1]))
    }
    found = _measured(samples, streams)["all"]
    assert found["steady_output_tok_s"].mean == pytest.approx(streams * 1e9 / STEP, rel=1e-5)
    whole = sum(s.output_tokens or 0 for s in samples) / ((ends[-1] - sends[0]) / 1e9)
    assert found["output_tok_s"].mean == pytest.approx(whole, rel=1e-5)
    assert found["output_tok_s"].mean < found["steady_output_tok_s"].mean


def test_with_every_stream_active_throughout_the_steady_state_is_the_whole_window() -> None:
    streams = 4
    samples = _closed_loop(streams, ["all"] * streams * 3, [0] * streams)
    found = _measured(samples, streams)["all"]
    assert found["steady_output_tok_s"].mean == pytest.approx(found["output_tok_s"].mean)
    assert found["steady_output_tok_s"].mean == pytest.approx(streams * 1e9 / STEP, rel=1e-5)


def test_one_stream_has_no_steady_state_of_its_own() -> None:
    samples = _closed_loop(1, ["all"] * 5, [0])
    assert figures.steady_states(samples, 1) == {}
    assert "steady_output_tok_s" not in _measured(samples, 1)["all"]


def test_fewer_requests_than_streams_never_reach_a_steady_state() -> None:
    samples = _closed_loop(3, ["all"] * 3, [0, 5 * MS, 10 * MS])
    assert figures.steady_states(samples, 4) == {}
    assert "steady_output_tok_s" not in _measured(samples, 4)["all"]


def test_a_class_counts_its_own_tokens_over_its_own_time_in_the_steady_state() -> None:
    """Two classes one after the other: each class's figure is its tokens over the part of the
    steady state it was in flight; a class sent only in the ramp down has none."""
    streams = 2
    queue = ["coding"] * 4 + ["math"] * 4 + ["late"]
    samples = _closed_loop(streams, queue, [0, 5 * MS])
    ((start, stop),) = figures.steady_states(samples, streams).values()
    late = [s for s in samples if s.prompt_class == "late"]
    assert late[0].sent_ns == max(s.sent_ns for s in samples)  # the last send, in the ramp down
    found = _measured(samples, streams)
    for cls in ("coding", "math"):
        mine = [s for s in samples if s.prompt_class == cls]
        tokens = sum(1 for s in mine for t in s.chunk_ns if start < t <= stop)
        first = max(min(s.sent_ns for s in mine), start)
        last = min(max(s.done_ns or 0 for s in mine), stop)
        expected = tokens / ((last - first) / 1e9)
        assert found[cls]["steady_output_tok_s"].mean == pytest.approx(expected, rel=1e-5)
    assert "steady_output_tok_s" not in found["late"]  # no token of it arrived before `stop`


def test_a_failed_request_held_a_stream_but_brings_no_tokens() -> None:
    streams = 2
    samples = _closed_loop(streams, ["all"] * 6, [0, 5 * MS])
    steady = figures.steady_states(samples, streams)
    failed = samples[2].model_copy(update={"error": "HTTP 500"})
    with_failure = [*samples[:2], failed, *samples[3:]]
    assert figures.steady_states(with_failure, streams) == steady
    ok = figures.steady_throughput(samples, steady)
    assert ok is not None
    less = figures.steady_throughput(with_failure, steady)
    assert less is not None and less < ok


def test_the_steady_state_survives_the_samples_file(tmp_path: Path) -> None:
    streams = 4
    samples = _closed_loop(streams, ["all"] * 12, [k * 25 * MS for k in range(4)])
    evidence = Evidence("v", ["v"], ["all"], samples, {"v": [Counters(window_s=1.0)]})
    evidence.concurrency = streams
    path = tmp_path / "x.samples.jsonl.gz"
    path.write_bytes(samples_bytes(evidence))
    again = read_samples(path)
    assert again.concurrency == streams
    assert figures.measurements(again) == figures.measurements(evidence)
    # one stream: the samples file is what it was before steady states existed
    evidence.concurrency = 1
    header = gzip.decompress(samples_bytes(evidence)).split(b"\n")[0]
    assert json.loads(header) == {
        "kind": "evidence",
        "baseline": "v",
        "variants": ["v"],
        "classes": ["all"],
    }


def test_a_class_with_a_chunk_of_unknown_size_has_no_per_token_itl_or_steady_state() -> None:
    """Usage at the end of the stream only: a request whose chunks did not prove one token
    each has no chunk counts. A per-token ITL of the others alone would be a biased subset and
    the steady state's token count short: neither is given; per-request figures and chunk gaps
    stay."""
    streams, per_stream = 4, 3
    samples = _closed_loop(streams, ["all"] * streams * per_stream, [k * 25 * MS for k in range(4)])
    known = _measured(samples, streams)["all"]
    assert {"itl_ms", "steady_output_tok_s"} <= set(known)
    samples[5].chunk_tokens = []
    found = _measured(samples, streams)["all"]
    assert "itl_ms" not in found and "steady_output_tok_s" not in found
    for metric in ("chunk_gap_ms", "tpot_ms", "decode_tok_s", "ttft_ms", "output_tok_s"):
        assert found[metric] == known[metric]


def test_the_prefix_cache_is_summed_per_arm_and_load_level() -> None:
    def counted(level: int, queries: float, hits: float) -> Counters:
        return Counters(prefix_cache_queries=queries, prefix_cache_hits=hits, level=level)

    found = Evidence(
        "baseline",
        ["baseline", "ngram"],
        ["coding"],
        windows={
            "baseline": [counted(0, 100, 20), counted(1, 300, 150), counted(0, 100, 30)],
            "ngram": [Counters(level=0), Counters(level=1)],  # a server that counts none
        },
        loads=[{"concurrency": 1}, {"concurrency": 8}],
    )
    caches = figures.prefix_cache(found)
    assert [(c.variant, c.load, c.queries, c.hits, c.hit_rate) for c in caches] == [
        ("baseline", {"concurrency": 1}, 200, 50, 0.25),
        ("baseline", {"concurrency": 8}, 300, 150, 0.5),
    ]
    none_looked_up = dataclasses.replace(found, windows={"baseline": [counted(0, 0, 0)]})
    assert figures.prefix_cache(none_looked_up)[0].hit_rate is None


def test_the_design_expects_a_prefix_s_blocks_once_a_request_with_it_came() -> None:
    def sent(arm: str, at: int, prefix: int, prompt: int, attempt: int = 0) -> Sample:
        return Sample(
            variant=arm,
            prompt_class="coding",
            prompt_index=prompt,
            prefix=prefix,
            repeat=0,
            attempt=attempt,
            scheduled_ns=at,
            sent_ns=at,
            chunk_ns=[at + 10],
            done_ns=at + 20,
            prompt_tokens=100,
            output_tokens=1,
        )

    design = PrefixDesign(shared_tokens=[70, 40], block_size=16)
    samples = [
        sent("baseline", 1, 0, 0),  # prefix 0 new: nothing held
        sent("baseline", 2, 0, 1),  # prefix 0 seen: 70 shared tokens, 4 blocks of 16
        sent("baseline", 3, 0, 0),  # the same prompt and prefix: all but the last token, 96
        sent("ngram", 4, 0, 0),  # another arm's start: an empty cache
        sent("ngram", 5, 1, 1),  # prefix 1 new
        sent("ngram", 6, 1, 2),  # prefix 1 seen: 40 tokens, 2 blocks
        sent("ngram", 1, 1, 3, attempt=1),  # a resume: its own start
    ]
    found = Evidence("baseline", ["baseline", "ngram"], ["coding"], samples, prefixes=design)
    designed = figures.designed_hits(found)
    assert designed[("baseline", 0)] == (0 + 64 + 96) / 300
    assert designed[("ngram", 0)] == (0 + 0 + 32 + 0) / 400
    assert figures.designed_hits(dataclasses.replace(found, prefixes=None)) == {}
    unknown = design.model_copy(update={"block_size": None})
    assert figures.designed_hits(dataclasses.replace(found, prefixes=unknown)) == {}
