#!/usr/bin/env python3
"""How many SSE chunks per second can one kbgen process ingest and timestamp, vs `vllm bench serve`?

What it measures
----------------
The client-side ceiling of kbgen's streaming client (`kbgen.bench.client`), against the
reference tool that ships with vLLM, on the same local source in the same run:

- **Source**: `bench/perf/fake_vllm.py`, a fake vLLM 0.32 OpenAI server in its own process (so it
  can use the other core) on 127.0.0.1, that streams `max_tokens` precomputed SSE chunks per
  request, shaped byte-for-byte like vLLM 0.32's completion chunks with continuous usage stats
  (one token per chunk, then the usage chunk and `data: [DONE]`), as fast as the client reads.
- **kbgen**: M requests, concurrency C (C workers over `asyncio.gather`, as `kbgen bench` does),
  through `Client.stream("completions", ...)`; chunks/s = Σ len(sample.chunk_ns) / wall time
  (first send → last stream end), after C warm-up requests. Every sample must be ok, with N
  token-bearing chunks and `output_tokens == N`.
- **vllm bench serve**: the same N, M, C (`--dataset-name random --random-output-len N
  --num-prompts M --max-concurrency C --ignore-eos --num-warmups C`) through the project's
  wrapper `bench/vllm/vllm_cli.py`. Its rate is every chunk it received ÷ its `duration`, which
  is its `output_throughput` (tok/s) whenever no request failed (checked), since the source sends
  one token per chunk. Checked too: `total_output_tokens` = N × completed, every completed request
  has N chunks (len(itl) + 1), the chunk text is one token of the tokenizer and N of them
  retokenize to N, and the source's own `/metrics` counters agree. vllm bench 0.32 fails some
  requests on this source (JSONDecodeError: it `strip()`s every read, so a read that ends right
  after `data: ` corrupts the event — open PR vllm-project/vllm#51172); those are reported, and
  the chunks they did receive still count. `vllm bench serve` takes ≈ 15–20 s just to import,
  so by default all its runs happen in one resident vLLM-venv process
  (`bench/perf/vllm_bench_driver.py`) that calls vLLM's CLI `main()` with the exact argv of the
  command line (printed); `--vllm-fresh-process` runs the literal command every time instead.
- **Source headroom**: a count-only client (a raw asyncio protocol that counts event ends and
  parses nothing) on the same source and configurations gives the rate the source can deliver
  (several times the clients'), and the source's CPU during each client's run is printed:
  well under one core ⇒ the client is the bottleneck.
- **CPU per chunk**: each client's process CPU inside its measured window ÷ chunks (kbgen:
  `time.process_time`; vllm bench: its process's `time.process_time`, sampled every 10 ms by a
  thread of the driver, cut at its own first request start + `duration`).
  1e6 ÷ µs is the rate one free core would give. This is the figure to trust on a shared
  machine; "other" (CPU of every other process + hypervisor steal during a run) says how shared.
- **Timestamp sanity** (kbgen): median and mean gap between a request's consecutive chunk
  timestamps and the share of gaps that are exactly 0: kbgen stamps a chunk when its read
  arrives, so at saturation, when many events come in one read, gaps collapse to 0 (vllm bench
  stamps each event after parsing the previous ones, so its "ITL" there is its parse time).

Each measurement is repeated (`--repeats`, default 3), the runs of the three clients interleaved;
the tables show the best run, the spread (min–max) and the best CPU per chunk.

How to run
----------
From the repository root, with kbgen's dev venv (≈ 45–60 s on 2 cores, ≈ 15–20 s of which is
vLLM's import):

    KBGEN_VLLM_VENV=/work/cache/vllm-venv KBGEN_VLLM_MODELS=/work/cache/kbgen-models \
        .venv/bin/python bench/perf/client_overhead.py

Options: `--configs C:N:M,...` (default `1:2000:10,8:500:64,32:200:256`), `--repeats 3`,
`--no-vllm`, `--vllm-fresh-process` (+ ≈ 20 s per run), `--profile C:N:M` (cProfile one kbgen
run, print the top functions), `--quiet-wait S` (wait up to S seconds in all for other processes
to go quiet before runs), `--nice N` (run at niceness N), `--json FILE` (every figure),
`--keep-logs`.
Environment: `KBGEN_VLLM_VENV` (default `<repo>/.vllm/venv`), `KBGEN_VLLM_MODELS` (default
`<repo>/.vllm/models`; the tokenizer is `kbgen-tiny-llama` in it). Only 127.0.0.1 is contacted;
logs and vllm bench's result files go to a temporary directory (printed; removed after a
successful run unless `--keep-logs`).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kbgen.bench.client import Client
from kbgen.bench.samples import Sample

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_CONFIGS = "1:2000:10,8:500:64,32:200:256"
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


@dataclass(frozen=True)
class Config:
    c: int
    n: int
    m: int

    @property
    def name(self) -> str:
        return f"C={self.c} N={self.n} M={self.m}"

    @property
    def chunks(self) -> int:
        return self.n * self.m


@dataclass
class Run:
    rate: float  # token-bearing chunks per second
    extra: dict[str, Any] = field(default_factory=dict)


# --- CPU accounting --------------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def _proc_stats() -> dict[int, tuple[int, float]]:
    """pid → (ppid, CPU seconds so far) of every process."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        out[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    return out


