"""A loopback stand-in for a vLLM server, replaying a real capture, with faults on demand.

Not a benchmark source (bench/perf/fake_vllm.py is): a test double for the bench stage when no
real vLLM is needed — HTTP 500s, stalls and malformed events at chosen request numbers.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

from aiohttp import web

CAPTURE = Path(__file__).parents[1] / "fixtures" / "vllm" / "baseline-completion.sse"


class FakeVllm:
    """Serves /health, /version, /v1/models, /metrics and streaming /v1/completions."""

    def __init__(
        self, faults: dict[int, str] | None = None, model: str = "fake", health_delay_s: float = 0
    ) -> None:
        self.faults = faults or {}  # request number (from 0, warm-up included) -> fault
        self.model = model  # what /v1/models and the metrics' labels call the model
        self.healthy_at = time.monotonic() + health_delay_s  # a start-up that takes its time
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
        return web.Response(text="", status=200 if time.monotonic() >= self.healthy_at else 503)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.32.0"})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "max_model_len": 2048}]}
        )

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            text=(
                "# TYPE vllm:generation_tokens counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="{self.model}"}} '
                f"{self.generated}\n"
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


def main(argv: list[str]) -> None:
    """A server process for the `process` launcher: `MODEL [ARGS…] --host H --port P`.

    Like vLLM it takes the last `--host`/`--port`, serves MODEL under its own name and logs its
    arguments; any other argument is accepted and ignored. It also writes its environment to
    its output, one `NAME=value` a line (as a wrapper script running `env` would), and, given
    `--dump-to FILE`, its arguments and environment as JSON to FILE (for tests that check what
    a server was started with). `--health-delay S` makes /health answer 503 for its first S
    seconds, as a server loading its model does; `--log LINE` writes LINE to its output, as vLLM
    logs what it chose.
    """
    import os

    def last(option: str) -> str:
        return [value for name, value in itertools.pairwise(argv) if name == option][-1]

    options: dict[str, object] = {}
    for arg, after in itertools.pairwise([*argv, "--"]):
        if arg.startswith("--"):
            name, sep, value = arg[2:].partition("=")
            given = value if sep else (True if after.startswith("--") else after)
            options[name.replace("-", "_")] = given
    print(f"non-default args: {options!r}", flush=True)
    for name, value in itertools.pairwise(argv):
        if name == "--log":
            print(value, flush=True)
    for name, value in sorted(os.environ.items()):
        print(f"{name}={value}", flush=True)
    if "--dump-to" in argv:
        Path(last("--dump-to")).write_text(json.dumps({"argv": argv, "env": dict(os.environ)}))
    delay = float(last("--health-delay")) if "--health-delay" in argv else 0.0
    web.run_app(
        FakeVllm(model=argv[0], health_delay_s=delay).app(),
        host=last("--host"),
        port=int(last("--port")),
        print=None,
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
