"""A paced stand-in for vLLM whose speed per setting and load the test sets: known truth.

It streams completions shaped like vLLM 0.32's (continuous usage stats: a first token, then
the rest in one chunk after the decode time), at `rate(setting, streams)` tokens/s: `setting`
is the variant its launcher last started, `streams` the load the test says is running (its
`Loads` events set it as each load level starts: the truth is the test's, not a count of
requests in flight, which ramps up and down inside a window). A prompt's own speed varies by a
fixed factor per prompt text, as content does; with a `spread`, each request's speed by its own
factor too, as a real server's does from one request to the next (fixed by the setting, the
prompt and how often the server has served that pair: a run gets the same factors every time).
`Switching` is the launcher: it "starts" a variant by switching the setting, and counts starts.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from kbgen.bench.driver import NoEvents
from kbgen.bench.launch import Launched
from kbgen.kb.models import Load

Rate = Callable[[str, int], float]  # (setting, streams of the load) -> tokens/s


class PacedVllm:
    """Serves /health, /version, /v1/models, /metrics and streaming /v1/completions."""

    def __init__(self, rate: Rate, model: str = "paced", spread: float = 0.0) -> None:
        self.rate, self.model, self.spread = rate, model, spread
        self.served: dict[tuple[str, str], int] = {}
        self.setting = ""
        self.streams = 1
        self.generated = 0

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
        data = [{"id": self.model, "max_model_len": 2048}]
        return web.json_response({"object": "list", "data": data})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            text="# TYPE vllm:generation_tokens counter\n"
            f'vllm:generation_tokens_total{{engine="0",model_name="{self.model}"}} '
            f"{self.generated}\n"
        )

    async def complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        tokens = int(body["max_tokens"])
        prompt = str(body["prompt"])
        speed = self.rate(self.setting, self.streams) * _content(prompt) * self._own(prompt)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(0.005)  # prefill
        await response.write(_chunk(1, tokens, "length" if tokens == 1 else None))
        if tokens > 1:
            await asyncio.sleep((tokens - 1) / speed)
            await response.write(_chunk(tokens, tokens, "length"))
        await response.write(_chunk(tokens, tokens, None, usage_only=True))
        await response.write(b"data: [DONE]\n\n")
        self.generated += tokens
        await response.write_eof()
        return response

    def _own(self, prompt: str) -> float:
        """This request's own speed factor, 1 ± `spread`: the n-th of the setting and prompt."""
        key = (self.setting, prompt)
        n = self.served[key] = self.served.get(key, 0) + 1
        return 1 + self.spread * (2 * _uniform(f"{self.setting}\n{prompt}\n{n}") - 1)


def _content(prompt: str) -> float:
    """A prompt's own speed factor, 0.9 to 1.1, fixed by its text."""
    return 0.9 + 0.2 * hashlib.sha256(prompt.encode()).digest()[0] / 255


def _uniform(text: str) -> float:
    """A number from 0 to 1 fixed by `text`."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") / 0xFFFFFFFF


def _chunk(done: int, total: int, finish: str | None, usage_only: bool = False) -> bytes:
    choices: list[dict[str, Any]] = []
    if not usage_only:
        text = " x" * (done if done == 1 else done - 1)
        choices = [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]
    usage = {"prompt_tokens": 5, "total_tokens": 5 + done, "completion_tokens": done}
    event = {"id": "cmpl-paced", "object": "text_completion", "choices": choices, "usage": usage}
    return f"data: {json.dumps(event)}\n\n".encode()


class Loads(NoEvents):
    """bench events that tell the paced server which load level runs (its `streams`)."""

    def __init__(self, server: PacedVllm) -> None:
        self.server = server

    def load_started(self, variant: str, load: Load, todo: int) -> None:
        self.server.streams = load.get("concurrency", 1)


class Switching:
    """A launcher for the paced server: a start switches its setting; `starts` counts them (a
    variant already running is reused, as kbgen's process launcher reuses a server)."""

    def __init__(self, server: PacedVllm, url: str) -> None:
        self.server, self.url = server, url
        self.starts: list[str] = []

    async def start(self, name: str, variant: Any, log: Path, waiting: Any) -> Launched:
        if self.server.setting == name:
            return Launched(self.url, reused=True)
        self.server.setting = name
        self.starts.append(name)
        return Launched(self.url, startup_s=0.0)

    async def stop(self) -> None:
        self.server.setting = ""

    def alive(self) -> bool:
        return True


def main(argv: list[str]) -> None:
    """A paced server process for the `process` launcher: `MODEL --rate R --host H --port P`,
    R tokens/s at every load (`--spread S`: each request's own factor 1 ± S); the environment's
    `PACED_SLOWER="R=F"` multiplies the rate R by F on this node (a machine slower in one arm);
    it prints `PACED_KEY`, a secret, if set."""
    import os

    def last(option: str, default: str) -> str:
        found = [v for name, v in itertools.pairwise(argv) if name == option]
        return found[-1] if found else default

    rate = float(last("--rate", "500"))
    slower, _, factor = os.environ.get("PACED_SLOWER", "").partition("=")
    if slower and float(slower) == rate:
        rate *= float(factor)
    print(f"paced server: {rate:g} tokens/s", flush=True)
    if "PACED_KEY" in os.environ:  # what a server prints of its secret: the run keeps it masked
        print(f"key: {os.environ['PACED_KEY']}", flush=True)
    server = PacedVllm(lambda setting, streams: rate, argv[0], float(last("--spread", "0")))
    server.setting = f"{rate:g}"  # its requests' own factors differ from another rate's
    web.run_app(
        server.app(), host=last("--host", "127.0.0.1"), port=int(last("--port", "8000")), print=None
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