def _steal_seconds() -> float:
    with open("/proc/stat") as f:
        fields = f.readline().split()  # cpu user nice system idle iowait irq softirq steal
    return int(fields[8]) / TICK


class CpuMeter:
    """CPU used during a window by our process tree, by the source, and by everything else.

    The machine has 2 cores and may be shared: a measurement is only clean when the "foreign"
    CPU (processes that are not this script, its source or its vLLM driver) stays near 0.
    """

    def __init__(self) -> None:
        self.before: dict[int, tuple[int, float]] = {}
        self.t0 = 0.0

    def start(self) -> None:
        self.before = _proc_stats()
        self.steal0 = _steal_seconds()
        self.t0 = time.perf_counter()

    def stop(self, source_pid: int) -> dict[str, float]:
        wall = time.perf_counter() - self.t0
        after = _proc_stats()
        steal = _steal_seconds() - self.steal0
        me = os.getpid()

        def ours(pid: int) -> bool:
            for _ in range(32):  # walk up the parent chain
                if pid in (me, source_pid):
                    return True
                if pid not in after or pid <= 1:
                    return False
                pid = after[pid][0]
            return False

        foreign = own = source = 0.0
        for pid, (_, cpu) in after.items():
            if pid not in self.before:
                continue  # started inside the window: its share is unknown, ignored
            delta = cpu - self.before[pid][1]
            if pid == source_pid:
                source = delta
            if ours(pid):
                own += delta
            else:
                foreign += delta
        return {
            "foreign_cores": foreign / wall,
            "own_cores": own / wall,
            "source_cores": source / wall,
            "steal_cores": steal / wall,  # taken by the hypervisor: another kind of foreign load
        }


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class CpuSampler:
    """Samples other processes' CPU time every few ms (from a thread of this idle process).

    `time.perf_counter` is CLOCK_MONOTONIC on Linux, shared by all processes, so a window
    stamped by another process (vllm bench's request start times) can be cut out exactly.
    """

    def __init__(self, pids: list[int], interval_s: float = 0.005) -> None:
        self.pids = pids
        self.interval_s = interval_s
        self.samples: list[tuple[float, list[float]]] = []
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cpu = [_cpu_seconds(pid) for pid in self.pids]
            except OSError as exc:
                self.error = exc
                return
            self.samples.append((time.perf_counter(), cpu))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_between(self, pid: int, start: float, end: float) -> float:
        """CPU seconds `pid` used between two perf_counter instants (interpolated)."""
        k = self.pids.index(pid)
        times = [t for t, _ in self.samples]

        def at(t: float) -> float:
            i = bisect.bisect_left(times, t)
            if i == 0 or i == len(times):
                span = f"{times[0]:.3f}–{times[-1]:.3f}" if times else "none"
                raise ValueError(
                    f"instant {t:.3f} outside the sampled interval ({len(times)} samples, {span}, "
                    f"{self.error!r})"
                )
            (t0, c0), (t1, c1) = self.samples[i - 1], self.samples[i]
            return c0[k] + (c1[k] - c0[k]) * (t - t0) / (t1 - t0)

        return at(end) - at(start)


