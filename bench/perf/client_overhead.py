#!/usr/bin/env python3
"""SSE chunks/s kbgen ingests and timestamps, in one process and in several, vs vllm bench serve.

What it measures
----------------
The client-side ceiling of kbgen's streaming client (`kbgen.bench.client`, sent through
`kbgen.bench.senders` as `kbgen bench` sends a window), next to the reference tool that ships
with vLLM, on the same local source in the same run:

- **Source**: `bench/perf/fake_vllm.py`, a fake vLLM 0.32 OpenAI server in its own process on
  127.0.0.1, streaming `max_tokens` precomputed SSE chunks per request, shaped byte-for-byte like
  vLLM's completion chunks with continuous usage stats (one token per chunk), as fast as the
  client reads. Its CPU during each run is printed ("source", cores): well under one core ⇒ the
  client, not the source, is the bottleneck.
- **kbgen xP**: M requests at concurrency C through the sender `kbgen bench` would use with
  `client_processes: P` (P = 1: C coroutines in this event loop; P > 1: C split over P client
  processes, `python -m kbgen.bench.senders`), after C warm-up requests through the same sender,
  and every sample appended to a run folder's samples.jsonl as it comes back, as the driver does
  (`RunFolder.append`: one line, flushed). chunks/s = every token-bearing chunk ÷ wall time
  (first send → last sample handed back). Every sample must be ok, with N chunks, N output tokens,
  its chunk stamps in order inside the request and inside this process's window (the client
  processes' clock is this one's), and the run folder must hold all M.
- **vllm bench serve**: the same N, M, C (`--dataset-name random --random-output-len N
  --num-prompts M --max-concurrency C --ignore-eos --num-warmups C`) through the project's wrapper
  `bench/vllm/vllm_cli.py`, all runs in one resident process (`vllm_bench_driver.py`: its import
  alone takes ≈ 15–20 s) that calls vLLM's CLI `main()` with the argv printed. Its chunks/s =
  every chunk it received ÷ its `duration` (its `output_throughput` when no request failed,
  checked; checked too: N chunks per completed request, `total_output_tokens` = N × completed).
  vllm bench 0.32 fails some requests on this source (JSONDecodeError: it `strip()`s every read,
  so a read that ends right after `data: ` corrupts the event — open PR vllm-project/vllm#51172):
  they are counted, and the chunks they received still count.
- **CPU per chunk**: each client's own CPU time inside its measured window ÷ chunks (psutil, for
  kbgen this process and its client processes together; sampled inside the driver for vllm
  bench). 1e6 ÷ µs is the rate that CPU gives per free core: the figure to trust on a shared
  machine. "other" is the CPU that every process outside this benchmark and the hypervisor
  (steal) took during a run, in cores: near 0 on a quiet machine.

Reading it honestly: vllm bench is one process, so its rate is at most one core's; kbgen xP can
use P cores, and beats it by its rate only where the machine has those cores free. On a small
machine the source, kbgen's processes and everyone else share the cores: then the rates say
what this machine gave (look at "source" and "other"), and the CPU per chunk what a free core
would give each client.

Each measurement is repeated (`--repeats`), the clients' runs interleaved; the table shows the
best run and the range of rates.

How to run
----------
From the repository root with kbgen's dev venv (psutil is a dev dependency):

    .venv/bin/python bench/perf/client_overhead.py [--configs C:N:M,...] [--processes 1,2]
        [--repeats 3] [--quick] [--no-vllm] [--json FILE] [--keep-logs]

`--configs` defaults to `16:500:128,256:200:1024,512:200:2048`; `--quick` is a small run that
checks everything works (the test suite runs it). vllm bench runs when vLLM's venv
(`KBGEN_VLLM_VENV`, default `<repo>/.vllm/venv`) and the tiny model's tokenizer
(`KBGEN_VLLM_MODELS`, default `<repo>/.vllm/models`, model `kbgen-tiny-llama`) are there;
otherwise kbgen is measured alone, and the script says why. Only 127.0.0.1 is contacted; logs and
vllm bench's result files go to a temporary folder (printed; removed after a successful run
unless `--keep-logs`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from kbgen.bench import senders
from kbgen.bench.client import Client, Timeouts
from kbgen.run.folder import RunFolder
from kbgen.run.samples import Sample

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


@dataclass(frozen=True)
class Config:
    c: int  # concurrency
    n: int  # chunks (tokens) per request
    m: int  # requests

    def __str__(self) -> str:
        return f"C={self.c} N={self.n} M={self.m}"


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (steal included; guest is inside user)."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + t.irq + t.softirq + t.steal)


def _cpu_seconds(process: psutil.Process) -> float:
    t = process.cpu_times()
    return float(t.user + t.system)


class Meter:
    """CPU cores taken during a run by the source, and by everything outside this benchmark."""

    def __init__(self, source: psutil.Process, ours: list[psutil.Process]) -> None:
        self.source, self.ours = source, [source, *ours]
        self.source_cores = self.other_cores = 0.0

    def _now(self, ours: list[psutil.Process]) -> tuple[float, float, float, float]:
        mine = sum(_cpu_seconds(p) for p in ours)
        return time.perf_counter(), _busy_seconds(), mine, _cpu_seconds(self.source)

    @contextlib.contextmanager
    def counting(self, clients: list[psutil.Process]) -> Iterator[Meter]:
        """Measures the block; `clients`' CPU is ours too (kbgen's client processes)."""
        ours = [*self.ours, *(p for p in clients if p not in self.ours)]
        begin = self._now(ours)
        yield self
        wall, busy, mine, source = (b - a for a, b in zip(begin, self._now(ours), strict=True))
        self.source_cores = source / wall
        self.other_cores = max(busy - mine, 0.0) / wall


class Source:
    """fake_vllm.py in a process of its own."""

    def __init__(self, model: str, log: Path, *options: str) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fake_vllm.py"), "--model", model, *options],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("LISTENING "):
            self.stop()
            raise SystemExit(f"fake server did not start: {line!r} (log: {log})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)
        self.log.close()


# --- kbgen ---------------------------------------------------------------------------------


def _sample(i: int, repeat: int = 0) -> Sample:
    return Sample(
        variant="x", prompt_class="c", prompt_index=i, repeat=repeat, scheduled_ns=0, sent_ns=0
    )


async def sender_for(
    stack: contextlib.AsyncExitStack, url: str, processes: int
) -> tuple[senders.Sender, list[psutil.Process]]:
    """The sender a window of `processes` client processes sends through (`kbgen bench`'s), and
    those processes (none for one: this one)."""
    client = await stack.enter_async_context(Client(url))
    if processes == 1:
        return senders.InProcess(client), []
    pool = await stack.enter_async_context(senders.Processes(url, Timeouts(), processes))
    return pool, [psutil.Process(w.process.pid) for w in pool.workers]


async def kbgen_run(
    url: str, model: str, cfg: Config, processes: int, folder: Path, meter: Meter
) -> dict[str, float]:
    """What `kbgen bench` does in a window (`driver._Run.measure`): the requests through a
    sender of `processes` processes, every sample appended to a run folder's samples.jsonl as
    it finishes; rates and CPU (this process and its client processes) inside the window."""
    payload = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": cfg.n,
        "temperature": 0,
        "ignore_eos": True,
    }
    run_folder = RunFolder(folder)
    samples: list[Sample] = []

    async def keep(sample: Sample) -> bool:
        samples.append(sample)
        return True

    async def append(sample: Sample) -> bool:
        run_folder.append(sample)
        samples.append(sample)
        return True

    async with contextlib.AsyncExitStack() as stack:
        sender, workers = await sender_for(stack, url, processes)
        warm = [senders.Job("completions", payload, _sample(i, -1)) for i in range(cfg.c)]
        await sender.send(warm, cfg.c, keep)
        jobs = [senders.Job("completions", payload, _sample(i)) for i in range(cfg.m)]
        me = psutil.Process()
        clients = [me, *workers]
        with meter.counting(clients):
            cpu = sum(_cpu_seconds(p) for p in clients)
            start = time.perf_counter_ns()
            await sender.send(jobs, cfg.c, append)
            wall_s = (time.perf_counter_ns() - start) / 1e9
            cpu = sum(_cpu_seconds(p) for p in clients) - cpu
    run_folder.close()
    written = RunFolder(folder).samples()
    if len(written) != cfg.m or sorted(s.prompt_index for s in written) != list(range(cfg.m)):
        raise SystemExit(f"kbgen x{processes}: {len(written)} samples written, {cfg.m} sent")
    for s in samples:
        chunks = s.chunk_ns
        if not (
            s.ok
            and len(chunks) == s.output_tokens == sum(s.chunk_tokens) == cfg.n
            and s.sent_ns <= chunks[0]
            and chunks == sorted(chunks)
            and chunks[-1] <= (s.done_ns or 0)
            and (s.repeat < 0 or (start <= s.sent_ns and (s.done_ns or 0) <= start + wall_s * 1e9))
        ):
            raise SystemExit(
                f"kbgen x{processes} sample {s.prompt_index}: {s.error or ''} {len(chunks)} "
                f"chunks, {s.output_tokens} output tokens, expected {cfg.n} in order, inside "
                "the window"
            )
    total = cfg.n * cfg.m
    return {"rate": total / wall_s, "cpu_us_per_chunk": cpu * 1e6 / total}


# --- vllm bench serve ------------------------------------------------------------------------


class VllmBench:
    """vllm_bench_driver.py in vLLM's venv: one import, then one `vllm bench serve` per call."""

    def __init__(self, python: Path, log: Path) -> None:
        self.log = log.open("w")
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [str(python), str(HERE / "vllm_bench_driver.py"), str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            text=True,
            env={**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"},
        )
        os.close(write_fd)
        self.replies = os.fdopen(read_fd)
        self._reply()  # ready

    def _reply(self) -> dict[str, Any]:
        line = self.replies.readline()
        answer: dict[str, Any] = json.loads(line) if line else {"error": "the driver died"}
        if not answer.get("ok"):
            self.log.flush()  # its last lines say why, on a machine whose files go with it
            tail = Path(self.log.name).read_text(errors="replace").splitlines()[-20:]
            raise SystemExit(
                "\n".join([f"vllm bench driver: {answer} (log: {self.log.name})", *tail])
            )
        return answer

    def bench(self, argv: list[str]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        self.log.close()


def vllm_argv(url: str, tokenizer: Path, cfg: Config, out: Path) -> list[str]:
    return [
        "bench", "serve",
        "--backend", "vllm",
        "--base-url", url,
        "--endpoint", "/v1/completions",
        "--model", str(tokenizer),
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


def vllm_run(vb: VllmBench, argv: list[str], out: Path, cfg: Config) -> dict[str, float]:
    window_cpu_s = vb.bench(argv)["window_cpu_s"]
    result = json.loads(out.read_text())
    failed = result.get("failed", 0)
    received = [  # chunks per request: the first (TTFT) and one per inter-token gap
        (len(itl) + 1 if ttft else 0, n)
        for itl, ttft, n in zip(result["itls"], result["ttfts"], result["output_lens"], strict=True)
    ]
    chunks = sum(c for c, _ in received)
    rate = chunks / result["duration"]
    problems = [
        text
        for bad, text in [
            (result["completed"] + failed != cfg.m, f"{result['completed']} + {failed} failed"),
            (result["total_output_tokens"] != cfg.n * result["completed"], "output tokens"),
            (any(c != cfg.n for c, n in received if n), "chunks of a completed request"),
            (not failed and abs(rate / result["output_throughput"] - 1) > 1e-9, "throughput"),
        ]
        if bad
    ]
    if problems:
        raise SystemExit(f"vllm bench serve, {cfg}: unexpected {', '.join(problems)} ({out})")
    return {"rate": rate, "cpu_us_per_chunk": window_cpu_s * 1e6 / chunks, "failed": failed}


# --- main ------------------------------------------------------------------------------------


def _vllm_or_why(no_vllm: bool) -> tuple[Path, Path] | str:
    """vLLM's python and the tokenizer, or why vllm bench does not run."""
    if no_vllm:
        return "--no-vllm"
    venv = Path(os.environ.get("KBGEN_VLLM_VENV", REPO / ".vllm" / "venv"))
    models = Path(os.environ.get("KBGEN_VLLM_MODELS", REPO / ".vllm" / "models"))
    tokenizer = models / "kbgen-tiny-llama"
    if not (venv / "bin" / "python").exists():
        return f"no vLLM venv at {venv} (set KBGEN_VLLM_VENV)"
    if not (tokenizer / "tokenizer.json").exists():
        return f"no tokenizer at {tokenizer} (set KBGEN_VLLM_MODELS)"
    return venv / "bin" / "python", tokenizer


Runs = dict[str, dict[str, list[dict[str, float]]]]  # config -> client -> every run's figures


def report(configs: list[Config], runs: Runs) -> None:
    print(
        "\nSSE chunks/s (best run, range); µs of the client's CPU per chunk (best run; kbgen xN: "
        "its processes together)\nand the rate that CPU gives per free core; vs vllm: best "
        "rate and best CPU against vllm bench serve's;\nsource and other: cores taken by the "
        "fake server and by everything else on the machine (worst run)"
    )
    head = ["", "client", "chunks/s", "range", "µs/chunk", "per core", "vs vllm"]
    head += ["CPU vs vllm", "failed", "source", "other"]
    widths = [20, 11, 10, 13, 9, 10, 8, 12, 9, 7, 6]
    rows = [head]
    for cfg in configs:
        vllm = runs[str(cfg)].get("vllm bench", [])
        for name, done in runs[str(cfg)].items():
            if not done:
                continue
            rates = [r["rate"] for r in done]
            us = min(r["cpu_us_per_chunk"] for r in done)
            row = [str(cfg) if name == next(iter(runs[str(cfg)])) else "", name]
            row += [f"{max(rates):,.0f}", f"{min(rates) / 1e3:.1f}–{max(rates) / 1e3:.1f}k"]
            row += [f"{us:.2f}", f"{1e6 / us:,.0f}" if us else "-"]  # psutil counts 10 ms ticks
            if vllm:
                vllm_us = min(r["cpu_us_per_chunk"] for r in vllm)
                row.append(f"{max(rates) / max(r['rate'] for r in vllm):.2f}")
                row.append(f"{vllm_us / us:.2f}" if us else "-")
            else:
                row += ["-", "-"]
            failed = sum(r.get("failed", 0) for r in done)
            row.append(f"{failed:.0f}/{cfg.m * len(done)}")
            row.append(f"{max(r['source_cores'] for r in done):.2f}")
            row.append(f"{max(r['other_cores'] for r in done):.2f}")
            rows.append(row)
    for n, row in enumerate(rows):
        print(
            row[0].ljust(widths[0])
            + "".join(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))
        )
        if n == 0:
            print("-" * sum(widths))


QUICK = {"configs": "4:40:8,64:40:128", "repeats": 1, "processes": "1,2"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--configs",
        default="16:500:128,256:200:1024,512:200:2048",
        help="C:N:M,... (C concurrency, N chunks per request, M requests)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--processes", default="1,2", help="kbgen's client processes, one run of each: 1,2,..."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a small run that checks everything works (make test): {QUICK}",
    )
    parser.add_argument("--no-vllm", action="store_true", help="measure kbgen alone")
    parser.add_argument("--json", type=Path, help="write every run's figures to this file")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    configs = [Config(*(int(x) for x in part.split(":"))) for part in args.configs.split(",")]
    counts = [int(x) for x in args.processes.split(",")]

    vllm = _vllm_or_why(args.no_vllm)
    tokenizer = vllm[1] if isinstance(vllm, tuple) else REPO / ".vllm/models/kbgen-tiny-llama"
    tmp = Path(tempfile.mkdtemp(prefix="kbgen-client-overhead-"))
    source = Source(str(tokenizer), tmp / "fake_vllm.log")  # the model id sets event sizes
    print(f"source {source.url}; {psutil.cpu_count()} CPUs; logs in {tmp}", flush=True)
    vb: VllmBench | None = None
    runs: Runs = {
        str(cfg): {**{f"kbgen x{n}": [] for n in counts}, "vllm bench": []} for cfg in configs
    }
    try:
        if isinstance(vllm, str):
            print(f"vllm bench serve not run: {vllm}", flush=True)
        else:
            started = time.perf_counter()
            vb = VllmBench(vllm[0], tmp / "vllm_bench.log")
            example = vllm_argv(source.url, tokenizer, configs[0], tmp / "RESULT.json")
            print(
                f"vllm bench driver ready in {time.perf_counter() - started:.0f} s; it runs, "
                f"per config:\n  {vllm[0]} bench/vllm/vllm_cli.py {' '.join(example)}",
                flush=True,
            )
        fake = psutil.Process(source.proc.pid)
        ours = [psutil.Process()] + ([psutil.Process(vb.proc.pid)] if vb else [])
        for repeat in range(args.repeats):
            for cfg in configs:
                line = f"  repeat {repeat + 1}, {cfg}:"
                for n in counts:
                    folder = tmp / f"run-{cfg.c}-{cfg.n}-{cfg.m}-x{n}-{repeat}"
                    folder.mkdir()
                    meter = Meter(fake, ours)
                    run = asyncio.run(kbgen_run(source.url, str(tokenizer), cfg, n, folder, meter))
                    run |= {"source_cores": meter.source_cores, "other_cores": meter.other_cores}
                    runs[str(cfg)][f"kbgen x{n}"].append(run)
                    line += f" kbgen x{n} {run['rate']:,.0f},"
                if vb is not None:
                    out = tmp / f"vllm-{cfg.c}-{cfg.n}-{cfg.m}-{repeat}.json"
                    meter = Meter(fake, ours)
                    with meter.counting([]):
                        run = vllm_run(vb, vllm_argv(source.url, tokenizer, cfg, out), out, cfg)
                    run |= {"source_cores": meter.source_cores, "other_cores": meter.other_cores}
                    runs[str(cfg)]["vllm bench"].append(run)
                    line += f" vllm bench {run['rate']:,.0f} ({run['failed']:.0f} failed),"
                print(f"{line[:-1]} chunks/s", flush=True)
    finally:
        if vb is not None:
            vb.stop()
        source.stop()

    report(configs, runs)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    if not args.keep_logs:  # kept when the run failed (the exception skips this)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
