#!/usr/bin/env python3
"""CPU per SSE event of each client's own stream handling, on identical reads, without a network.

Run with the vLLM venv's python (it imports vllm bench's request function; kbgen from src/):

    /work/cache/vllm-venv/bin/python bench/perf/sse_parse_micro.py

The end-to-end benchmark (`client_overhead.py`) includes aiohttp, the event loop and the kernel,
which both clients share, and it is noisy on a shared machine. This isolates what differs: the
real `kbgen.bench.client._read_stream` and the real `async_request_openai_completions` of
`vllm bench serve` (0.32) are fed the same bytes — one 200-token vLLM completion stream from
`fake_vllm.py` — through a stub response whose `content.iter_any()` yields them k events per
read (k = 1, 16, 200: from one event per TCP segment to a saturated client). It reports µs of
thread CPU per event (best of interleaved trials), next to a bare `json.loads` of each event
and to a proposed variant of kbgen's loop (see `proposed_read_stream`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench" / "perf"))

from fake_vllm import Source  # noqa: E402
from vllm.benchmarks.lib.endpoint_request_func import (  # noqa: E402
    RequestFuncInput,
    async_request_openai_completions,
)

from kbgen.bench.client import SSEParser, _read_stream, _text_of  # noqa: E402
from kbgen.bench.samples import Sample  # noqa: E402

N = 200


class _Content:
    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    async def iter_any(self) -> Any:
        for data in self.reads:
            yield data


class _Response:
    status = 200
    reason = "OK"

    def __init__(self, reads: list[bytes]) -> None:
        self.content = _Content(reads)

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Session:
    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    def post(self, **_: Any) -> _Response:
        return _Response(self.reads)


def _sample() -> Sample:
    return Sample(
        variant="x", prompt_class="c", prompt_index=0, repeat=0, scheduled_ns=0, sent_ns=0
    )


class FastSSEParser(SSEParser):
    """SSEParser with a fast path for the usual one-line `data: ` event (bytes out)."""

    def feed(self, data: bytes) -> list[bytes]:  # type: ignore[override]
        buffer = self._buffer + data if self._buffer else data
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        *events, self._buffer = buffer.split(b"\n\n")
        payloads = []
        for event in events:
            if event[:6] == b"data: " and b"\n" not in event:
                payloads.append(event[6:])
                continue
            lines = [
                ln[5:].removeprefix(b" ") for ln in event.split(b"\n") if ln.startswith(b"data:")
            ]
            if lines:
                payloads.append(b"\n".join(lines))
        return payloads


async def proposed_read_stream(response: Any, sample: Sample) -> None:
    """kbgen's `_read_stream` with two changes: the parser's fast path (json.loads takes the
    bytes), and usage kept in locals, written to the pydantic Sample once at the end instead of
    two validated `__setattr__` per event. Same results, same error handling."""
    parser = FastSSEParser()
    seen_tokens = 0
    prompt_tokens = None
    done = False
    chunk_ns, chunk_tokens, loads = sample.chunk_ns, sample.chunk_tokens, json.loads
    try:
        async for data in response.content.iter_any():
            now = time.perf_counter_ns()
            for payload in parser.feed(data):
                if payload == b"[DONE]":
                    done = True
                    continue
                try:
                    event = loads(payload)
                except ValueError:
                    sample.error = f"malformed SSE event: {payload[:120]!r}"
                    return
                if type(event) is not dict:
                    sample.error = f"malformed SSE event: {payload[:120]!r}"
                    return
                if "error" in event:
                    sample.error = f"server error in stream: {str(event['error'])[:200]}"
                    return
                usage = event.get("usage") or {}
                choices = event.get("choices") or []
                completion = usage.get("completion_tokens")
                if completion is not None:
                    tokens = completion - seen_tokens
                    seen_tokens = completion
                    prompt_tokens = usage.get("prompt_tokens")
                else:
                    tokens = 1 if any(_text_of(c) for c in choices) else 0
                if tokens > 0 and choices:
                    chunk_ns.append(now)
                    chunk_tokens.append(tokens)
    finally:
        if seen_tokens:
            sample.output_tokens = seen_tokens
            sample.prompt_tokens = prompt_tokens
    sample.done_ns = time.perf_counter_ns()
    if not done:
        sample.error = f"stream ended without [DONE] after {len(sample.chunk_ns)} token chunks"
    elif not sample.chunk_ns:
        sample.error = "stream finished without generating a token"


def main() -> None:
    models = Path(os.environ.get("KBGEN_VLLM_MODELS", REPO / ".vllm" / "models"))
    src = Source(str(models / "kbgen-tiny-llama"), " the", 16)  # the model id sets event size
    frames = src._build("completions", N)
    events = [f.split(b"\r\n", 1)[1][:-2] for f in frames[:-1]]  # without the chunked framing
    loop = asyncio.new_event_loop()

    def kbgen(reads: list[bytes]) -> None:
        sample = _sample()
        loop.run_until_complete(_read_stream(_Response(reads).content.iter_any(), sample))
        assert sample.ok and len(sample.chunk_ns) == N and sample.output_tokens == N

    def proposed(reads: list[bytes]) -> None:
        sample = _sample()
        loop.run_until_complete(proposed_read_stream(_Response(reads), sample))
        assert sample.ok and len(sample.chunk_ns) == N and sample.output_tokens == N

    request = RequestFuncInput(
        prompt="x", api_url="http://127.0.0.1/v1/completions", prompt_len=1, output_len=N,
        model="m",
    )  # fmt: skip

    def vllm(reads: list[bytes]) -> None:
        out = loop.run_until_complete(async_request_openai_completions(request, _Session(reads)))
        assert out.success and len(out.itl) == N - 1 and out.output_tokens == N, out.error

    def json_only(_: list[bytes]) -> None:
        for event in events[:-1]:
            json.loads(event[6:])

    variants = [("kbgen", kbgen), ("kbgen proposed", proposed), ("vllm bench", vllm),
                ("json.loads only", json_only)]  # fmt: skip
    print(f"µs of CPU per event (best of 60 interleaved trials), {N}-event completion streams")
    print(f"{'events/read':<13}" + "".join(f"{name:>17}" for name, _ in variants))
    for k in (1, 16, 200):
        reads = [b"".join(events[i : i + k]) for i in range(0, len(events), k)]
        best = {name: float("inf") for name, _ in variants}
        for _ in range(60):
            for name, fn in variants:
                t = time.thread_time()
                for _ in range(10):
                    fn(reads)
                best[name] = min(best[name], (time.thread_time() - t) / 10 / N * 1e6)
        print(f"{k:<13}" + "".join(f"{best[name]:>17.2f}" for name, _ in variants))


if __name__ == "__main__":
    main()