def foreign_now(source_pid: int, window_s: float = 0.3) -> float:
    """Cores used by other processes over a short window, now."""
    meter = CpuMeter()
    meter.start()
    time.sleep(window_s)
    return meter.stop(source_pid)["foreign_cores"]


def wait_quiet(source_pid: int, budget: list[float], limit: float = 0.15) -> None:
    """Wait (from a shared budget of seconds) until other processes use < `limit` cores."""
    while budget[0] > 0:
        t0 = time.perf_counter()
        load = foreign_now(source_pid)
        budget[0] -= time.perf_counter() - t0
        if load < limit:
            return
        time.sleep(min(1.0, max(budget[0], 0)))
        budget[0] -= 1.0


# --- the source ------------------------------------------------------------------------------


class Source:
    def __init__(self, model: str, token: str, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fake_vllm.py"), "--model", model, "--token", token],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("LISTENING "):
            self.stop()
            raise SystemExit(f"fake server did not start: {line!r} (log: {log})")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def counters(self) -> dict[str, float]:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name.split("{")[0]] = float(value)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def source_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after}


# --- count-only client (the source's headroom) ----------------------------------------------


class _Counter(asyncio.Protocol):
    """Sends one streaming request at a time on one connection; counts event ends only."""

    TAIL = b"\n\n\r\n0\r\n\r\n"  # end of the [DONE] frame + the last chunked frame

    def __init__(self, request: bytes, todo: list[int], done: asyncio.Future[None]) -> None:
        self.request = request
        self.todo = todo
        self.done = done
        self.events = 0
        self.tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._next()

    def _next(self) -> None:
        if self.todo[0] <= 0:
            self.transport.close()
            if not self.done.done():
                self.done.set_result(None)
            return
        self.todo[0] -= 1
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.events += data.count(b"\n\n")
        if self.tail.endswith(b"\n") and data.startswith(b"\n"):
            self.events += 1
        self.tail = (self.tail + data)[-16:]
        if self.tail.endswith(self.TAIL):
            self.tail = b""
            self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def count_only_run(port: int, model: str, cfg: Config) -> Run:
    body = json.dumps(
        {"model": model, "prompt": PROMPT, "max_tokens": cfg.n, "stream": True}
    ).encode()
    request = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    loop = asyncio.get_running_loop()
    todo = [cfg.m]
    start = time.perf_counter()
    futures: list[asyncio.Future[None]] = []
    protocols: list[_Counter] = []
    for _ in range(min(cfg.c, cfg.m)):
        fut: asyncio.Future[None] = loop.create_future()
        _, proto = await loop.create_connection(
            partial(_Counter, request, todo, fut), "127.0.0.1", port
        )
        futures.append(fut)
        protocols.append(proto)
    await asyncio.gather(*futures)
    wall = time.perf_counter() - start
    events = sum(p.events for p in protocols)
    chunks = events - 2 * cfg.m  # minus the usage chunk and [DONE] of every request
    if chunks != cfg.chunks:
        raise SystemExit(f"count-only client: {chunks} chunks, expected {cfg.chunks}")
    return Run(chunks / wall, {"wall_s": wall})


# --- kbgen -----------------------------------------------------------------------------------


def _sample(i: int) -> Sample:
    return Sample(
        variant="x", prompt_class="c", prompt_index=i, repeat=0, scheduled_ns=0, sent_ns=0
    )


