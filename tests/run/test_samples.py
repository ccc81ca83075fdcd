"""samples: per-request figures from constructed samples, and the real SSE captures they come from.

The SSE part feeds real vLLM streams (fixtures/vllm/) through the client's incremental parser in
awkward pieces, and checks what the captures show about tokens per chunk: one per chunk without
speculation, several per chunk with n-gram speculative decoding.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

from kbgen.bench.client import SSEParser
from kbgen.run.samples import Sample, on_schedule, request_metrics

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm"
MS = 1_000_000  # ns


def _sample(
    chunks_ms: Sequence[float],
    tokens: Sequence[int],
    output_tokens: int | None,
    *,
    sent_ms: float = 0,
    error: str | None = None,
) -> Sample:
    base = 5_000_000 * MS  # perf_counter_ns values are large; only differences matter
    return Sample(
        variant="ngram",
        prompt_class="coding",
        prompt_index=0,
        repeat=0,
        scheduled_ns=base + int(sent_ms * MS),
        sent_ns=base + int(sent_ms * MS),
        chunk_ns=[base + int(t * MS) for t in chunks_ms],
        chunk_tokens=list(tokens),
        done_ns=base + int(chunks_ms[-1] * MS) + MS if chunks_ms else None,
        prompt_tokens=20,
        output_tokens=output_tokens,
        error=error,
    )


# --- request_metrics: known answers ---------------------------------------------------------

TEN_CHUNKS = [100 + 20 * i for i in range(10)]  # 100, 120, ..., 280 ms
TEN_CHUNK_TOKENS = [1, 2, 1, 2, 1, 2, 1, 2, 2, 2]  # 16 tokens in 10 chunks


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        pytest.param(
            _sample([100, 110, 120, 130], [1, 1, 1, 1], 4),
            {
                "ttft_ms": 100,
                "e2e_ms": 130,
                "output_tokens": 4,
                "tpot_ms": 10,
                "decode_tok_s": 100,
                "chunk_gap_ms": [10, 10, 10],
                "itl_ms": [10, 10, 10],
            },
            id="one-token-per-chunk",
        ),
        pytest.param(
            _sample([50, 80], [1, 3], 4),
            {
                "ttft_ms": 50,
                "e2e_ms": 80,
                "output_tokens": 4,
                "tpot_ms": 10,
                "decode_tok_s": 100,
                "chunk_gap_ms": [30],
                "itl_ms": [10, 10, 10],  # a 30 ms gap before a 3-token chunk
            },
            id="3-token-chunk",
        ),
        pytest.param(
            _sample(TEN_CHUNKS, TEN_CHUNK_TOKENS, 16),
            {
                "ttft_ms": 100,
                "e2e_ms": 280,
                "output_tokens": 16,  # from usage, not the 10 chunks
                "tpot_ms": 180 / 15,
                "decode_tok_s": 15 / 0.180,
                "chunk_gap_ms": [20] * 9,
                "itl_ms": [20 / n for n in TEN_CHUNK_TOKENS[1:] for _ in range(n)],
            },
            id="10-chunks-16-tokens",
        ),
        pytest.param(
            _sample([1040, 1100, 1250], [2, 1, 3], 6, sent_ms=1000),
            {
                "ttft_ms": 40,
                "e2e_ms": 250,
                "output_tokens": 6,
                "tpot_ms": 210 / 5,
                "decode_tok_s": 5 / 0.210,
                "chunk_gap_ms": [60, 150],
                "itl_ms": [60, 50, 50, 50],
            },
            id="multi-token-first-chunk-late-send",
        ),
        pytest.param(
            _sample([40], [1], 1),
            {"ttft_ms": 40, "e2e_ms": 40, "output_tokens": 1, "chunk_gap_ms": [], "itl_ms": []},
            id="single-token-no-tpot",
        ),
    ],
)
def test_request_metrics(sample: Sample, expected: dict[str, object]) -> None:
    got = request_metrics(sample)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value), key
    assert sample.metrics() == got


def test_a_request_sent_on_a_schedule_counts_its_latency_from_its_time_in_it() -> None:
    """Due at 1,000 ms, sent at 1,300 (the client's slots were full): TTFT and E2E from 1,000 —
    coordinated omission corrected — and from the send beside them, the lag between the two."""
    sent_late = _sample([1340, 1350, 1360], [1, 1, 1], 3, sent_ms=1300)
    closed = request_metrics(sent_late)
    assert closed["ttft_ms"] == pytest.approx(40) and "lag_ms" not in closed
    due = sent_late.model_copy(update={"scheduled_ns": sent_late.scheduled_ns - 300 * MS})
    assert request_metrics(due) == closed  # not sent on a schedule: counted from the send
    scheduled = on_schedule(due)
    got = request_metrics(scheduled)
    assert got["ttft_ms"] == pytest.approx(340) and got["e2e_ms"] == pytest.approx(360)
    assert got["ttft_sent_ms"] == pytest.approx(40) and got["e2e_sent_ms"] == pytest.approx(60)
    assert got["lag_ms"] == pytest.approx(300) and got["slot_wait_ms"] == 0  # no slot time kept
    ready = scheduled.sent_ns - 20 * MS  # a slot took it 280 ms late, sent 20 ms after that
    waited = request_metrics(scheduled.model_copy(update={"ready_ns": ready}))
    assert waited["slot_wait_ms"] == pytest.approx(280) and waited["lag_ms"] == pytest.approx(20)
    assert waited["ttft_ms"] == pytest.approx(340) and waited["ttft_sent_ms"] == pytest.approx(40)
    for same in ("tpot_ms", "decode_tok_s", "itl_ms", "chunk_gap_ms"):  # between tokens
        assert got[same] == pytest.approx(closed[same]), same


@pytest.mark.parametrize(
    "sample",
    [
        pytest.param(
            _sample([100, 120], [1, 1], 2, error="HTTP 500: boom"), id="error-after-chunks"
        ),
        pytest.param(
            _sample([], [], None, error="stalled: no data for 60 s"), id="error-no-chunks"
        ),
    ],
)
def test_failed_sample_gives_no_metrics(sample: Sample) -> None:
    assert not sample.ok
    assert request_metrics(sample) == {}


@pytest.mark.parametrize(
    ("chunks_ms", "tokens"),
    [
        pytest.param([10, 20, 30], [1, 1, 1], id="plain"),
        pytest.param(TEN_CHUNKS, TEN_CHUNK_TOKENS, id="spec-decode"),
        pytest.param([5, 7, 50, 51], [3, 6, 1, 6], id="bursty"),
    ],
)
def test_per_token_itl_accounts_for_every_token_after_the_first_chunk(
    chunks_ms: list[float], tokens: list[int]
) -> None:
    got = request_metrics(_sample(chunks_ms, tokens, sum(tokens)))
    assert len(got["itl_ms"]) == sum(tokens[1:])
    assert len(got["chunk_gap_ms"]) == len(chunks_ms) - 1
    assert sum(got["itl_ms"]) == pytest.approx(sum(got["chunk_gap_ms"]))
    assert sum(got["chunk_gap_ms"]) == pytest.approx(got["e2e_ms"] - got["ttft_ms"])


def test_sample_rejects_unknown_fields() -> None:
    fields = _sample([1], [1], 1).model_dump()
    with pytest.raises(ValidationError, match="chunk_token\n"):
        Sample.model_validate({**fields, "chunk_token": [1]})


# --- SSE captures through the client's parser -----------------------------------------------


def _capture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _reference_payloads(raw: bytes) -> list[str]:
    """The captures hold one `data: ` line per event, so a regex is a faithful reference."""
    return re.findall(r"^data: (.*)$", raw.decode("utf-8"), re.M)


Splitter = Callable[[bytes], list[bytes]]


def _whole(raw: bytes) -> list[bytes]:
    return [raw]


def _bytewise(raw: bytes) -> list[bytes]:
    return [raw[i : i + 1] for i in range(len(raw))]


def _split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(cuts), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(edges)]


def _mid_data_prefix(raw: bytes) -> list[bytes]:
    # inside "data:" of the 2nd and 5th events: "da" | "ta: {..." and "data" | ": {..."
    starts = [m.start() for m in re.finditer(rb"data:", raw)]
    return _split_at(raw, [starts[1] + 2, starts[4] + 4])


def _mid_json(raw: bytes) -> list[bytes]:
    # inside the JSON body of the 1st and 3rd events, in a key and in the usage object
    keys = [m.start() for m in re.finditer(rb'"choices"', raw)]
    usages = [m.start() for m in re.finditer(rb'"completion_tokens"', raw)]
    return _split_at(raw, [keys[0] + 3, usages[2] + 5])


def _mid_separator(raw: bytes) -> list[bytes]:
    # between the line end and the blank line that closes an event
    ends = [m.start() for m in re.finditer(rb"\n\r?\n", raw)]
    return _split_at(raw, [ends[0] + 1, ends[3] + 1])


def _between_cr_and_lf(raw: bytes) -> list[bytes]:
    return _split_at(raw, [m.start() + 1 for m in re.finditer(rb"\r\n", raw)][:4])


def _sevens(raw: bytes) -> list[bytes]:
    return [raw[i : i + 7] for i in range(0, len(raw), 7)]


def _lf(raw: bytes) -> bytes:
    return raw


def _crlf(raw: bytes) -> bytes:
    return raw.replace(b"\n", b"\r\n")


FEEDS = [
    pytest.param(_lf, _whole, id="lf-whole"),
    pytest.param(_lf, _bytewise, id="lf-1-byte"),
    pytest.param(_lf, _sevens, id="lf-7-bytes"),
    pytest.param(_lf, _mid_data_prefix, id="lf-mid-data-prefix"),
    pytest.param(_lf, _mid_json, id="lf-mid-json"),
    pytest.param(_lf, _mid_separator, id="lf-mid-blank-line"),
    pytest.param(_crlf, _whole, id="crlf-whole"),
    pytest.param(_crlf, _mid_data_prefix, id="crlf-mid-data-prefix"),
    pytest.param(_crlf, _mid_json, id="crlf-mid-json"),
    pytest.param(_crlf, _mid_separator, id="crlf-mid-blank-line"),
    pytest.param(_crlf, _bytewise, id="crlf-1-byte"),
    pytest.param(_crlf, _between_cr_and_lf, id="crlf-split-between-cr-and-lf"),
]


@pytest.mark.parametrize("capture", ["ngram-completion.sse", "ngram-chat.sse"])
@pytest.mark.parametrize(("line_ends", "splitter"), FEEDS)
def test_sse_parser_on_real_capture_in_awkward_pieces(
    capture: str, line_ends: Callable[[bytes], bytes], splitter: Splitter
) -> None:
    raw = _capture(capture)
    expected = _reference_payloads(raw)
    assert expected[-1] == "[DONE]" and len(expected) > 10
    pieces = splitter(line_ends(raw))
    assert b"".join(pieces) == line_ends(raw)
    parser = SSEParser()
    payloads = [payload for piece in pieces for payload in parser.feed(piece)]
    assert payloads == expected
    assert parser.pending == b""


def test_sse_parser_skips_comments_and_joins_data_lines() -> None:
    parser = SSEParser()
    stream = b': keep-alive\n\ndata:{"a":1}\n\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]\n\n'
    assert parser.feed(stream) == ['{"a":1}', "one\ntwo", "[DONE]"]


def test_sse_parser_holds_an_unfinished_event() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"a":1}\n\ndata: {"b"') == ['{"a":1}']
    assert parser.pending == b'data: {"b"'


def _token_chunks(capture: str) -> list[tuple[int, str]]:
    """(tokens added, text) of every chunk that adds tokens, from continuous usage stats.

    Counted by usage, not by text: the chat captures hold chunks with empty content that still
    add a token (a token that detokenizes to nothing), and a role-only first chunk adding none.
    """
    seen = 0
    out = []
    for payload in _reference_payloads(_capture(capture)):
        if payload == "[DONE]":
            continue
        event = json.loads(payload)
        total = event["usage"]["completion_tokens"]
        if event["choices"] and total > seen:
            (choice,) = event["choices"]
            out.append((total - seen, choice.get("text") or choice["delta"].get("content") or ""))
        seen = total
    return out


@pytest.mark.parametrize("capture", ["ngram-completion.sse", "ngram-chat.sse"])
def test_ngram_stream_has_multi_token_chunks(capture: str) -> None:
    chunks = _token_chunks(capture)
    assert all(tokens >= 1 for tokens, _ in chunks)
    assert any(tokens > 1 for tokens, _ in chunks)
    assert sum(tokens for tokens, _ in chunks) == 64


@pytest.mark.parametrize("capture", ["baseline-completion.sse", "baseline-chat.sse"])
def test_baseline_stream_has_one_token_per_chunk(capture: str) -> None:
    chunks = _token_chunks(capture)
    for tokens, text in chunks:
        # vLLM holds back a token that ends in an incomplete UTF-8 sequence and sends it with the
        # next one, so only a chunk completing a non-ASCII character may carry more than one.
        assert tokens == 1 or (tokens > 1 and not text.isascii()), (tokens, text)
    assert sum(tokens for tokens, _ in chunks) == 64


def test_ngram_capture_per_token_itl_is_not_the_chunk_gap() -> None:
    # The capture's real token counts per chunk, with a constant 30 ms between chunks.
    tokens = [n for n, _ in _token_chunks("ngram-completion.sse")]
    got = request_metrics(_sample([30 * (i + 1) for i in range(len(tokens))], tokens, sum(tokens)))
    assert got["output_tokens"] == 64 > len(tokens)
    assert len(got["itl_ms"]) == 64 - tokens[0]
    assert got["chunk_gap_ms"] == pytest.approx([30] * (len(tokens) - 1))
    mean_itl = sum(got["itl_ms"]) / len(got["itl_ms"])
    assert mean_itl == pytest.approx(30 * (len(tokens) - 1) / (64 - tokens[0]))
    assert mean_itl < 30
