"""A loopback stand-in for a vLLM server, replaying a real capture, with faults on demand.

Not a benchmark source (bench/perf/fake_vllm.py is): a test double for the bench stage when no
real vLLM is needed — HTTP 500s, stalls and malformed events at chosen request numbers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web

CAPTURE = Path(__file__).parents[1] / "fixtures" / "vllm" / "baseline-completion.sse"


class FakeVllm:
    """Serves /health, /version, /v1/models, /metrics and streaming /v1/completions."""

    def __init__(self, faults: dict[int, str] | None = None) -> None:
        self.faults = faults or {}  # request number (from 0, warm-up included) -> fault
        self.requests = 0
        self.generated = 0
        body = CAPTURE.read_bytes()
        self.events = [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]
        self.tokens = max(
            json.loads(e[6:])["usage"]["completion_tokens"]
            for e in self.events
            if e.startswith(b"data: {")
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/completions", self.complete)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.32.0"})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "fake", "max_model_len": 2048}]}
        )

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            text=(
                "# TYPE vllm:generation_tokens counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="fake"}} {self.generated}\n'
            )
        )

    async def complete(self, request: web.Request) -> web.StreamResponse:
        number, self.requests = self.requests, self.requests + 1
        fault = self.faults.get(number)
        if fault == "http-500":
            return web.Response(status=500, text='{"error": "injected"}')
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if fault == "malformed":
            await response.write(b"data: {broken\n\n")
            return response
        for i, event in enumerate(self.events):
            if fault == "stall" and i == 3:
                await asyncio.sleep(30)
            await response.write(event)
        self.generated += self.tokens
        await response.write_eof()
        return response


if __name__ == "__main__":  # a server process for the `process` launcher: `… --host H --port P`
    import sys

    argv = sys.argv[1:]
    web.run_app(
        FakeVllm().app(),
        host=argv[argv.index("--host") + 1],
        port=int(argv[argv.index("--port") + 1]),
        print=None,
    )
