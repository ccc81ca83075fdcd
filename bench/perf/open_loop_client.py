#!/usr/bin/env python3
"""Does kbgen's client keep an open-loop schedule? Its lag at each rate and number of open streams.

Usage: .venv/bin/python bench/perf/open_loop_client.py [--rates 50,200,800] [--processes 1,2]
       [--tokens 256] [--prompt-tokens N] [--gap-ms 8] [--seconds 4] [--quick] [--no-vllm]
       [--json FILE]

The source is `fake_vllm.py` on 127.0.0.1 with `--gap-ms`: each stream sends its tokens 16 a
block with a pause after each, so a request of `--tokens` stays open about tokens / 16 x gap ms,
and at a rate R about R x that many are open at once. kbgen sends `--seconds` x R requests at
Poisson times (`run.arrivals.offsets`, as `kbgen bench` draws them), the concurrency cap above
any count in flight (each prompt about `--prompt-tokens` long: a 32k context's body is 128 kB
to write), through the sender a window uses (`client_processes` P: one event loop, or P
client processes), and keeps every sample. Per rate and P: the client's own lag behind the
schedule (`run.samples.schedule_lag_ns`: a slot free, the request not yet sent) at p50 and p99,
the most streams open at once, and the client's CPU per request (psutil; this process and its
client processes). Where vLLM's venv is there, `vllm bench serve` runs the same rate and count
(`--request-rate R --num-prompts M`, Poisson) on the same source: it keeps no schedule to
compare a send with, so beside kbgen's lag it shows the rate it achieved (completed requests
over its duration) against the rate asked, and its CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_overhead import (
    PROMPT,
    Config,
    Meter,
    Source,
    VllmBench,
    _cpu_seconds,
    _vllm_or_why,
    sender_for,
    vllm_argv,
)

from kbgen.bench import senders
from kbgen.run import arrivals
from kbgen.run.samples import Sample, on_schedule, schedule_lag_ns

BURST = 16  # the source's events a block (fake_vllm.py's default)


async def kbgen_run(url: str, model: str, rate: float, count: int, tokens: int, processes: int,
                    meter: Meter, prompt: str = PROMPT) -> dict[str, Any]:  # fmt: skip
    """`count` requests at Poisson times at `rate`, as `kbgen bench`'s window sends them."""
    payload = {"model": model, "prompt": prompt, "max_tokens": tokens, "ignore_eos": True}
    samples: list[Sample] = []

    async def keep(sample: Sample) -> bool:
        samples.append(sample)
        return True

    def job(i: int, due_ns: int | None) -> senders.Job:
        sample = Sample(variant="x", prompt_class="c", prompt_index=i, repeat=0, scheduled_ns=0,
                        sent_ns=0)  # fmt: skip
        return senders.Job("completions", payload, sample, due_ns=due_ns)

    async with contextlib.AsyncExitStack() as stack:
        sender, workers = await sender_for(stack, url, processes)
        await sender.send([job(i, None) for i in range(8)], 8, keep)  # connections warmed
        samples.clear()
        start = time.perf_counter_ns() + 50_000_000  # the first due 50 ms from now
        due = arrivals.offsets(None, rate, count, 0, 0)
        jobs = [job(i, start + round(s * 1e9)) for i, s in enumerate(due)]
        jobs = [replace(j, sample=on_schedule(j.sample)) for j in jobs]
        clients = [psutil.Process(), *workers]
        with meter.counting(clients):
            cpu = sum(_cpu_seconds(p) for p in clients)
            await sender.send(jobs, count, keep)
            cpu = sum(_cpu_seconds(p) for p in clients) - cpu
    bad = [s for s in samples if not s.ok or s.output_tokens != tokens]
    if len(samples) != count or bad:
        raise SystemExit(f"kbgen x{processes} at {rate}/s: {len(samples)} of {count}, {bad[:1]}")
    lags = sorted(schedule_lag_ns(s)[1] / 1e6 for s in samples)
    spans = sorted((s.sent_ns, 1) for s in samples) + sorted((s.done_ns or 0, -1) for s in samples)
    open_now = most = 0
    for _, step in sorted(spans):
        open_now += step
        most = max(most, open_now)
    return {
        "client": f"kbgen x{processes}",
        "lag_p50_ms": statistics.median(lags),
        "lag_p99_ms": lags[min(len(lags) - 1, round(0.99 * (len(lags) - 1)))],
        "most_open": most,
        "cpu_us_per_request": cpu * 1e6 / count,
    }


