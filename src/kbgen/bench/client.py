"""HTTP to an OpenAI-compatible LLM server (vLLM); the only module that speaks HTTP.

`Client` streams completions and chats, stamping every chunk as it arrives, through a
`Transport` (aiohttp, or `ReplayTransport` in tests); a failed request is a sample with `error`
set, never an exception. Why aiohttp, and more: docs/design.md, "The client".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Any, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # Pydantic needs its TypedDict before Python 3.12

from kbgen import redact
from kbgen.errors import ServerError, ServerFailed, ServerUnreachable
from kbgen.kb.models import UsageMode
from kbgen.kb.numbers import MAX_TOKENS, Count, Int
from kbgen.run.samples import Sample

Api = Literal["completions", "chat"]
# How the server is asked for token counts: on every chunk (exact tokens per chunk), or once at
# the end of the stream, as `vllm bench serve` asks (the least work for the server)
STREAM_OPTIONS: dict[UsageMode, dict[str, bool]] = {
    "continuous": {"include_usage": True, "continuous_usage_stats": True},
    "final": {"include_usage": True},
}
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Timeouts:
    """How long to wait: for a connection, between two reads of a stream, for a whole request."""

    connect_s: float = 10.0
    stall_s: float = 60.0
    request_s: float = 1800.0


# --- what the server answers, as far as kbgen reads it (other keys are ignored) ------------------


class _Answer(BaseModel):
    """A part of a server's answer: what kbgen reads is typed, the rest ignored."""

    model_config = ConfigDict(extra="ignore")


# A stream's events are validated as typed dicts, not models: the same checks (Pydantic's, in
# one pass over the bytes) at half the cost, with no object made per event (see `_read_stream`).


class Usage(TypedDict, total=False):
    """An event's token counts; with continuous usage stats, running totals of the request."""

    prompt_tokens: Count | None
    completion_tokens: Count | None


class Delta(TypedDict, total=False):
    content: str | None
    reasoning_content: str | None


class Choice(TypedDict, total=False):
    text: str | None  # /v1/completions
    delta: Delta | None  # /v1/chat/completions


class Event(TypedDict, total=False):
    """One SSE event of a streamed completion, as far as kbgen reads it (other keys dropped)."""

    choices: list[Choice] | None
    usage: Usage | None
    error: Any


_EVENT = TypeAdapter(Event)


class ModelCard(_Answer):
    id: str = Field(min_length=1, description="The served model's name.")
    max_model_len: Int | None = Field(default=None, ge=1, description="Its context length.")


class Models(_Answer):
    """`/v1/models`: the served models; kbgen measures the first."""

    data: list[ModelCard] = Field(min_length=1)


class Version(_Answer):
    """`/version`: vLLM's `{"version": "0.32.0"}`; a server without one says nothing."""

    version: Annotated[str, Field(min_length=1)] | None = None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


class TransportError(Exception):
    """The connection failed (refused, reset, cut mid-body); the message names the cause."""


@dataclass(frozen=True)
class Response:
    """A streaming response: its status, then its body in the pieces in which it arrives;
    `sent_ns`, when the request was written to its connection (None: the transport cannot
    tell, and the send counts from when it was asked for)."""

    status: int
    chunks: AsyncIterator[bytes]
    sent_ns: int | None = None


