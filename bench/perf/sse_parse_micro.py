#!/usr/bin/env python3
"""CPU per SSE event of each client's own stream handling, on identical reads, without a network.

Run with the vLLM venv's python (it imports vllm bench's request function; kbgen from src/):

    .vllm/venv/bin/python bench/perf/sse_parse_micro.py [--quick]

The end-to-end benchmark (`client_overhead.py`) includes aiohttp, the event loop and the kernel,
which both clients share, and it is noisy on a shared machine. This isolates what differs: the
real `kbgen.bench.client.Client.stream` (through a `ReplayTransport`) and the real
`async_request_openai_completions` of `vllm bench serve` (0.32, through a stub session) are fed
the same bytes — one 200-token vLLM completion stream from `fake_vllm.py` — k events per read
(k = 1, 16, 200: from one event per TCP segment to a saturated client). It reports µs of thread
CPU per event (best of interleaved trials), next to a bare `json.loads` of each event.
`--quick` runs 2 trials instead of 60 (the test suite's run, so that it cannot rot).
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

from kbgen.bench.client import Client, ReplayTransport  # noqa: E402
from kbgen.run.samples import Sample  # noqa: E402

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


def main() -> None:
    trials = 2 if sys.argv[1:] == ["--quick"] else 60
    models = Path(os.environ.get("KBGEN_VLLM_MODELS", REPO / ".vllm" / "models"))
    src = Source(str(models / "kbgen-tiny-llama"), " the", 16)  # the model id sets event size
    frames = src._build("completions", N)
    events = [f.split(b"\r\n", 1)[1][:-2] for f in frames[:-1]]  # without the chunked framing
    loop = asyncio.new_event_loop()

    def kbgen(reads: list[bytes]) -> None:
        client = Client("http://127.0.0.1", transport=ReplayTransport(reads))
        sample = loop.run_until_complete(client.stream("completions", {}, _sample(), 0))
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

    variants = [("kbgen", kbgen), ("vllm bench", vllm), ("json.loads only", json_only)]
    print(f"µs of CPU per event (best of {trials} interleaved trials), {N}-event streams")
    print(f"{'events/read':<13}" + "".join(f"{name:>17}" for name, _ in variants))
    for k in (1, 16, 200):
        reads = [b"".join(events[i : i + k]) for i in range(0, len(events), k)]
        best = {name: float("inf") for name, _ in variants}
        for _ in range(trials):
            for name, fn in variants:
                t = time.thread_time()
                for _ in range(10):
                    fn(reads)
                best[name] = min(best[name], (time.thread_time() - t) / 10 / N * 1e6)
        print(f"{k:<13}" + "".join(f"{best[name]:>17.2f}" for name, _ in variants))


if __name__ == "__main__":
    main()