async def kbgen_run(url: str, model: str, cfg: Config) -> Run:
    payload = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": cfg.n,
        "temperature": 0,
        "ignore_eos": True,
    }
    async with Client(url) as client:
        warm = [_sample(-1 - i) for i in range(cfg.c)]
        await asyncio.gather(
            *(client.stream("completions", payload, s, time.perf_counter_ns()) for s in warm)
        )
        bad = [s.error for s in warm if not s.ok]
        if bad:
            raise SystemExit(f"kbgen warm-up failed: {bad[0]}")
        samples = [_sample(i) for i in range(cfg.m)]
        queue = iter(samples)

        async def worker() -> None:
            for sample in queue:  # a shared iterator: each worker takes the next request
                await client.stream("completions", payload, sample, time.perf_counter_ns())

        cpu = time.process_time()
        start = time.perf_counter_ns()
        await asyncio.gather(*(worker() for _ in range(cfg.c)))
        end = time.perf_counter_ns()
        cpu = time.process_time() - cpu
    wall_s = (end - start) / 1e9
    for s in samples:
        if not s.ok:
            raise SystemExit(f"kbgen sample {s.prompt_index} failed: {s.error}")
        if len(s.chunk_ns) != cfg.n or s.output_tokens != cfg.n or sum(s.chunk_tokens) != cfg.n:
            raise SystemExit(
                f"kbgen sample {s.prompt_index}: {len(s.chunk_ns)} chunks, "
                f"{s.output_tokens} output tokens, expected {cfg.n}"
            )
    chunks = sum(len(s.chunk_ns) for s in samples)
    tokens = sum(s.output_tokens or 0 for s in samples)
    gaps = [b - a for s in samples for a, b in zip(s.chunk_ns, s.chunk_ns[1:], strict=False)]
    # every chunk timestamp must lie inside its request, in order
    for s in samples:
        assert s.done_ns is not None and s.sent_ns <= s.chunk_ns[0] <= s.chunk_ns[-1] <= s.done_ns
    assert min(gaps) >= 0
    cpu_us_per_chunk = cpu * 1e6 / chunks
    return Run(
        chunks / wall_s,
        {
            "wall_s": wall_s,
            "output_tok_s": tokens / wall_s,
            "cpu_share": cpu / wall_s,
            "cpu_us_per_chunk": cpu_us_per_chunk,
            "median_gap_us": statistics.median(gaps) / 1e3,
            "mean_gap_us": statistics.fmean(gaps) / 1e3,
            "zero_gaps": sum(g == 0 for g in gaps) / len(gaps),
        },
    )


def profile_kbgen(url: str, model: str, cfg: Config, top: int = 30) -> str:
    prof = cProfile.Profile()
    prof.enable()
    run = asyncio.run(kbgen_run(url, model, cfg))
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    head = f"kbgen under cProfile, {cfg.name}: {run.rate:,.0f} chunks/s (cProfile slows it)"
    return head + "\n" + out.getvalue()


# --- vllm bench serve ------------------------------------------------------------------------


