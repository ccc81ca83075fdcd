"""HTTP to an OpenAI-compatible LLM server (vLLM); the only module that speaks HTTP.

Streams completions and chat completions and timestamps every chunk with `perf_counter_ns` as it
arrives; fetches `/health`, `/version`, `/v1/models` and the `/metrics` text. aiohttp, because it
is what `vllm bench serve` uses and ingests SSE about 1.5× faster than httpx here (43k vs 27k
chunks/s from a local source): the client must not become the bottleneck it is measuring.

A failed request — an HTTP error, a dropped or stalled stream, a malformed event, an error event
from the server — comes back as a Sample with `error` set, never as an exception and never as a
silently shortened success.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from kbgen.bench.samples import Sample
from kbgen.errors import ServerUnreachable

Api = Literal["completions", "chat"]


@dataclass(frozen=True)
class Timeouts:
    """How long to wait: for a connection, between two reads of a stream, for a whole request."""

    connect_s: float = 10.0
    stall_s: float = 60.0
    request_s: float = 1800.0


class SSEParser:
    """Incremental Server-Sent Events parser: feed bytes as they come, get `data` payloads.

    Events end at a blank line; lines starting with `:` are comments; a `data:` field may repeat
    (joined with newlines); `\\r\\n` line ends are accepted; an event split across reads is held
    until its end arrives.
    """

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[str]:
        # normalise on the buffer, not the piece: a \r\n may be split across two reads
        self._buffer = (self._buffer + data).replace(b"\r\n", b"\n")
        *events, self._buffer = self._buffer.split(b"\n\n")
        payloads = []
        for event in events:
            lines = [
                line[5:].removeprefix(b" ")
                for line in event.split(b"\n")
                if line.startswith(b"data:")
            ]
            if lines:
                payloads.append(b"\n".join(lines).decode("utf-8", errors="replace"))
        return payloads

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not ended (non-empty when a stream is cut mid-event)."""
        return self._buffer.strip()


class Client:
    """One connection pool to one server; use as `async with Client(url) as client:`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeouts: Timeouts = Timeouts(),
        max_connections: int = 0,
    ) -> None:
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeouts = timeouts
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        # limit=0: no client-side cap on connections (aiohttp's default of 100 would queue
        # requests inside the client and hide it); the benchmark's concurrency is the cap.
        connector = aiohttp.TCPConnector(limit=self._max_connections, force_close=False)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            read_bufsize=2**20,  # aiohttp's 64 KiB default splits large events
            timeout=aiohttp.ClientTimeout(
                total=self._timeouts.request_s,
                connect=self._timeouts.connect_s,
                sock_read=self._timeouts.stall_s,
            ),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use the client inside `async with`")
        return self._session

    # --- plain requests -------------------------------------------------------------------

    async def get(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        """Status and body of a GET; ServerUnreachable when nothing answers."""
        try:
            async with self.session.get(
                self.base_url + path, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                return response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ServerUnreachable(f"{self.base_url}{path}: {_describe(exc)}") from exc

    async def healthy(self) -> bool:
        try:
            status, _ = await self.get("/health", timeout_s=5.0)
        except ServerUnreachable:
            return False
        return status == 200

    async def get_json(self, path: str) -> Any:
        status, body = await self.get(path)
        if status != 200:
            raise ServerUnreachable(f"{self.base_url}{path}: HTTP {status}: {body[:200]}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ServerUnreachable(f"{self.base_url}{path}: not JSON: {body[:200]!r}") from exc

    async def metrics_text(self) -> str:
        status, body = await self.get("/metrics", timeout_s=30.0)
        if status != 200:
            raise ServerUnreachable(f"{self.base_url}/metrics: HTTP {status}")
        return body

    # --- streaming ------------------------------------------------------------------------

    async def stream(
        self, api: Api, payload: dict[str, Any], sample: Sample, scheduled_ns: int
    ) -> Sample:
        """Send one streaming request and fill `sample` with its timings, or with its error."""
        body = {
            **payload,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        url = self.base_url + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
        sample.scheduled_ns = scheduled_ns
        sample.sent_ns = time.perf_counter_ns()
        try:
            async with self.session.post(url, json=body) as response:
                if response.status != 200:
                    text = (await response.text())[:300]
                    sample.error = f"HTTP {response.status}: {text}"
                    return sample
                await _read_stream(response, sample)
        except TimeoutError:
            sample.error = (
                f"stalled: no data for {self._timeouts.stall_s:g} s "
                f"after {len(sample.chunk_ns)} token chunks"
            )
        except aiohttp.ClientError as exc:
            sample.error = (
                f"stream dropped after {len(sample.chunk_ns)} token chunks: {_describe(exc)}"
            )
        sample.done_ns = time.perf_counter_ns()
        return sample


async def _read_stream(response: aiohttp.ClientResponse, sample: Sample) -> None:
    parser = SSEParser()
    seen_tokens = 0
    done = False
    async for data in response.content.iter_any():
        now = time.perf_counter_ns()
        for payload in parser.feed(data):
            if payload == "[DONE]":
                done = True
                continue
            try:
                event = json.loads(payload)
            except ValueError:
                sample.error = f"malformed SSE event: {payload[:120]!r}"
                return
            if not isinstance(event, dict):
                sample.error = f"malformed SSE event: {payload[:120]!r}"
                return
            if "error" in event:
                sample.error = f"server error in stream: {str(event['error'])[:200]}"
                return
            usage = event.get("usage") or {}
            choices = event.get("choices") or []
            if usage.get("completion_tokens") is not None:
                tokens = usage["completion_tokens"] - seen_tokens
                seen_tokens = usage["completion_tokens"]
                sample.output_tokens = seen_tokens
                sample.prompt_tokens = usage.get("prompt_tokens")
            else:  # no continuous usage: a chunk with text counts, its size is unknown (0)
                tokens = 1 if any(_text_of(c) for c in choices) else 0
            if tokens > 0 and choices:
                sample.chunk_ns.append(now)
                sample.chunk_tokens.append(tokens)
    sample.done_ns = time.perf_counter_ns()
    if not done:
        cut = f" (cut mid-event: {parser.pending[:60]!r})" if parser.pending else ""
        sample.error = f"stream ended without [DONE] after {len(sample.chunk_ns)} token chunks{cut}"
    elif not sample.chunk_ns:
        sample.error = "stream finished without generating a token"


def _text_of(choice: dict[str, Any]) -> str:
    delta = choice.get("delta") or {}
    return str(choice.get("text") or delta.get("content") or delta.get("reasoning_content") or "")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
