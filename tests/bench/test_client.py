"""The streaming client: parsing and timing on replayed captures, faults against loopback servers.

Parsing and timing need no socket: a ReplayTransport feeds the client recorded vLLM streams cut
into arbitrary pieces. What only a real connection shows — a dropped connection, a stall, an HTTP
error, nothing listening — runs against loopback aiohttp servers through the default transport.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kbgen.bench.client import Api, Client, ReplayTransport, Response, Timeouts
from kbgen.errors import ServerError, ServerUnreachable
from kbgen.kb.numbers import MAX_TOKENS
from kbgen.run.samples import Sample

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm"
CAPTURES = sorted(path.name for path in FIXTURES.glob("*.sse"))
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")


def events_of(name: str) -> list[bytes]:
    """The SSE events of a capture, each with its blank-line terminator."""
    body = (FIXTURES / name).read_bytes()
    return [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]


def final_usage(name: str) -> int:
    usages = [json.loads(e[6:])["usage"] for e in events_of(name) if e.startswith(b"data: {")]
    return int(usages[-1]["completion_tokens"])


def sample() -> Sample:
    return Sample(
        variant="v", prompt_class="c", prompt_index=0, repeat=0, scheduled_ns=0, sent_ns=0
    )


def cut(body: bytes, how: str) -> list[bytes]:
    """A body in the pieces reads might deliver: whole, byte by byte, or at random places."""
    if how == "whole":
        return [body]
    if how == "bytes":
        return [body[i : i + 1] for i in range(len(body))]
    rng = random.Random(how)
    points = sorted(rng.sample(range(1, len(body)), k=min(len(body) - 1, 40)))
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


def stream_replayed(
    chunks: list[bytes], api: Api = "completions", **replay: Any
) -> tuple[Sample, ReplayTransport]:
    transport = ReplayTransport(chunks, **replay)

    async def job() -> Sample:
        async with Client("http://vllm:8000/v1", api_key="k", transport=transport) as client:
            return await client.stream(api, {"prompt": "x"}, sample(), 0)

    return asyncio.run(job()), transport


# --- parsing and timing, on replayed bytes ---------------------------------------------------


@pytest.mark.parametrize("how", ["whole", "bytes", "seed-1", "seed-2"])
@pytest.mark.parametrize("name", CAPTURES)
def test_a_capture_gives_the_same_sample_however_reads_cut_it(name: str, how: str) -> None:
    api: Api = "chat" if "chat" in name else "completions"
    by_event, _ = stream_replayed(events_of(name), api)
    result, _ = stream_replayed(cut((FIXTURES / name).read_bytes(), how), api)
    assert result.ok, result.error
    assert result.output_tokens == final_usage(name)
    assert sum(result.chunk_tokens) == result.output_tokens
    assert all(tokens >= 1 for tokens in result.chunk_tokens)
    assert result.chunk_tokens == by_event.chunk_tokens
    assert result.prompt_tokens == by_event.prompt_tokens


def test_speculative_chunks_carry_several_tokens() -> None:
    result, _ = stream_replayed(events_of("ngram-completion.sse"))
    assert result.ok, result.error
    assert max(result.chunk_tokens) > 1  # speculative decoding: several tokens in one chunk
    assert len(result.chunk_ns) < (result.output_tokens or 0)


def test_the_role_only_chat_chunk_is_no_token() -> None:
    events = events_of("baseline-chat.sse")
    first = json.loads(events[0][6:])
    assert first["choices"][0]["delta"].get("content", "") == ""  # the capture starts role-only
    whole, _ = stream_replayed(events, "chat")
    rest, _ = stream_replayed(events[1:], "chat")
    assert whole.chunk_tokens == rest.chunk_tokens


@pytest.mark.parametrize(
    ("api", "path"), [("completions", "/v1/completions"), ("chat", "/v1/chat/completions")]
)
def test_the_request_asks_for_a_stream_with_continuous_usage(api: Api, path: str) -> None:
    _, transport = stream_replayed([b"data: [DONE]\n\n"], api)
    [(url, headers, body)] = transport.sent
    assert url == "http://vllm:8000" + path
    assert headers == {"Authorization": "Bearer k"}
    assert body == {
        "prompt": "x",
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }


class Paced:
    """A transport that notes when it hands each piece over, to check the client's stamps."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.handed: list[int] = []

    @asynccontextmanager
    async def stream(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[Response]:
        self.opened = time.perf_counter_ns()
        yield Response(200, self._pieces())

    async def _pieces(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            await asyncio.sleep(0.002)
            self.handed.append(time.perf_counter_ns())
            yield chunk
        self.handed.append(time.perf_counter_ns())

    async def get(self, url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, str]:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        return None


def test_each_chunk_is_stamped_when_its_read_arrives_and_sent_before_the_request() -> None:
    events = events_of("ngram-completion.sse")
    transport = Paced([b"".join(events[i : i + 2]) for i in range(0, len(events), 2)])

    async def job() -> Sample:
        async with Client("http://vllm", transport=transport) as client:
            return await client.stream("completions", {}, sample(), scheduled_ns=7)

    result = asyncio.run(job())
    assert result.ok, result.error
    assert result.scheduled_ns == 7
    assert result.sent_ns <= transport.opened
    # every token chunk carries the time of the read it came in, between that read and the next
    for stamp in result.chunk_ns:
        i = max(k for k, handed in enumerate(transport.handed) if handed <= stamp)
        assert stamp < transport.handed[i + 1]
    assert result.chunk_ns == sorted(result.chunk_ns)
    assert transport.handed[-1] <= (result.done_ns or 0)


@pytest.mark.parametrize(
    ("chunks", "error"),
    [
        (
            events_of("ngram-completion.sse")[:5],
            r"^stream ended without \[DONE\] after 5 token chunks$",
        ),
        (
            [*events_of("ngram-completion.sse")[:5], b'data: {"id": "cmpl-1", "cho'],
            r"^stream ended without \[DONE\] after 5 token chunks \(cut mid-event: "
            r"b'data: \{\"id\": \"cmpl-1\", \"cho'\)$",
        ),
        (
            [b"data: {not json\n\n", b"data: [DONE]\n\n"],
            r"^malformed SSE event \(Invalid JSON: .*\): '\{not json'$",
        ),
        (
            [b"data: [1, 2]\n\n", b"data: [DONE]\n\n"],
            r"^malformed SSE event \(Input should be an object\): '\[1, 2\]'$",
        ),
        (
            [b'data: {"error": {"message": "out of memory"}}\n\n'],
            r"^server error in stream: .*out of memory",
        ),
        ([b"data: [DONE]\n\n"], r"^stream finished without generating a token$"),
    ],
    ids=["no-done", "cut-mid-event", "malformed-sse", "not-an-object", "error-event", "no-tokens"],
)
def test_a_bad_stream_is_recorded_not_raised(chunks: list[bytes], error: str) -> None:
    result, _ = stream_replayed(chunks)
    assert not result.ok
    assert result.error is not None
    assert re.search(error, result.error), result.error
    assert result.done_ns is not None


def test_text_that_is_not_utf8_reads_with_replacement_characters() -> None:
    """The events are validated as bytes; bytes that are not UTF-8 are read as they always were
    (decoded with U+FFFD in their place), not failed as malformed."""
    events = [
        b'data: {"choices": [{"text": "a\xff"}], "usage": {"completion_tokens": 1}}\r\n\r\n',
        b"data: [DONE]\n\n",
    ]
    result, _ = stream_replayed(events)
    assert result.ok, result.error
    assert result.output_hash == hashlib.sha256("a\ufffd".encode()).hexdigest()[:16]
    assert result.chunk_tokens == [1] and result.output_tokens == 1


def _event(**fields: Any) -> bytes:
    return b"data: " + json.dumps({"choices": [{"text": "a"}], **fields}).encode() + b"\n\n"


@pytest.mark.parametrize(
    ("events", "error"),
    [
        ([_event(usage={"completion_tokens": -1})], r"usage\.completion_tokens: .*greater than"),
        ([_event(usage={"completion_tokens": "3"})], r"usage\.completion_tokens: .*valid integer"),
        ([_event(usage={"completion_tokens": True})], r"usage\.completion_tokens: .*valid integer"),
        ([_event(usage={"completion_tokens": 2.5})], r"usage\.completion_tokens: .*valid integer"),
        ([_event(usage={"completion_tokens": 1, "prompt_tokens": -4})], r"usage\.prompt_tokens"),
        (
            [_event(usage={"completion_tokens": 3}), _event(usage={"completion_tokens": 2})],
            r"^usage went backwards: completion_tokens 2 after 3",
        ),
        ([_event(usage="many")], r"usage: Input should be an object"),
        ([b'data: {"choices": {"text": "a"}}\n\n'], r"choices: Input should be a valid array"),
        (
            [b'data: {"choices": [{"delta": "a"}]}\n\n'],
            r"choices\.0\.delta: Input should be an object",
        ),
        ([b'data: {"choices": [{"text": 7}]}\n\n'], r"choices\.0\.text: .*valid string"),
        ([b'data: {"choices": [{"text": NaN}]}\n\n'], r"choices\.0\.text: .*valid string"),
    ],
    ids=[
        "negative",
        "string",
        "bool",
        "float",
        "negative-prompt",
        "falls",
        "usage-not-object",
        "choices-not-list",
        "delta-not-object",
        "text-not-string",
        "text-nan",
    ],
)
def test_an_event_with_impossible_counts_or_shapes_fails_the_sample(
    events: list[bytes], error: str
) -> None:
    result, _ = stream_replayed([*events, b"data: [DONE]\n\n"])
    assert not result.ok and result.error is not None
    assert re.search(error, result.error), result.error
    assert result.output_hash is None


@pytest.mark.parametrize(
    ("models", "version", "error"),
    [
        ('{"object": "list", "data": []}', '{"version": "1"}', r"/v1/models: .*data: List should"),
        ('{"data": [{"id": ""}]}', '{"version": "1"}', r"/v1/models: .*data\.0\.id: String"),
        ('{"data": [{"object": "model"}]}', '{"version": "1"}', r"data\.0\.id: Field required"),
        ('["m"]', '{"version": "1"}', r"/v1/models: .*Input should be"),
        ('{"data": [{"id": "m", "max_model_len": true}]}', '{"version": "1"}', r"max_model_len"),
        ('{"data": [{"id": "m", "max_model_len": -5}]}', '{"version": "1"}', r"max_model_len"),
        ('{"data": [{"id": "m"}]}', '{"version": {"v": 1}}', r"/version: .*version: Input should"),
        ('{"data": [{"id": "m"}]}', '"0.32.0"', r"/version: .*Input should be"),
        ('{"data": [{"id": "m"}]}', '{"version": 32}', r"/version: .*valid string"),
    ],
    ids=[
        "no-models",
        "empty-id",
        "no-id",
        "not-an-object",
        "bool-length",
        "negative-length",
        "version-object",
        "version-bare-string",
        "version-number",
    ],
)
def test_a_server_answer_kbgen_cannot_use_is_a_server_error(
    models: str, version: str, error: str
) -> None:
    pages = {"/v1/models": (200, models), "/version": (200, version)}

    async def run() -> None:
        async with Client("http://vllm", transport=ReplayTransport(pages=pages)) as client:
            await client.served_model()
            await client.engine_version()

    with pytest.raises(ServerError, match=error):
        asyncio.run(run())


def test_the_served_model_and_version_as_vllm_answers_them() -> None:
    pages = {
        "/v1/models": (200, '{"object": "list", "data": [{"id": "m", "max_model_len": 2048}]}'),
        "/version": (200, '{"version": "0.32.0"}'),
    }

    async def run() -> tuple[str, int | None, str | None]:
        async with Client("http://vllm", transport=ReplayTransport(pages=pages)) as client:
            card = await client.served_model()
            return card.id, card.max_model_len, await client.engine_version()

    assert asyncio.run(run()) == ("m", 2048, "0.32.0")


def test_an_http_error_keeps_the_start_of_its_body() -> None:
    body = '{"error": "' + "x" * 400 + '"}'
    result, _ = stream_replayed([body[:7].encode(), body[7:].encode()], status=400)
    assert result.error == f"HTTP 400: {body[:300]}"


@pytest.mark.parametrize(
    ("pages", "job", "outcome"),
    [
        ({"/health": (200, "")}, "healthy", True),
        ({"/health": (503, "")}, "healthy", False),
        ({"/metrics": (200, "# HELP x y\n")}, "metrics_text", "# HELP x y\n"),
        ({"/version": (200, '{"version": "0.32.0"}')}, "version", {"version": "0.32.0"}),
    ],
)
def test_plain_requests(pages: dict[str, tuple[int, str]], job: str, outcome: Any) -> None:
    async def run() -> Any:
        async with Client("http://vllm/v1", transport=ReplayTransport(pages=pages)) as client:
            if job == "version":
                return await client.get_json("/version")
            return await getattr(client, job)()

    assert asyncio.run(run()) == outcome


@pytest.mark.parametrize(
    ("pages", "path", "error"),
    [
        ({}, "/version", r"^http://vllm/version: HTTP 404: Not Found$"),
        ({"/version": (200, "<html>")}, "/version", r"^http://vllm/version: not JSON: '<html>'$"),
        ({"/metrics": (500, "")}, "/metrics", r"^http://vllm/metrics: HTTP 500$"),
    ],
)
def test_plain_request_failures_raise_a_kbgen_error(
    pages: dict[str, tuple[int, str]], path: str, error: str
) -> None:
    async def run() -> None:
        async with Client("http://vllm", transport=ReplayTransport(pages=pages)) as client:
            if path == "/metrics":
                await client.metrics_text()
            else:
                await client.get_json(path)

    with pytest.raises(ServerUnreachable, match=error):
        asyncio.run(run())


# --- faults, against loopback servers ----------------------------------------------------------


async def _with_server(
    handler: Handler, job: Callable[[Client], Awaitable[T]], timeouts: Timeouts | None = None
) -> T:
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


def stream_with(handler: Handler, api: Api = "completions", /, **timeouts: float) -> Sample:
    async def job(client: Client) -> Sample:
        return await client.stream(api, {"prompt": "x"}, sample(), 0)

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


def test_a_capture_streams_through_aiohttp() -> None:
    events = events_of("ngram-completion.sse")
    result = stream_with(replay(events, delay_s=0.001))
    assert result.ok, result.error
    assert result.output_tokens == final_usage("ngram-completion.sse")
    assert sum(result.chunk_tokens) == result.output_tokens
    assert max(result.chunk_tokens) > 1  # speculative decoding: several tokens in one chunk
    assert len(result.chunk_ns) < (result.output_tokens or 0)
    assert result.chunk_ns == sorted(result.chunk_ns)
    assert result.sent_ns <= result.chunk_ns[0] <= (result.done_ns or 0)


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
            replay([*events_of("ngram-completion.sse")[:3], b": keep-alive\n\n"], delay_s=2.0),
            {"stall_s": 0.5},
            r"^stalled: no data for 0.5 s after 1 token chunks$",
        ),
    ],
    ids=["http-500", "dropped", "stalled"],
)
def test_connection_faults_are_recorded_not_raised(
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

    with pytest.raises(ServerUnreachable, match=r"127\.0\.0\.1:9/version: ClientConnectorError"):
        asyncio.run(job())


def text_of_capture(name: str) -> str:
    """The generated text of a capture, read from its events here, apart from the client."""
    text = ""
    for line in (FIXTURES / name).read_text().splitlines():
        if not line.startswith("data: {"):
            continue
        for choice in json.loads(line.removeprefix("data: "))["choices"]:
            text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    return text


@pytest.mark.parametrize("how", ["whole", "bytes", "seed-3"])
@pytest.mark.parametrize("name", CAPTURES)
def test_the_output_hash_is_the_sha256_of_the_generated_text(name: str, how: str) -> None:
    import hashlib

    text = text_of_capture(name)
    assert len(text) > 20  # the capture generated something worth hashing
    api: Api = "chat" if "chat" in name else "completions"
    result, _ = stream_replayed(cut((FIXTURES / name).read_bytes(), how), api)
    assert result.ok, result.error
    assert result.output_hash == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_cut_stream_has_no_output_hash() -> None:
    result, _ = stream_replayed(events_of("baseline-completion.sse")[:-2])  # no [DONE]
    assert not result.ok and result.output_hash is None


# --- usage at the end of the stream only (workload.usage: final) -----------------------------

FINAL = FIXTURES / "final-usage"  # real captures of vLLM streams asked for usage at the end only


def final_replayed(name: str, api: Api) -> tuple[Sample, ReplayTransport]:
    transport = ReplayTransport(events_of_final(name))

    async def job() -> Sample:
        async with Client("http://vllm:8000", transport=transport) as client:
            return await client.stream(api, {"prompt": "x"}, sample(), 0, usage="final")

    return asyncio.run(job()), transport


def events_of_final(name: str) -> list[bytes]:
    body = (FINAL / name).read_bytes()
    return [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]


def test_final_usage_asks_for_usage_at_the_end_only() -> None:
    _, transport = final_replayed("baseline-chat.sse", "chat")
    [(_, _, body)] = transport.sent
    assert body is not None and body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("name", sorted(p.name for p in FINAL.glob("*.sse")))
def test_final_usage_knows_a_chunks_tokens_only_where_the_counts_prove_it(name: str) -> None:
    """No chunk carries a running count: the output's tokens come from the last event, and each
    chunk holds one token only where there are as many token chunks as tokens; otherwise no
    chunk's size is claimed, and there is no per-token ITL (TTFT, TPOT, decode rate remain)."""
    api: Api = "chat" if "chat" in name else "completions"
    events = [json.loads(e[6:]) for e in events_of_final(name) if e.startswith(b"data: {")]
    assert all(e.get("usage") is None for e in events[:-1])  # the capture: usage at the end
    result, _ = final_replayed(name, api)
    assert result.ok, result.error
    assert result.output_tokens == events[-1]["usage"]["completion_tokens"]
    one_each = len(result.chunk_ns) == result.output_tokens
    assert result.chunk_tokens == ([1] * len(result.chunk_ns) if one_each else [])
    figures = result.metrics()
    assert figures["tpot_ms"] > 0 and figures["decode_tok_s"] > 0
    assert len(figures["itl_ms"]) == (len(result.chunk_ns) - 1 if one_each else 0)
    # the captures: the baseline completion's 64 tokens came one a chunk; its chat stream's in
    # 60 chunks with text (some tokens held back with the next), n-gram's several a chunk
    assert one_each == (name == "baseline-completion.sse")
    if not one_each:  # never claimed as one a chunk
        assert figures["itl_ms"] == []


def test_usage_past_any_output_fails_the_request() -> None:
    """A running count past what any max_tokens allows is no count: the request fails, and its
    sample reads back (a bounded chunk_tokens), never a sample that validation then refuses."""
    huge = MAX_TOKENS + 1
    events = [
        {"choices": [{"text": "a"}], "usage": {"completion_tokens": 1, "prompt_tokens": 3}},
        {"choices": [{"text": "b"}], "usage": {"completion_tokens": huge, "prompt_tokens": 3}},
    ]
    body = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
    sample, _ = stream_replayed([body])
    assert sample.error == f"usage past any output: completion_tokens {huge}"
    assert Sample.model_validate_json(sample.model_dump_json()) == sample


@pytest.mark.parametrize(
    ("status", "answer", "match"),
    [
        (200, b'{"success": true}', None),
        (404, b'{"detail": "Not Found"}', "VLLM_SERVER_DEV_MODE=1"),
        (200, b'{"success": false}', "would not empty its prefix cache in 3 tries"),
    ],
)
def test_the_prefix_cache_is_emptied_or_the_run_says_how_to_let_it(
    status: int, answer: bytes, match: str | None
) -> None:
    from kbgen.errors import ServerFailed

    transport = ReplayTransport([answer], status=status)

    async def go() -> None:
        async with Client("http://127.0.0.1:1", transport=transport) as client:
            await client.reset_prefix_cache(tries=3)

    if match is None:
        asyncio.run(go())
        assert [url for url, _, _ in transport.sent] == ["http://127.0.0.1:1/reset_prefix_cache"]
    else:
        with pytest.raises(ServerFailed, match=match):
            asyncio.run(go())


def test_a_request_is_sent_when_it_is_written_not_when_it_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client slow to reach its connection (here 200 ms to open it; under overload, its own
    loop) has not sent the request yet: the send, and so the client's lag, counts from when the
    request was written, before the server read it."""
    arrived: list[int] = []
    events = events_of("ngram-completion.sse")

    async def handler(request: web.Request) -> web.StreamResponse:
        arrived.append(time.perf_counter_ns())
        return await replay(events)(request)

    opening = aiohttp.TCPConnector._create_connection

    async def slow(self: aiohttp.TCPConnector, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.2)
        return await opening(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", slow)

    async def job(client: Client) -> tuple[int, Sample]:
        asked = time.perf_counter_ns()
        due = sample().model_copy(update={"on_schedule": True})
        return asked, await client.stream("completions", {"prompt": "x"}, due, asked)

    asked, result = asyncio.run(_with_server(handler, job, Timeouts()))
    assert result.ok, result.error
    assert asked + 200_000_000 <= result.sent_ns <= arrived[0] <= result.chunk_ns[0]
    assert result.metrics()["lag_ms"] >= 200  # sent open loop: all of it the client's