def vllm_run(vb: VllmBench, url: str, tokenizer: Path, rate: float, count: int, tokens: int,
             folder: Path, prompt_tokens: int | None = None) -> dict[str, Any]:  # fmt: skip
    """`vllm bench serve` at the same rate and count, Poisson (its default burstiness 1)."""
    out = folder / f"vllm-{rate:g}.json"
    argv = vllm_argv(url, tokenizer, Config(c=count, n=tokens, m=count), out)
    if prompt_tokens is not None:  # its random dataset's prompts of that many tokens
        argv[argv.index("--random-input-len") + 1] = str(prompt_tokens)
    cap = argv.index("--max-concurrency")
    argv = [*argv[:cap], *argv[cap + 2 :], "--request-rate", str(rate)]  # no cap: open loop
    cpu_s = vb.bench(argv)["window_cpu_s"]
    result = json.loads(out.read_text())
    return {
        "client": "vllm bench serve",
        "achieved_rps": result["completed"] / result["duration"],
        "failed": result.get("failed", 0),
        "cpu_us_per_request": cpu_s * 1e6 / count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,200,800")
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, help="long prompts: about this many tokens")
    parser.add_argument("--gap-ms", type=float, default=8.0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--json", type=Path)
    a = parser.parse_args()
    rates = [50.0, 200.0] if a.quick else [float(r) for r in a.rates.split(",")]
    processes = [1] if a.quick else [int(p) for p in a.processes.split(",")]
    seconds = 2.0 if a.quick else a.seconds
    vllm = _vllm_or_why(a.no_vllm or a.quick)
    folder = Path(tempfile.mkdtemp(prefix="kbgen-open-loop-"))
    model = str(vllm[1]) if isinstance(vllm, tuple) else "tiny"
    source = Source(model, folder / "source.log", "--gap-ms", str(a.gap_ms))
    meter = Meter(psutil.Process(source.proc.pid), [psutil.Process()])
    stream_s = a.tokens / BURST * a.gap_ms / 1000
    prompt = PROMPT if a.prompt_tokens is None else " the" * a.prompt_tokens  # a word a token
    rows = []
    print(f"streams of {a.tokens} tokens, open about {stream_s * 1000:.0f} ms; "
          f"{seconds:g} s of requests a run")  # fmt: skip
    print(f"{'rate/s':>7} {'client':18} {'lag p50':>8} {'lag p99':>8} {'open':>5} "
          f"{'achieved':>9} {'CPU/req':>9} {'source':>6} {'other':>6}")  # fmt: skip
    try:
        vb = VllmBench(vllm[0], folder / "vllm.log") if isinstance(vllm, tuple) else None
        for rate in rates:
            count = max(8, round(rate * seconds))
            for p in processes:
                row = asyncio.run(kbgen_run(source.url, model, rate, count, a.tokens, p, meter,
                                            prompt))  # fmt: skip
                cores = {"source_cores": meter.source_cores, "other_cores": meter.other_cores}
                rows.append({"rate": rate, "requests": count, **row, **cores})
                print(f"{rate:7g} {row['client']:18} {row['lag_p50_ms']:7.2f}ms "
                      f"{row['lag_p99_ms']:7.2f}ms {row['most_open']:5d} {'':>9} "
                      f"{row['cpu_us_per_request']:7.0f}us {meter.source_cores:6.2f} "
                      f"{meter.other_cores:6.2f}", flush=True)  # fmt: skip
            if vb is not None and isinstance(vllm, tuple):
                row = vllm_run(vb, source.url, vllm[1], rate, count, a.tokens, folder,
                               a.prompt_tokens)  # fmt: skip
                rows.append({"rate": rate, "requests": count, **row})
                print(f"{rate:7g} {row['client']:18} {'':>8} {'':>8} {'':>5} "
                      f"{row['achieved_rps']:7.1f}/s {row['cpu_us_per_request']:7.0f}us",
                      flush=True)  # fmt: skip
        if vb is not None:
            vb.stop()
    finally:
        source.stop()
    if not isinstance(vllm, tuple):
        print(f"vllm bench serve not run: {vllm}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "stream_s": stream_s}, indent=1) + "\n")


if __name__ == "__main__":
    main()
