"""figures: the speculative-decoding figures per variant, from a real vLLM capture and built cases.

The expected numbers come from the capture's raw text and its SSE streams (tests/fixtures/vllm,
two requests of 64 tokens between the two scrapes of the n-gram server), never from the code
under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbgen.bench import metrics
from kbgen.bench.metrics import Counters, SpecDecodeCounters
from kbgen.record import figures
from kbgen.record.evidence import Evidence

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
    return Counters(
        generation_tokens=generated,
        spec_decode=SpecDecodeCounters.of(drafts, drafted, accepted, [accepted]),
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
        # nothing but accepted tokens (impossible, but no division by zero)
        ([_window(20, 8, 30, 20)], None, None),
    ],
    ids=["summed", "client-count", "unknown-tokens", "no-steps"],
)
def test_per_step_figures_from_summed_windows(
    windows: list[Counters], per_step: float | None, share: float | None
) -> None:
    stats = figures.spec_decode(_evidence(*windows))["ngram"]
    assert stats.tokens_per_engine_step == (
        None if per_step is None else pytest.approx(per_step, rel=1e-5)
    )
    assert stats.drafted_step_share == (None if share is None else pytest.approx(share, rel=1e-5))