class VllmBench:
    """`vllm bench serve` through bench/vllm/vllm_cli.py; resident (one import) or fresh."""

    def __init__(self, python: Path, log: Path, fresh: bool) -> None:
        self.python = python
        self.fresh = fresh
        self.log = log.open("w")
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        self.env = env
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [str(python), str(HERE / "vllm_bench_driver.py"), str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            text=True,
            env=env,
        )
        os.close(write_fd)
        self.replies = os.fdopen(read_fd)
        ready = self._reply()
        if not ready.get("ready"):
            raise SystemExit(f"vllm driver failed to start: {ready} (log: {log})")

    def _reply(self) -> dict[str, Any]:
        line = self.replies.readline()
        if not line:
            raise SystemExit(f"vllm driver died (log: {self.log.name})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        answer = self._reply()
        if not answer.get("ok"):
            raise SystemExit(f"vllm driver: {answer} (log: {self.log.name})")
        return answer

    def bench(self, argv: list[str]) -> dict[str, Any]:
        if not self.fresh:
            return self.call({"op": "bench", "argv": argv})
        self.log.flush()
        start = time.perf_counter()
        done = subprocess.run(
            [str(self.python), str(REPO / "bench" / "vllm" / "vllm_cli.py"), *argv],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=self.env,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"vllm bench serve exited {done.returncode} (log: {self.log.name})")
        return {"ok": True, "wall_s": time.perf_counter() - start}

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                self.proc.wait(5)
        self.log.close()


def vllm_argv(url: str, model: str, tokenizer: Path, cfg: Config, out: Path) -> list[str]:
    return [
        "bench", "serve",
        "--backend", "vllm",
        "--base-url", url,
        "--endpoint", "/v1/completions",
        "--model", model,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", "16",
        "--random-output-len", str(cfg.n),
        "--num-prompts", str(cfg.m),
        "--max-concurrency", str(cfg.c),
        "--ignore-eos",
        "--num-warmups", str(cfg.c),
        "--save-result", "--save-detailed",
        "--result-dir", str(out.parent),
        "--result-filename", out.name,
    ]  # fmt: skip


def vllm_run(
    vb: VllmBench, source: Source, argv: list[str], out: Path, cfg: Config, tokenizer: Path
) -> Run:
    """One `vllm bench serve` run; its rate is every chunk it received / its duration.

    That equals its `output_throughput` when no request failed (checked). vllm bench 0.32 fails
    a request when a read boundary falls right after `data: ` (it strip()s every read; open PR
    vllm-project/vllm#51172); the chunks such a request did receive were ingested all the same,
    so they count, and the failures are reported.
    """
    with CpuSampler([source.proc.pid]) as sampler:
        answer = vb.bench(argv)
    result = json.loads(out.read_text())
    # its measured window, in its own perf_counter stamps (the same clock as ours)
    start = min(result["start_times"])
    end = start + result["duration"]
    cpu_s: float | None = answer.get("window_cpu_s")  # sampled inside the driver
    source_cores: float | None = None
    try:
        source_cores = sampler.cpu_between(source.proc.pid, start, end) / result["duration"]
    except ValueError as exc:  # this process was starved of CPU: no source figure for the run
        print(f"  (no source CPU figure for this vllm bench run: {exc})", flush=True)
    failed = result.get("failed", 0)
    problems = []
    if result["completed"] + failed != cfg.m:
        problems.append(f"completed {result['completed']} + failed {failed} != {cfg.m}")
    if result["total_output_tokens"] != cfg.n * result["completed"]:
        problems.append(
            f"total_output_tokens {result['total_output_tokens']} != "
            f"{cfg.n} × {result['completed']} completed"
        )
    received = [
        (len(itl) + 1 if ttft else 0, ok)
        for itl, ttft, ok in zip(
            result["itls"], result["ttfts"], result["output_lens"], strict=True
        )
    ]
    if any(chunks != cfg.n for chunks, ok in received if ok):
        problems.append(f"chunks per completed request {sorted({c for c, ok in received if ok})}")
    if any(ok not in (0, cfg.n) for _, ok in received):
        problems.append(f"output_lens {sorted({ok for _, ok in received})}")
    chunks = sum(c for c, _ in received)
    rate = chunks / result["duration"]
    if not failed and abs(rate / result["output_throughput"] - 1) > 1e-9:
        problems.append(f"recomputed {rate} != output_throughput {result['output_throughput']}")
    retok = vb.call({"op": "count_result_texts", "tokenizer": str(tokenizer), "path": str(out)})
    retok_off = sum(
        1 for n, (_, ok) in zip(retok["counts"], received, strict=True) if ok and n != cfg.n
    )
    if problems:
        raise SystemExit(f"vllm bench serve, {cfg.name}: " + "; ".join(problems))
    return Run(
        rate,
        {
            "output_throughput": result["output_throughput"],
            # its CPU inside the source's last busy period (the measured requests) per chunk
            "cpu_us_per_chunk": cpu_s * 1e6 / chunks if cpu_s is not None else None,
            "source_cores": source_cores,
            "duration_s": result["duration"],
            "failed": failed,
            "retokenized_off": retok_off,  # completed texts whose retokenized length != N
            "median_itl_ms": result.get("median_itl_ms"),
            "invocation_wall_s": answer.get("wall_s"),
            # the source's count of fully written streams: the measured ones, plus C warm-ups;
            # a request that vllm bench failed may still have been written in full (a warm-up
            # can fail too, unreported)
            "source_min": cfg.n * result["completed"],
            "source_max": cfg.n * (cfg.m + cfg.c),
            "source_exact": cfg.n * (result["completed"] + cfg.c) if not failed else None,
        },
    )


# --- main ------------------------------------------------------------------------------------


def _med_range(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def _other(run: Run) -> float:
    """Cores taken by other processes and the hypervisor during a run."""
    return float(run.extra["foreign_cores"] + run.extra["steal_cores"])


def parse_configs(text: str) -> list[Config]:
    out = []
    for part in text.split(","):
        c, n, m = (int(x) for x in part.split(":"))
        out.append(Config(c, n, m))
    return out


def spread(runs: list[Run]) -> str:
    rates = [r.rate for r in runs]
    return f"{min(rates) / 1e3:.1f}–{max(rates) / 1e3:.1f}k"


def best(runs: list[Run]) -> Run:
    return max(runs, key=lambda r: r.rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        help="C:N:M,... (C concurrency, N chunks per request, M requests)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-vllm", action="store_true", help="skip vllm bench serve")
    parser.add_argument(
        "--vllm-fresh-process",
        action="store_true",
        help="run the literal `vllm_cli.py bench serve` command for every run",
    )
    parser.add_argument("--profile", metavar="C:N:M", help="also cProfile one kbgen run")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=0,
        metavar="S",
        help="wait up to S seconds in all for other processes to go quiet "
        "before runs (the machine may be shared)",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=None,
        metavar="N",
        help="run this script, its source and its vLLM driver at niceness N (e.g. -10, needs "
        "root): on a shared machine the other processes then yield the CPU to the measurement",
    )
    parser.add_argument("--token", default=" the", help="text of every chunk (one token)")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the temporary folder of logs and results"
    )
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    configs = parse_configs(args.configs)

    venv = Path(os.environ.get("KBGEN_VLLM_VENV", REPO / ".vllm" / "venv"))
    models = Path(os.environ.get("KBGEN_VLLM_MODELS", REPO / ".vllm" / "models"))
    tokenizer = models / "kbgen-tiny-llama"
    model = str(tokenizer)  # what a real vLLM reports as the model id
    python = venv / "bin" / "python"
    use_vllm = not args.no_vllm
    if use_vllm and not python.exists():
        raise SystemExit(f"no vLLM venv at {venv} (set KBGEN_VLLM_VENV, or pass --no-vllm)")
    if use_vllm and not (tokenizer / "tokenizer.json").exists():
        raise SystemExit(f"no tokenizer at {tokenizer} (set KBGEN_VLLM_MODELS)")

    if args.nice is not None:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # inherited by the source and the driver
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kbgen-client-overhead-"))
    source = Source(model, args.token, tmp / "fake_vllm.log")
    vb: VllmBench | None = None
    results: dict[str, dict[str, list[Run]]] = {
        c.name: {"count": [], "kbgen": [], "vllm": []} for c in configs
    }
    try:
        print(
            f"source: {source.url} (pid {source.proc.pid}), chunk text {args.token!r}; "
            f"{os.cpu_count()} CPUs; logs in {tmp}",
            flush=True,
        )
        if use_vllm:
            t0 = time.perf_counter()
            vb = VllmBench(python, tmp / "vllm_bench.log", args.vllm_fresh_process)
            print(
                f"vLLM driver ready in {time.perf_counter() - t0:.1f} s (pid {vb.proc.pid})",
                flush=True,
            )
            texts = [args.token] + [args.token * c.n for c in configs]
            counts = vb.call({"op": "count_tokens", "tokenizer": str(tokenizer), "texts": texts})[
                "counts"
            ]
            if counts != [1] + [c.n for c in configs]:
                raise SystemExit(f"chunk text {args.token!r} is not one token each: {counts}")
            print(f"tokenizer check: {args.token!r} is 1 token; N× it is N tokens ({counts[1:]})")
            example = vllm_argv(source.url, model, tokenizer, configs[0], tmp / "RESULT.json")
            print(
                "vllm bench serve command (per config):\n  "
                f"{python} {REPO / 'bench/vllm/vllm_cli.py'} {' '.join(example)}",
                flush=True,
            )

        meter = CpuMeter()
        quiet_budget = [float(args.quiet_wait)]
        load = foreign_now(source.proc.pid, 1.0)
        print(
            f"other processes use {load:.2f} cores now"
            + (" (the machine is not quiet: figures will be depressed)" if load > 0.15 else ""),
            flush=True,
        )

        def measured(tool: str, cfg: Config, fn: Any) -> Run:
            """One run of a client, with the source's counters and the CPU meter around it."""
            wait_quiet(source.proc.pid, quiet_budget)
            before = source.counters()
            meter.start()
            run: Run = fn()
            for key, value in meter.stop(source.proc.pid).items():
                run.extra.setdefault(key, value)  # vllm_run measures its own window
            d = source_delta(before, source.counters())
            warmups = 0 if tool == "count" else cfg.c
            sent = d["vllm:generation_tokens_total"]
            low = run.extra.pop("source_min", cfg.chunks + warmups * cfg.n)
            high = run.extra.pop("source_max", low)
            exact = run.extra.pop("source_exact", low)
            if not low <= sent <= high or (exact is not None and sent != exact):
                raise SystemExit(
                    f"the source completed {sent:.0f} tokens of streams for "
                    f"{tool}, {cfg.name}; expected {exact or (low, high)}"
                )
            results[cfg.name][tool].append(run)
            return run

        for rep in range(args.repeats):
            for cfg in configs:
                line = f"  repeat {rep + 1}, {cfg.name}:"
                run = measured(
                    "count", cfg, partial(asyncio.run, count_only_run(source.port, model, cfg))
                )
                line += f" count-only {run.rate:,.0f}"
                run = measured(
                    "kbgen", cfg, partial(asyncio.run, kbgen_run(source.url, model, cfg))
                )
                line += f"  kbgen {run.rate:,.0f} (other {_other(run):.2f} cores)"
                if vb is not None:
                    out = tmp / f"vllm-{cfg.c}-{cfg.n}-{cfg.m}-{rep}.json"
                    argv = vllm_argv(source.url, model, tokenizer, cfg, out)
                    run = measured(
                        "vllm", cfg, partial(vllm_run, vb, source, argv, out, cfg, tokenizer)
                    )
                    failed = run.extra["failed"]
                    line += f"  vllm bench {run.rate:,.0f} (other {_other(run):.2f} cores" + (
                        f", {failed} failed)" if failed else ")"
                    )
                print(line + " chunks/s", flush=True)

        profile_text = None
        if args.profile:
            profile_text = profile_kbgen(source.url, model, parse_configs(args.profile)[0])
    finally:
        if vb is not None:
            vb.stop()
        source.stop()

    # --- report --------------------------------------------------------------------------------
    print()
    print(
        f"SSE chunks/s (wall clock), best of {args.repeats} runs (spread min–max); one token per "
        "chunk, so chunks/s = output tok/s"
    )
    head = (
        f"{'config':<22}{'count-only':>12}{'kbgen':>10}{'spread':>14}"
        f"{'vllm bench':>12}{'spread':>14}{'kbgen/vllm':>12}{'vllm failed':>14}"
    )
    print(head)
    print("-" * len(head))
    summary = []
    for cfg in configs:
        r = results[cfg.name]
        kb, cnt = best(r["kbgen"]), best(r["count"])
        row = f"{cfg.name:<22}{cnt.rate:>12,.0f}{kb.rate:>10,.0f}{spread(r['kbgen']):>14}"
        item: dict[str, Any] = {
            "config": {"c": cfg.c, "n": cfg.n, "m": cfg.m},
            "count_only": [{"rate": x.rate, **x.extra} for x in r["count"]],
            "kbgen": [{"rate": x.rate, **x.extra} for x in r["kbgen"]],
        }
        if r["vllm"]:
            vl = best(r["vllm"])
            fails = sum(x.extra["failed"] for x in r["vllm"])
            row += (
                f"{vl.rate:>12,.0f}{spread(r['vllm']):>14}{kb.rate / vl.rate:>12.2f}"
                f"{fails:>7}/{cfg.m * len(r['vllm'])}"
            )
            item["vllm"] = [{"rate": x.rate, **x.extra} for x in r["vllm"]]
            item["ratio_best"] = kb.rate / vl.rate
        print(row)
        summary.append(item)
    vllm_runs = [x for cfg in configs for x in results[cfg.name]["vllm"]]
    if vllm_runs:
        off = sum(x.extra["retokenized_off"] for x in vllm_runs)
        print(
            "checks passed: every kbgen sample ok with N chunks and N output tokens; vllm bench "
            "total_output_tokens =\nN × completed, N chunks per completed request; source "
            f"counters agree; vllm bench texts retokenizing to ≠ N tokens: {off}"
        )
    if any(x.extra["failed"] for x in vllm_runs):
        print(
            "vllm failed: requests vllm bench marked failed (JSONDecodeError): it strip()s every "
            "read, so a read\n  ending right after 'data: ' corrupts the event (open PR "
            "vllm-project/vllm#51172); the chunks they received still count in its rate."
        )

    print()
    print(
        "CPU per chunk (client process CPU inside the measured window ÷ chunks; min of runs), the "
        "rate one free\ncore would give (1e6 ÷ µs), and the kbgen/vllm ratios of each repeat's "
        "back-to-back pair of runs\n(median [min–max]; a pair shares the machine's conditions): "
        "the figures to trust on a shared machine"
    )
    head = (
        f"{'config':<22}{'kbgen µs':>9}{'→ chunks/s':>11}{'vllm µs':>9}{'→ chunks/s':>11}"
        f"{'CPU ratio':>11}{'paired CPU ratio':>19}{'paired wall ratio':>19}"
    )
    print(head)
    print("-" * len(head))
    for cfg, item in zip(configs, summary, strict=True):
        r = results[cfg.name]
        k_us = min(x.extra["cpu_us_per_chunk"] for x in r["kbgen"])
        row = f"{cfg.name:<22}{k_us:>9.1f}{1e6 / k_us:>11,.0f}"
        pairs = [(k, v) for k, v in zip(r["kbgen"], r["vllm"], strict=False)]
        v_list = [v.extra["cpu_us_per_chunk"] for _, v in pairs if v.extra.get("cpu_us_per_chunk")]
        if v_list:  # not with --vllm-fresh-process
            v_us = min(v_list)
            cpu_ratios = [
                v.extra["cpu_us_per_chunk"] / k.extra["cpu_us_per_chunk"]
                for k, v in pairs
                if v.extra.get("cpu_us_per_chunk")
            ]
            row += (
                f"{v_us:>9.1f}{1e6 / v_us:>11,.0f}{v_us / k_us:>11.2f}{_med_range(cpu_ratios):>19}"
            )
            item["cpu_ratio_best"] = v_us / k_us
            item["paired_cpu_ratios"] = cpu_ratios
        elif pairs:
            row += f"{'':>9}{'':>11}{'':>11}{'':>19}"
        if pairs:
            wall_ratios = [k.rate / v.rate for k, v in pairs]
            row += f"{_med_range(wall_ratios):>19}"
            item["paired_wall_ratios"] = wall_ratios
        print(row)

    print()
    print(
        "Best runs: kbgen's chunk timestamps (gaps between a request's consecutive chunks; "
        "0-gaps = chunks\nthat arrived in one read and share a timestamp); CPU shares of one "
        "core; 'other' = other processes\n+ hypervisor steal during the run (should be ~0)"
    )
    head2 = (
        f"{'config':<22}{'med gap':>9}{'mean gap':>10}{'0-gaps':>8}{'kbgen CPU':>10}"
        f"{'source k/v':>12}{'other k/v':>12}{'vllm med ITL':>14}"
    )
    print(head2)
    print("-" * len(head2))
    worst = 0.0
    for cfg in configs:
        r = results[cfg.name]
        k_x: dict[str, Any] = best(r["kbgen"]).extra
        v_x: dict[str, Any] | None = best(r["vllm"]).extra if r["vllm"] else None
        other_k = k_x["foreign_cores"] + k_x["steal_cores"]
        other_v = v_x["foreign_cores"] + v_x["steal_cores"] if v_x else 0.0
        worst = max(worst, other_k, other_v)
        v_src = v_x.get("source_cores") if v_x else None
        src = f"{k_x['source_cores']:.0%}/" + (f"{v_src:.0%}" if v_src is not None else "-")
        other = f"{other_k:.2f}/" + (f"{other_v:.2f}" if v_x else "-")
        row = (
            f"{cfg.name:<22}{k_x['median_gap_us']:>7.1f}µs{k_x['mean_gap_us']:>8.1f}µs"
            f"{k_x['zero_gaps']:>8.0%}{k_x['cpu_share']:>10.0%}{src:>12}{other:>12}"
        )
        if v_x:
            row += f"{v_x['median_itl_ms'] * 1e3:>12.1f}µs"
        print(row)
    if worst > 0.15:
        print(
            f"WARNING: other processes (or the hypervisor) took up to {worst:.2f} cores during a "
            "best run: wall-clock\nfigures are depressed; trust the CPU-per-chunk table, or "
            "rerun on a quiet machine (--quiet-wait)."
        )
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if profile_text:
        print()
        print(profile_text)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    if not args.keep_logs:  # kept when the run failed (the exception skips this)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
