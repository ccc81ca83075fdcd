"""The streaming client against loopback servers: real captures replayed, and every fault."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kbgen.bench.client import Client, Timeouts
from kbgen.bench.samples import Sample
from kbgen.errors import ServerUnreachable

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def events_of(name: str) -> list[bytes]:
    """The SSE events of a capture, each with its blank-line terminator."""
    body = (FIXTURES / name).read_bytes()
    return [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]


def sample() -> Sample:
    return Sample(
        variant="v", prompt_class="c", prompt_index=0, repeat=0, scheduled_ns=0, sent_ns=0
    )


async def _with_server(
    handler: Handler, job: Callable[[Client], Awaitable[Any]], timeouts: Timeouts | None = None
) -> Any:
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_get("/health", handler)
    app.router.add_get("/metrics", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with Client(str(server.make_url("/v1")), timeouts=timeouts or Timeouts()) as client:
            return await job(client)
    finally:
        await server.close()


def stream_with(handler: Handler, api: str = "completions", **timeouts: float) -> Sample:
    async def job(client: Client) -> Sample:
        return await client.stream(api, {"prompt": "x"}, sample(), 0)  # type: ignore[arg-type]

    return asyncio.run(_with_server(handler, job, Timeouts(**timeouts)))


def replay(
    events: list[bytes], delay_s: float = 0.0, stop_after: int | None = None, status: int = 200
) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
        if status != 200:
            return web.Response(status=status, text='{"error": "boom"}')
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, event in enumerate(events):
            if stop_after is not None and i == stop_after:
                request.transport.close()  # type: ignore[union-attr]  # drop the connection
                return response
            await response.write(event)
            await asyncio.sleep(delay_s)
        await response.write_eof()
        return response

    return handler


def test_replayed_speculative_stream_counts_tokens_from_usage() -> None:
    events = events_of("ngram-completion.sse")
    usages = [
        json.loads(e[6:])["usage"]["completion_tokens"] for e in events if e.startswith(b"data: {")
    ]
    result = stream_with(replay(events, delay_s=0.001))
    assert result.ok, result.error
    assert result.output_tokens == usages[-1]
    assert sum(result.chunk_tokens) == usages[-1]
    assert max(result.chunk_tokens) > 1  # speculative decoding: several tokens in one chunk
    assert len(result.chunk_ns) < usages[-1]
    assert result.chunk_ns == sorted(result.chunk_ns)
    assert result.sent_ns <= result.chunk_ns[0] <= (result.done_ns or 0)


def test_replayed_chat_stream_skips_the_role_only_chunk() -> None:
    events = events_of("baseline-chat.sse")
    first = json.loads(events[0][6:])
    assert first["choices"][0]["delta"].get("content", "") == ""  # the capture starts role-only
    result = stream_with(replay(events, delay_s=0.001), api="chat")
    assert result.ok, result.error
    assert sum(result.chunk_tokens) == result.output_tokens
    assert all(tokens >= 1 for tokens in result.chunk_tokens)


@pytest.mark.parametrize(
    ("handler", "timeouts", "error"),
    [
        (replay([], status=500), {}, r"^HTTP 500: \{\"error\": \"boom\"\}"),
        (
            replay(events_of("ngram-completion.sse"), stop_after=5),
            {},
            r"^stream (dropped|ended without \[DONE\]) after 5 token chunks",
        ),
        (
            replay(events_of("ngram-completion.sse")[:5]),
            {},
            r"^stream ended without \[DONE\] after 5 token chunks$",
        ),
        (replay([b"data: {not json\n\n", b"data: [DONE]\n\n"]), {}, r"^malformed SSE event"),
        (
            replay([b'data: {"error": {"message": "out of memory"}}\n\n']),
            {},
            r"^server error in stream: .*out of memory",
        ),
        (replay([b"data: [DONE]\n\n"]), {}, r"^stream finished without generating a token$"),
        (
            replay([*events_of("ngram-completion.sse")[:3], b": keep-alive\n\n"], delay_s=2.0),
            {"stall_s": 0.5},
            r"^stalled: no data for 0.5 s after 1 token chunks$",
        ),
    ],
    ids=["http-500", "dropped", "no-done", "malformed-sse", "error-event", "no-tokens", "stalled"],
)
def test_failures_are_recorded_not_raised(
    handler: Handler, timeouts: dict[str, float], error: str
) -> None:
    result = stream_with(handler, **timeouts)
    assert not result.ok
    assert result.error is not None
    assert re.search(error, result.error), result.error


def test_get_json_and_health() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/health":
            return web.Response(status=503)
        return web.Response(text="# HELP x y\n")

    async def job(client: Client) -> tuple[bool, str]:
        return await client.healthy(), await client.metrics_text()

    healthy, text = asyncio.run(_with_server(handler, job))
    assert healthy is False and text.startswith("# HELP")


def test_unreachable_server_raises_a_kbgen_error() -> None:
    async def job() -> None:
        async with Client("http://127.0.0.1:9") as client:  # discard port: nothing listens
            assert await client.healthy() is False
            await client.get_json("/version")

    with pytest.raises(ServerUnreachable, match=r"127\.0\.0\.1:9/version"):
        asyncio.run(job())