class Transport(Protocol):
    """How the client reaches a server. A stall raises TimeoutError, a failed connection
    TransportError (also when raised while the client iterates a response's chunks)."""

    def stream(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> AbstractAsyncContextManager[Response]:
        """POST `body` as JSON; the response while its body streams."""
        ...

    async def get(self, url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, str]:
        """Status and body of a GET."""
        ...

    async def aclose(self) -> None: ...


class AiohttpTransport:
    """The real transport: one aiohttp connection pool; create it inside the event loop."""

    def __init__(self, timeouts: Timeouts = Timeouts(), max_connections: int = 0) -> None:
        # limit=0: no client-side cap on connections (aiohttp's default of 100 would queue
        # requests inside the client and hide it); the benchmark's concurrency is the cap.
        connector = aiohttp.TCPConnector(limit=max_connections, force_close=False)
        written = aiohttp.TraceConfig()  # when a request left: past the connection, the loop
        written.on_request_headers_sent.append(_written)
        written.on_request_chunk_sent.append(_written)
        self._session = aiohttp.ClientSession(
            connector=connector,
            trace_configs=[written],
            read_bufsize=2**20,  # aiohttp's 64 KiB default splits large events
            timeout=aiohttp.ClientTimeout(
                total=timeouts.request_s,
                connect=timeouts.connect_s,
                sock_read=timeouts.stall_s,
            ),
        )

    @asynccontextmanager
    async def stream(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[Response]:
        sent = _Sent()
        try:
            async with self._session.post(
                url, json=body, headers=headers, trace_request_ctx=sent
            ) as response:
                # the chunks are aiohttp's own iterator, unwrapped: nothing between a read
                # and the client's timestamp; its errors are translated here, where they land
                yield Response(response.status, response.content.iter_any(), sent.ns)
        except aiohttp.ClientError as exc:
            if isinstance(exc, TimeoutError):  # a read timeout is a stall, not a failure
                raise
            raise TransportError(_describe(exc)) from exc

    async def get(self, url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, str]:
        try:
            async with self._session.get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                return response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(_describe(exc)) from exc

    async def aclose(self) -> None:
        await self._session.close()


@dataclass
class _Sent:
    ns: int | None = None  # when the request's last bytes were written


async def _written(_: object, context: SimpleNamespace, __: object) -> None:
    """aiohttp's trace of a request's headers or body written: the time, in its `_Sent`."""
    if isinstance(sent := context.trace_request_ctx, _Sent):
        sent.ns = time.perf_counter_ns()


class ReplayTransport:
    """A transport that answers from memory, for tests and micro-benchmarks.

    Every streaming POST gets `status` and a body made of `chunks`, delivered in exactly those
    pieces (cut a recorded `.sse` capture anywhere to mimic how reads split a stream); a GET of a
    path gets `pages[path]`, or 404. What was sent is kept in `sent`: (url, headers, body).
    """

    def __init__(
        self,
        chunks: Iterable[bytes] = (),
        *,
        status: int = 200,
        pages: Mapping[str, tuple[int, str]] | None = None,
    ) -> None:
        self.chunks = list(chunks)
        self.status = status
        self.pages = dict(pages or {})
        self.sent: list[tuple[str, dict[str, str], dict[str, Any] | None]] = []

    @asynccontextmanager
    async def stream(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[Response]:
        self.sent.append((url, dict(headers), body))
        yield Response(self.status, self._replay())

    async def _replay(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def get(self, url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, str]:
        self.sent.append((url, dict(headers), None))
        return self.pages.get(urlsplit(url).path, (404, "Not Found"))

    async def aclose(self) -> None:
        return None


class SSEParser:
    """Incremental Server-Sent Events parser: feed bytes as they come, get `data` payloads.

    Events end at a blank line; lines starting with `:` are comments; a `data:` field may repeat
    (joined with newlines); `\\r\\n` line ends are accepted; an event split across reads is held
    until its end arrives.
    """

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[str]:
        return [payload.decode("utf-8", errors="replace") for payload in self.feed_raw(data)]

    def feed_raw(self, data: bytes) -> list[bytes]:
        """`feed`, the payloads left as bytes (the client validates them as they are)."""
        buffer = self._buffer + data if self._buffer else data
        # normalised on the buffer, not the piece: a \r\n may be split across two reads
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        *events, self._buffer = buffer.split(b"\n\n")
        payloads = []
        for event in events:
            if event[:6] == b"data: " and b"\n" not in event:  # vLLM's every event: one line
                payloads.append(event[6:])
                continue
            lines = [
                line[5:].removeprefix(b" ")
                for line in event.split(b"\n")
                if line.startswith(b"data:")
            ]
            if lines:
                payloads.append(b"\n".join(lines))
        return payloads

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not ended (non-empty when a stream is cut mid-event)."""
        return self._buffer.strip()


class Client:
    """One server, through one transport; use as `async with Client(url) as client:`.

    Without a `transport` it opens an AiohttpTransport with `timeouts` and `max_connections` on
    entering and closes it on leaving; a given transport is closed on leaving too.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeouts: Timeouts = Timeouts(),
        max_connections: int = 0,
        transport: Transport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeouts = timeouts
        self._max_connections = max_connections
        self._given = transport
        self._transport: Transport | None = transport

    async def __aenter__(self) -> Client:
        if self._given is None:  # aiohttp's session must be made inside the running loop
            self._transport = AiohttpTransport(self._timeouts, self._max_connections)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            await self._transport.aclose()

    def _where(self, path: str) -> str:
        """The URL of `path` for a message: a password in the base URL masked."""
        return redact.text(self.base_url + path)

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            raise RuntimeError("use the client inside `async with`")
        return self._transport

    # --- plain requests -------------------------------------------------------------------

    async def get(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        """Status and body of a GET; ServerUnreachable when nothing answers."""
        try:
            return await self.transport.get(self.base_url + path, self._headers, timeout_s)
        except TransportError as exc:
            raise ServerUnreachable(f"{self._where(path)}: {exc}") from exc

    async def healthy(self) -> bool:
        try:
            status, _ = await self.get("/health", timeout_s=5.0)
        except ServerUnreachable:
            return False
        return status == 200

    async def get_json(self, path: str) -> Any:
        status, body = await self.get(path)
        if status != 200:
            raise ServerUnreachable(f"{self._where(path)}: HTTP {status}: {body[:200]}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ServerUnreachable(f"{self._where(path)}: not JSON: {body[:200]!r}") from exc

    async def post_json(self, path: str, body: dict[str, Any]) -> Any:
        """The JSON answer to a POST of `body`; ServerUnreachable when nothing answers, or with
        what the server said when it refuses."""
        try:
            async with self.transport.stream(self.base_url + path, body, self._headers) as answer:
                text = b"".join([chunk async for chunk in answer.chunks]).decode(errors="replace")
        except (TransportError, TimeoutError) as exc:
            raise ServerUnreachable(f"{self._where(path)}: {str(exc) or 'timed out'}") from exc
        if answer.status != 200:
            raise ServerUnreachable(f"{self._where(path)}: HTTP {answer.status}: {text[:200]}")
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ServerUnreachable(f"{self._where(path)}: not JSON: {text[:200]!r}") from exc

    async def reset_prefix_cache(self, tries: int = 50) -> None:
        """Empty vLLM's prefix cache (it refuses while blocks are held: tried again every 0.1 s);
        ServerFailed where the server has no such route or will not."""
        for _ in range(tries):
            try:
                said = await self.post_json("/reset_prefix_cache", {})
            except ServerUnreachable as exc:
                raise ServerFailed(
                    "workload.reset_prefix_cache: the server did not empty its prefix cache "
                    f"({exc}); vLLM serves POST /reset_prefix_cache with VLLM_SERVER_DEV_MODE=1 "
                    "in the server's env"
                ) from exc
            if isinstance(said, dict) and said.get("success"):
                return
            await asyncio.sleep(0.1)
        raise ServerFailed(f"the server would not empty its prefix cache in {tries} tries")

    async def _answer(self, path: str, model: type[M]) -> M:
        data = await self.get_json(path)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise ServerError(
                f"{self.base_url}{path}: an answer kbgen cannot use ({_first_error(exc)}): "
                f"{json.dumps(data)[:200]}"
            ) from exc

    async def served_model(self) -> ModelCard:
        """The model `/v1/models` names first; ServerError when it names none."""
        return (await self._answer("/v1/models", Models)).data[0]

    async def engine_version(self) -> str | None:
        """What `/version` answers (None: the server does not say)."""
        return (await self._answer("/version", Version)).version

    async def metrics_text(self) -> str:
        status, body = await self.get("/metrics", timeout_s=30.0)
        if status != 200:
            raise ServerUnreachable(f"{self._where('/metrics')}: HTTP {status}")
        return body

    # --- streaming ------------------------------------------------------------------------

    async def stream(
        self,
        api: Api,
        payload: dict[str, Any],
        sample: Sample,
        scheduled_ns: int,
        usage: UsageMode = "continuous",
        reply: list[str] | None = None,
    ) -> Sample:
        """Send one streaming request and fill `sample` with its timings, or with its error.

        `usage`: "continuous" asks for token counts on every chunk; "final" only at the end,
        and then a chunk's tokens are known only where every chunk proves to carry one.
        `reply`: where the generated text's pieces go, where it is wanted (a session's)."""
        body = {**payload, "stream": True, "stream_options": STREAM_OPTIONS[usage]}
        url = self.base_url + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
        sample.scheduled_ns = scheduled_ns
        sample.sent_ns = time.perf_counter_ns()
        try:
            async with self.transport.stream(url, body, self._headers) as response:
                sample.sent_ns = response.sent_ns or sample.sent_ns  # written, where known
                if response.status != 200:
                    text = b"".join([chunk async for chunk in response.chunks])
                    sample.error = f"HTTP {response.status}: {text.decode(errors='replace')[:300]}"
                    return sample
                await _read_stream(response.chunks, sample, reply)
        except TimeoutError:
            sample.error = (
                f"stalled: no data for {self._timeouts.stall_s:g} s "
                f"after {len(sample.chunk_ns)} token chunks"
            )
        except TransportError as exc:
            sample.error = f"stream dropped after {len(sample.chunk_ns)} token chunks: {exc}"
        sample.done_ns = time.perf_counter_ns()
        return sample


async def _read_stream(
    chunks: AsyncIterator[bytes], sample: Sample, reply: list[str] | None = None
) -> None:
    # The hot loop of the client: per event a slice, one validation and a few dict reads; the
    # sample's counts are written back once (a model's attribute write costs as much as a parse).
    parser = SSEParser()
    feed, validate, clock = parser.feed_raw, _EVENT.validator.validate_json, time.perf_counter_ns
    text = hashlib.sha256()  # of the generated text, fed as it streams: kept only in `reply`
    stamps, counts = sample.chunk_ns, sample.chunk_tokens
    seen_tokens = 0
    usage_seen = False
    counted = False  # whether a token chunk carried a running count (continuous usage)
    prompt_tokens = None
    done = False
    try:
        async for data in chunks:
            now = clock()
            for raw in feed(data):
                if raw == b"[DONE]":
                    done = True
                    continue
                try:
                    event = validate(raw)
                except ValidationError:
                    event = None  # told apart below, off the hot path
                if event is None:
                    payload = raw.decode("utf-8", errors="replace")
                    try:  # bytes that are not UTF-8 are read with U+FFFD in their place
                        event = _EVENT.validate_json(payload)
                    except ValidationError as exc:
                        sample.error = (
                            f"malformed SSE event ({_first_error(exc)}): {payload[:120]!r}"
                        )
                        return
                if "error" in event:
                    sample.error = f"server error in stream: {str(event['error'])[:200]}"
                    return
                choices = event.get("choices")
                has_text = False
                if choices:
                    for choice in choices:
                        piece = _text_of(choice)
                        if piece:
                            text.update(piece.encode())
                            has_text = True
                            if reply is not None:
                                reply.append(piece)
                usage = event.get("usage")
                completion = usage.get("completion_tokens") if usage else None
                if completion is not None:
                    if completion < seen_tokens:
                        sample.error = (
                            f"usage went backwards: completion_tokens {completion} after "
                            f"{seen_tokens}: {raw.decode(errors='replace')[:120]!r}"
                        )
                        return
                    if completion > MAX_TOKENS:  # no max_tokens allows it: not a count
                        sample.error = f"usage past any output: completion_tokens {completion}"
                        return
                    tokens = completion - seen_tokens
                    seen_tokens = completion
                    usage_seen = True
                    counted = counted or bool(choices)
                    prompt_tokens = usage.get("prompt_tokens") if usage else None
                else:  # no running count: a chunk with text is a token chunk of unknown size
                    tokens = 1 if has_text else 0
                if tokens > 0 and choices:
                    stamps.append(now)
                    counts.append(tokens)
    finally:
        if usage_seen:
            sample.output_tokens = seen_tokens
            sample.prompt_tokens = prompt_tokens
    sample.done_ns = time.perf_counter_ns()
    if not counted:  # usage at the end only: one token per chunk where the counts prove it
        proven = usage_seen and seen_tokens == len(stamps)
        counts[:] = [1] * len(stamps) if proven else []
    elif usage_seen and sum(counts) != seen_tokens:  # a server that counted only some chunks
        counts.clear()
    if not done:
        cut = f" (cut mid-event: {parser.pending[:60]!r})" if parser.pending else ""
        sample.error = f"stream ended without [DONE] after {len(sample.chunk_ns)} token chunks{cut}"
    elif not sample.chunk_ns:
        sample.error = "stream finished without generating a token"
    else:  # only a finished stream's text is the output; a cut one's would match nothing
        sample.output_hash = text.hexdigest()[:16]


def _text_of(choice: Choice) -> str:
    delta = choice.get("delta")
    return (
        choice.get("text")
        or (delta and (delta.get("content") or delta.get("reasoning_content")))
        or ""
    )


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
