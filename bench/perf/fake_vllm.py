#!/usr/bin/env python3
"""A fast fake vLLM 0.32 OpenAI server: streams precomputed SSE chunks as fast as the client reads.

Usage (stdlib only, any Python >= 3.11):

    python bench/perf/fake_vllm.py [--port 0] [--token " the"] [--model NAME]

Prints `LISTENING <port>` on stdout once it accepts connections, then serves on 127.0.0.1 until
SIGTERM/SIGINT. Used by `client_overhead.py` as a source that is never the bottleneck.

Endpoints:
- `POST /v1/completions`, `POST /v1/chat/completions` with `"stream": true`: `max_tokens` (N)
  SSE events shaped byte-for-byte like vLLM 0.32.0's chunks with continuous usage stats (see
  tests/fixtures/vllm/baseline-completion.sse): one token per chunk, the text of every chunk is
  the same single token (`--token`, a whole token of the model's tokenizer so a client that
  retokenizes counts N), the last token chunk has `finish_reason: "length"`, then the usage chunk
  (`choices: []`, `system_fingerprint`) and `data: [DONE]`. Chat streams start with vLLM's
  role-only chunk (0 tokens). Usage is always in every chunk (as with `continuous_usage_stats`),
  whatever the request asked, so every client parses the same bytes. Non-streaming requests get
  one JSON body. `prompt_tokens` is the fixed `--prompt-tokens` (the fake does not tokenize).
- `GET /v1/models`, `/health`, `/version`, `/metrics` (a few vLLM-named counters: requests,
  generated tokens, prompt tokens; `process_cpu_seconds_total`) and
  `POST /tokenize` → 404 (vllm bench then skips its prompt re-alignment).

How it stays fast: the events of a stream are precomputed once per (api, N) as HTTP/1.1 chunked
frames (vLLM/uvicorn send `Transfer-Encoding: chunked`, one frame per event) and joined
`--burst` (default 16) frames to a block; a request only substitutes its id in each block. A raw
asyncio Protocol writes one block per write and then yields to the loop, so concurrent streams
interleave; writing pauses above the transport's high-water mark (flow control). The byte stream
is exactly vLLM's; only TCP segmentation differs (one segment per event from a real server).
`--burst 1` writes every event separately, but then the source costs about as much CPU per
event as the client, and stops being a source that is never the bottleneck. Loopback socket
buffers are large, so a source usually finishes writing a response long before the client has
read it, and a saturated client reads many events per read. `--gap-ms G` pauses G ms after each
block: a stream of N tokens then stays open about N / burst x G ms, as a real server's do (the
open-loop client benchmark, `open_loop_client.py`, holds many open at once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time

PLACEHOLDER = b"cmpl-ffffffffffffffff"  # same length as a vLLM id, replaced per request
CHAT_PLACEHOLDER = b"chatcmpl-ffffffffffffffff"
FINGERPRINT = "vllm-0.32.0-51fbbcda"


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class Source:
    """Precomputed response frames, per (api, N)."""

    def __init__(self, model: str, token: str, prompt_tokens: int) -> None:
        self.model = model
        self.token = token
        self.prompt_tokens = prompt_tokens
        self.created = int(time.time())
        self._cache: dict[tuple[str, int, int], list[bytes]] = {}
        self.requests = 0
        self.generated_tokens = 0
        self.prompt_tokens_total = 0

    def blocks(self, api: str, n: int, burst: int) -> list[bytes]:
        """The response's chunked frames, joined `burst` at a time (one write each)."""
        key = (api, n, burst)
        if key not in self._cache:
            frames = self._build(api, n)
            self._cache[key] = [
                b"".join(frames[i : i + burst]) for i in range(0, len(frames), burst)
            ]
            if len(self._cache) > 64:
                self._cache.pop(next(iter(self._cache)))
        return self._cache[key]

    def _usage(self, done: int) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + done,
            "completion_tokens": done,
        }

    def _build(self, api: str, n: int) -> list[bytes]:
        events: list[bytes] = []
        if api == "completions":
            head = {
                "id": PLACEHOLDER.decode(),
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
            }
            for i in range(1, n + 1):
                choice = {
                    "index": 0,
                    "text": self.token,
                    "logprobs": None,
                    "finish_reason": "length" if i == n else None,
                    "stop_reason": None,
                    "prompt_token_ids": None,
                    "token_ids": None,
                }
                events.append(_dumps({**head, "choices": [choice], "usage": self._usage(i)}))
            events.append(
                _dumps(
                    {
                        **head,
                        "choices": [],
                        "usage": self._usage(n),
                        "system_fingerprint": FINGERPRINT,
                    }
                )
            )
        else:
            head = {
                "id": CHAT_PLACEHOLDER.decode(),
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
            }
            usage0 = {**self._usage(0), "completion_tokens_details": None}
            events.append(
                _dumps(
                    {
                        **head,
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": ""},
                                "logprobs": None,
                                "finish_reason": None,
                            }
                        ],
                        "usage": usage0,
                        "prompt_token_ids": None,
                        "prompt_text": None,
                    }
                )
            )
            for i in range(1, n + 1):
                chat_choice: dict[str, object] = {
                    "index": 0,
                    "delta": {"content": self.token},
                    "logprobs": None,
                    "finish_reason": "length" if i == n else None,
                }
                if i == n:
                    chat_choice["stop_reason"] = None
                chat_choice["token_ids"] = None
                usage = {**self._usage(i), "completion_tokens_details": None}
                events.append(_dumps({**head, "choices": [chat_choice], "usage": usage}))
            events.append(
                _dumps(
                    {
                        **head,
                        "choices": [],
                        "usage": self._usage(n),
                        "system_fingerprint": FINGERPRINT,
                    }
                )
            )
        frames = [_frame(b"data: " + e + b"\n\n") for e in events]
        frames.append(_frame(b"data: [DONE]\n\n"))
        frames.append(b"0\r\n\r\n")
        return frames

    def full_response(self, api: str, n: int) -> bytes:
        """Body of a non-streaming request."""
        if api == "completions":
            obj = {
                "id": PLACEHOLDER.decode(),
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "text": self.token * n,
                        "logprobs": None,
                        "finish_reason": "length",
                        "stop_reason": None,
                    }
                ],
                "usage": self._usage(n),
            }
        else:
            obj = {
                "id": CHAT_PLACEHOLDER.decode(),
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.token * n},
                        "logprobs": None,
                        "finish_reason": "length",
                        "stop_reason": None,
                    }
                ],
                "usage": self._usage(n),
            }
        return _dumps(obj)

    def metrics(self) -> bytes:
        label = f'{{engine="0",model_name="{self.model}"}}'
        lines = [
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{label} {float(self.generated_tokens)}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{label} {float(self.prompt_tokens_total)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{engine="0",finished_reason="length",'
            f'model_name="{self.model}"}} {float(self.requests)}',
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
            "# TYPE process_cpu_seconds_total counter",
            f"process_cpu_seconds_total {time.process_time()}",
            "",
        ]
        return "\n".join(lines).encode()


def _simple(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 %s\r\ndate: %s\r\nserver: uvicorn\r\ncontent-length: %d\r\n"
        b"content-type: %s\r\n\r\n%s" % (status.encode(), _date(), len(body), ctype, body)
    )


def _date() -> bytes:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()).encode()


class Connection(asyncio.Protocol):
    source: Source
    burst: int
    gap_s: float = 0.0

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.streaming = False
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = False

    # --- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        self.waiter = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.streaming:
            self._next_request()

    # --- HTTP ---------------------------------------------------------------------------------
    def _next_request(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self._handle(method, path.split("?", 1)[0], body)

    def _send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        if self.buffer and not self.streaming:
            self._next_request()

    def _handle(self, method: str, path: str, body: bytes) -> None:
        src = self.source
        if method == "GET" and path == "/health":
            return self._send(_simple("200 OK", b""))
        if method == "GET" and path == "/version":
            return self._send(_simple("200 OK", b'{"version":"0.32.0"}'))
        if method == "GET" and path == "/v1/models":
            models = {
                "object": "list",
                "data": [
                    {
                        "id": src.model,
                        "object": "model",
                        "created": src.created,
                        "owned_by": "vllm",
                        "root": src.model,
                        "parent": None,
                        "max_model_len": 1 << 20,
                        "permission": [],
                    }
                ],
            }
            return self._send(_simple("200 OK", _dumps(models)))
        if method == "GET" and path == "/metrics":
            return self._send(
                _simple("200 OK", src.metrics(), b"text/plain; version=0.0.4; charset=utf-8")
            )
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            api = "completions" if path == "/v1/completions" else "chat"
            try:
                request = json.loads(body)
                n = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
                stream = bool(request.get("stream"))
            except (ValueError, TypeError, AttributeError) as exc:
                error = _dumps(
                    {"error": {"message": str(exc), "type": "BadRequestError", "code": 400}}
                )
                return self._send(_simple("400 Bad Request", error))
            src.prompt_tokens_total += src.prompt_tokens
            rid = os.urandom(8).hex().encode()
            if not stream:
                src.requests += 1
                src.generated_tokens += n
                data = src.full_response(api, n)
                data = data.replace(PLACEHOLDER, b"cmpl-" + rid).replace(
                    CHAT_PLACEHOLDER, b"chatcmpl-" + rid
                )
                return self._send(_simple("200 OK", data))
            self.streaming = True
            asyncio.get_running_loop().create_task(self._stream(api, n, rid))
            return None
        return self._send(_simple("404 Not Found", b'{"detail":"Not Found"}'))

    async def _stream(self, api: str, n: int, rid: bytes) -> None:
        transport = self.transport
        assert transport is not None
        placeholder, new = (
            (PLACEHOLDER, b"cmpl-" + rid)
            if api == "completions"
            else (CHAT_PLACEHOLDER, b"chatcmpl-" + rid)
        )
        blocks = self.source.blocks(api, n, self.burst)
        await self._write_blocks(transport, blocks, placeholder, new, n)
        self.streaming = False
        if self.buffer and not self.closed:
            self._next_request()

    async def _write_blocks(
        self,
        transport: asyncio.Transport,
        blocks: list[bytes],
        placeholder: bytes,
        new: bytes,
        n: int,
    ) -> None:
        transport.write(
            b"HTTP/1.1 200 OK\r\ndate: %s\r\nserver: uvicorn\r\n"
            b"content-type: text/event-stream; charset=utf-8\r\n"
            b"transfer-encoding: chunked\r\n\r\n" % _date()
        )
        write = transport.write
        loop = asyncio.get_running_loop()
        for block in blocks:
            if self.paused:
                self.waiter = loop.create_future()
                await self.waiter
            if self.closed:
                return
            write(block.replace(placeholder, new))
            await asyncio.sleep(self.gap_s)  # other streams and the loop's I/O run meanwhile
        # counted once the whole stream is written: what a client can have received
        self.source.requests += 1
        self.source.generated_tokens += n


def _finish(stop: asyncio.Future[None]) -> None:
    if not stop.done():
        stop.set_result(None)


async def serve(args: argparse.Namespace) -> None:
    Connection.source = Source(args.model, args.token, args.prompt_tokens)
    Connection.burst = max(1, args.burst)
    Connection.gap_s = max(0.0, args.gap_ms / 1000)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Connection, "127.0.0.1", args.port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(f"LISTENING {port}", flush=True)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _finish, stop)
    async with server:
        await stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    parser.add_argument("--model", default="/work/cache/kbgen-models/kbgen-tiny-llama")
    parser.add_argument("--token", default=" the", help="text of every chunk (one token)")
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument(
        "--burst", type=int, default=16, help="events per write (and per yield to other streams)"
    )
    parser.add_argument(
        "--gap-ms",
        type=float,
        default=0.0,
        help="pause after each block (0: none): streams that stay open, as a real server's do",
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
