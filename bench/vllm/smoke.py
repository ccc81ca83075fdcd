#!/usr/bin/env python3
"""Smoke-test a running vLLM server and (optionally) save raw captures for test fixtures.

Standard library only; any python3 will do:

    python3 bench/vllm/smoke.py http://127.0.0.1:8011 [--out DIR --tag baseline] [--max-tokens 64]
    python3 bench/vllm/smoke.py http://127.0.0.1:8011 --chat-only "What is the capital of France?"

Checks /health, /version, /v1/models; sends one streaming /v1/completions and one streaming
/v1/chat/completions request (temperature 0, ignore_eos, max_tokens N,
stream_options include_usage + continuous_usage_stats, or include_usage alone with
--final-usage, as `vllm bench serve` asks); scrapes /metrics before and after.
With --out, writes TAG-version.json, TAG-models.json, TAG-metrics-start.txt (before any
request), TAG-metrics-before.txt (after the warmup request),
TAG-metrics-after.txt, TAG-completion.sse (raw body) + TAG-completion.request.json, and
TAG-chat.sse + TAG-chat.request.json. Prints a summary: chunks, tokens, multi-token chunks,
tok/s, and the spec-decode counter deltas when present.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

COMPLETION_PROMPT = (
    "def fibonacci(n):\n    if n < 2:\n        return n\n"
    "    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
    "def fibonacci_memo(n, memo={}):\n"
)
CHAT_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Repeat after me: the quick brown fox jumps over the lazy dog."},
]
STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


def get(base: str, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    with urllib.request.urlopen(base + path, timeout=timeout) as r:
        return r.status, r.read()


def post_stream(
    base: str, path: str, body: dict[str, Any]
) -> tuple[bytes, list[tuple[float, bytes]], float]:
    """POST and read the SSE body; returns (raw body, [(arrival, event)], send time)."""
    req = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    events: list[tuple[float, bytes]] = []
    raw = b""
    buf = b""
    with urllib.request.urlopen(req, timeout=300) as r:
        while True:
            piece = r.read1(65536)
            if not piece:
                break
            now = time.perf_counter()
            raw += piece
            buf += piece
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                events.append((now, ev))
    return raw, events, t0


def summarize(events: list[tuple[float, bytes]], t0: float) -> dict[str, Any]:
    chunks = 0
    token_chunks = []  # (arrival, delta tokens)
    last_completion = 0
    usage = None
    for at, ev in events:
        for line in ev.split(b"\n"):
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                continue
            obj = json.loads(data)
            chunks += 1
            u = obj.get("usage")
            if u:
                usage = u
                n = u.get("completion_tokens", 0)
                if obj.get("choices") and n > last_completion:
                    token_chunks.append((at, n - last_completion))
                last_completion = max(last_completion, n)
    n = usage["completion_tokens"] if usage else 0
    res = {
        "chunks": chunks,
        "token_chunks": len(token_chunks),
        "multi_token_chunks": sum(1 for _, d in token_chunks if d > 1),
        "max_tokens_in_chunk": max((d for _, d in token_chunks), default=0),
        "usage": usage,
    }
    if token_chunks:
        ttft = token_chunks[0][0] - t0
        e2e = token_chunks[-1][0] - t0
        res.update(ttft_s=round(ttft, 4), e2e_s=round(e2e, 4))
        if n > 1 and e2e > ttft:
            res["decode_tok_per_s"] = round((n - 1) / (e2e - ttft), 1)
        res["tok_per_s"] = round(n / e2e, 1)
    return res


def counters(metrics: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^(vllm:[a-z_]+_total)(\{[^}]*\})?\s+(\S+)$", line)
        if m:
            name = m.group(1)
            pos = re.search(r'position="(\d+)"', m.group(2) or "")
            if pos:
                name += f"[{pos.group(1)}]"
            reason = re.search(r'finished_reason="(\w+)"', m.group(2) or "")
            if reason:
                name += f"[{reason.group(1)}]"
            out[name] = out.get(name, 0.0) + float(m.group(3))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("base", help="e.g. http://127.0.0.1:8011")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tag", default="run")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument(
        "--chat-only", metavar="QUESTION", help="only ask this in one chat request (no ignore_eos)"
    )
    ap.add_argument("--warmup", type=int, default=1, help="untimed requests first (default 1)")
    ap.add_argument(
        "--final-usage", action="store_true", help="ask for usage at the end of a stream only"
    )
    a = ap.parse_args()
    base = a.base.rstrip("/")
    options = {"include_usage": True} if a.final_usage else STREAM_OPTIONS

    status, _ = get(base, "/health")
    assert status == 200, status
    version = json.loads(get(base, "/version")[1])
    models = json.loads(get(base, "/v1/models")[1])
    model = models["data"][0]["id"]
    print(
        f"version {version}  model {model}  max_model_len {models['data'][0].get('max_model_len')}"
    )

    if a.chat_only:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": a.chat_only}],
            "max_tokens": a.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": options,
        }
        _raw, events, t0 = post_stream(base, "/v1/chat/completions", body)
        text = ""
        for _, ev in events:
            for line in ev.split(b"\n"):
                if line.startswith(b"data: {"):
                    for c in json.loads(line[6:]).get("choices", []):
                        text += c.get("delta", {}).get("content") or ""
        print(f"answer: {text!r}")
        print(json.dumps(summarize(events, t0)))
        return 0

    comp = {
        "model": model,
        "prompt": COMPLETION_PROMPT,
        "max_tokens": a.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": options,
    }
    chat = {
        "model": model,
        "messages": CHAT_MESSAGES,
        "max_tokens": a.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": options,
    }
    start = get(base, "/metrics")[1].decode()  # as the server came up (spec counters at 0)
    for _ in range(a.warmup):
        post_stream(base, "/v1/completions", comp)

    before = get(base, "/metrics")[1].decode()
    raw_c, ev_c, t_c = post_stream(base, "/v1/completions", comp)
    raw_h, ev_h, t_h = post_stream(base, "/v1/chat/completions", chat)
    time.sleep(0.5)  # let the engine's stats reach the front end
    after = get(base, "/metrics")[1].decode()

    s_c, s_h = summarize(ev_c, t_c), summarize(ev_h, t_h)
    print("completion:", json.dumps(s_c))
    print("chat:      ", json.dumps(s_h))
    c0, c1 = counters(before), counters(after)
    delta = {k: c1[k] - c0.get(k, 0.0) for k in sorted(c1) if c1[k] - c0.get(k, 0.0)}
    print("counter deltas:", json.dumps(delta))
    fams = {ln.split()[2] for ln in after.splitlines() if ln.startswith("# TYPE vllm:")}
    spec = sorted(
        f for f in fams if f.startswith("vllm:spec_decode") and not f.endswith("_created")
    )
    print(f"vllm metric families: {len(fams)}; spec_decode: {spec}")
    d = delta.get("vllm:spec_decode_num_drafts_total")
    if d:
        acc = delta.get("vllm:spec_decode_num_accepted_tokens_total", 0.0)
        dt = delta.get("vllm:spec_decode_num_draft_tokens_total", 0.0)
        print(f"acceptance rate {acc / dt:.3f}  mean acceptance length {1 + acc / d:.2f}")

    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        t = a.tag
        (a.out / f"{t}-version.json").write_text(json.dumps(version) + "\n")
        (a.out / f"{t}-models.json").write_text(json.dumps(models, indent=1) + "\n")
        (a.out / f"{t}-metrics-start.txt").write_text(start)
        (a.out / f"{t}-metrics-before.txt").write_text(before)
        (a.out / f"{t}-metrics-after.txt").write_text(after)
        (a.out / f"{t}-completion.sse").write_bytes(raw_c)
        (a.out / f"{t}-completion.request.json").write_text(json.dumps(comp, indent=1) + "\n")
        (a.out / f"{t}-chat.sse").write_bytes(raw_h)
        (a.out / f"{t}-chat.request.json").write_text(json.dumps(chat, indent=1) + "\n")
        print(f"captures written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
