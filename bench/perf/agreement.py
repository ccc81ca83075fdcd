#!/usr/bin/env python3
"""Does kbgen measure what `vllm bench serve` measures? Both clients on one server, interleaved.

What it measures
----------------
For each arm of a kbgen experiment spec (a server start each, kbgen's own launcher), the clients
take turns on the same running server, round after round — round 0 in a seeded order, every
next round in the reverse of the one before (ABBA …), so a drift of the server cancels:

- `kbgen`: kbgen's streaming client as `kbgen bench` runs it (usage on every chunk,
  `continuous_usage_stats`);
- `kbgen-final`: the same client asking for usage at the end of the stream only, as the
  reference does;
- `kbgen-refbody`: the same client sending the reference's request body byte for byte in
  content (the message as a list of text parts, `max_completion_tokens`, no `seed`, usage at
  the end): what is left between it and the reference is the clients' own timing;
- `vllm`: `vllm bench serve --dataset-name custom` on the same prompts in the same order
  (`--disable-shuffle --skip-chat-template`, no warm-up, no initial test request), in one
  resident process of vLLM's (`vllm_bench_driver.py`);
- `guidellm` (pass by pass only, and only with `--guidellm-python`): `guidellm run` once a pass
  (GuideLLM 0.8, its own venv) on the same prompts in the same order (a `json_file` dataset,
  `shuffle: false`, `max_requests` = the prompts, no warm-up), the synchronous profile at
  concurrency 1, the concurrent one with that many streams otherwise; its JSON report's
  per-request start, first-token and last-token times read in kbgen's names (decode rate
  (N − 1) / (last token − first token)). Like the kbgen clients, it is compared with `vllm`.

Every pass sends every prompt of the spec's classes once, at the spec's concurrency, and is
framed by two `/metrics` scrapes, so the server's own view of that pass is known: its mean TPOT
(`vllm:request_time_per_output_token_seconds`) and TTFT histograms. Figures, per arm and class:

- **kbgen's reading vs the reference's**: per-request decode rate ((N − 1) / (E2E − TTFT)), TTFT
  and TPOT, each prompt's geometric mean over rounds, paired by prompt: the geometric mean of
  kbgen/reference and its 95% interval over prompts (`kbgen.record.stats.paired_effect`).
- **kbgen's effect on the server**: the server's mean TPOT in a client's passes over its TPOT in
  the reference's passes of the same round (interval over rounds): what asking for more costs
  the server itself.
- **Each client's reading of the server**: a pass's client-side mean TPOT over the server's.
- **The effect**: each variant against the baseline, per class, as kbgen reads it and as the
  reference does, and their difference in points (paired by prompt).
- **Same text**: how many requests generated the same text as the reference's for the prompt.

How to run
----------
From the repository root, with kbgen's venv (and vLLM's for the reference):

    .venv/bin/python bench/perf/agreement.py SPEC [--rounds 4] [--clients kbgen,kbgen-final,vllm]
        [--interleave pass|request] [--arms A,B] [--vllm-python PATH] [--tokenizer DIR]
        [--guidellm-python PATH] [--out DIR]
    .venv/bin/python bench/perf/agreement.py --report DIR/agreement.json   # the figures again

`--vllm-python` defaults to `$KBGEN_VLLM_VENV/bin/python` (`.vllm/venv`); `--tokenizer` to the
spec's model folder. `--guidellm-python` (default `$KBGEN_GUIDELLM_VENV/bin/python` where that
is set; else GuideLLM is not run) is a Python with GuideLLM installed, e.g. a venv of its own
(`python3.11 -m venv .tools/guidellm-venv && .tools/guidellm-venv/bin/pip install
guidellm==0.8.1`); it runs with `HF_HUB_OFFLINE=1`, its tokenizer the same folder. `--out`
keeps `agreement.json` (every request's figures, every pass's server figures, the analysis) and
the reference's (and GuideLLM's) own result files. With no spec given it runs
`bench/perf/agreement-cpu.yaml`: the tiny model on this CPU's vLLM, two rounds (the quick mode
that `make test` runs). Only the spec's server (127.0.0.1) is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "src"), str(HERE)]

from client_overhead import VllmBench  # noqa: E402  (the resident `vllm bench serve`)

from kbgen.bench import bodies, metrics, senders  # noqa: E402
from kbgen.bench.client import Client  # noqa: E402
from kbgen.bench.launch import launcher_for  # noqa: E402
from kbgen.errors import KbgenError  # noqa: E402
from kbgen.kb.models import UsageMode  # noqa: E402
from kbgen.record.stats import paired_effect  # noqa: E402
from kbgen.run import prompts  # noqa: E402
from kbgen.run import spec as specs  # noqa: E402
from kbgen.run.samples import Sample, request_metrics  # noqa: E402

CLIENTS = ("kbgen", "kbgen-final", "kbgen-refbody", "vllm")  # the default set
GUIDELLM = "guidellm"  # only with --guidellm-python, pass by pass
KNOWN = (*CLIENTS, GUIDELLM)
REFERENCE = "vllm"
GUIDELLM_TIMEOUT_S = 1800  # one pass of `guidellm run`
FIGURES = ("decode_tok_s", "ttft_ms", "tpot_ms")
SERVER = {  # the server's own mean per request, from its histograms' sum / count
    "tpot_ms": "vllm:request_time_per_output_token_seconds",
    "ttft_ms": "vllm:time_to_first_token_seconds",
}
DEFAULT_SPEC = HERE / "agreement-cpu.yaml"
# What agreement means (verdicts), an equivalence rule: a client reads the server's own TPOT
# within ±0.5%, and the whole 95% interval of each of its per-arm figures and of its reading of
# the effect, over the reference's, lies within ±7%. ±7% is what the H200 check resolves: with
# the clients taking turns request by request, the server's own variation from one request to
# the next leaves intervals about ±4% wide over 18 prompts × 3 rounds; a wider interval is no
# evidence of agreement, a narrower tolerance would need more prompts.
READING_TOLERANCE = 0.005
TOLERANCE = 0.07


# --- one pass of one client ------------------------------------------------------------------


def _server_means(before: str, after: str, model: str) -> dict[str, float | None]:
    """The server's mean TPOT and TTFT (ms) over the requests between two scrapes."""
    b, a = metrics.parse(before), metrics.parse(after)

    def delta(name: str) -> float:
        return metrics.delta(b, a, name, model) or 0.0

    out: dict[str, float | None] = {}
    for figure, name in SERVER.items():
        count = delta(name + "_count")
        out[figure] = delta(name + "_sum") / count * 1e3 if count else None
    out["requests"] = delta(SERVER["tpot_ms"] + "_count")
    out["generation_tokens"] = delta("vllm:generation_tokens_total")
    return out


def reference_body(workload: specs.WorkloadSpec, model: str, prompt: str) -> dict[str, Any]:
    """What `vllm bench serve` 0.26–0.32 sends for one prompt, less `stream` and its options."""
    if workload.api == "chat":
        content = [{"type": "text", "text": prompt}]
        body = {
            "model": model,
            "messages": [{"role": "user", "content": content}],
            "max_completion_tokens": workload.max_tokens,
        }
    else:
        body = {"model": model, "prompt": prompt, "max_tokens": workload.max_tokens}
    body["temperature"] = workload.temperature
    return {**body, "ignore_eos": True} if workload.ignore_eos else body


def _framed(server: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The server's figures of a pass, marked whether the scrapes framing it saw exactly its
    successful requests finish (a race with the server's stats would mix two passes)."""
    server["framed"] = server["requests"] == sum(1 for r in rows if r["ok"])
    if not server["framed"]:
        print(f"  (the scrapes saw {server['requests']:.0f} requests finish, not {len(rows)}: "
              "the server's figures of this pass are left out)", flush=True)  # fmt: skip
    return server


def _server_figure(p: dict[str, Any], figure: str) -> float | None:
    """A pass's server-side mean, where its scrapes framed exactly its requests."""
    server = p["server"]
    return server[figure] if server.get("framed", True) else None


async def kbgen_pass(
    client: Client,
    workload: specs.WorkloadSpec,
    model: str,
    todo: list[tuple[str, int, str]],
    name: str,
) -> list[dict[str, Any]]:
    """Every prompt once at the workload's concurrency, as client `name` sends it (through the
    sender `kbgen bench` uses in one process)."""
    usage: UsageMode = "continuous" if name == "kbgen" else "final"
    body_of = reference_body if name == "kbgen-refbody" else bodies.payload
    jobs = [
        senders.Job(
            workload.api,
            body_of(workload, model, text),
            Sample(
                variant="-",
                prompt_class=cls,
                prompt_index=index,
                repeat=0,
                scheduled_ns=0,
                sent_ns=0,
            ),
            usage,
        )
        for cls, index, text in todo
    ]
    done: list[tuple[str, int, Sample]] = []

    async def keep(sample: Sample) -> bool:
        done.append((sample.prompt_class, sample.prompt_index, sample))
        return True

    await senders.InProcess(client).send(jobs, workload.concurrency, keep)
    rows = []
    for cls, index, sample in sorted(done, key=lambda d: (d[0], d[1])):
        figures = request_metrics(sample)
        rows.append(
            {
                "class": cls,
                "index": index,
                "ok": sample.ok,
                "error": sample.error,
                "output_tokens": sample.output_tokens,
                "chunks": len(sample.chunk_ns),
                "hash": sample.output_hash,
                **{f: figures.get(f) for f in FIGURES},
            }
        )
    return rows


def vllm_argv(
    url: str,
    model: str,
    tokenizer: str,
    workload: specs.WorkloadSpec,
    dataset: Path,
    n: int,
    out: Path,
) -> list[str]:
    chat = workload.api == "chat"
    argv = [
        "bench",
        "serve",
        "--backend",
        "openai-chat" if chat else "vllm",
        "--base-url",
        url,
        "--endpoint",
        "/v1/chat/completions" if chat else "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--disable-shuffle",
        "--skip-chat-template",
        "--custom-output-len",
        str(workload.max_tokens),
        "--num-prompts",
        str(n),
        "--max-concurrency",
        str(workload.concurrency),
        "--temperature",
        str(workload.temperature),
        "--num-warmups",
        "0",
        "--ready-check-timeout-sec",
        "0",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(out.parent),
        "--result-filename",
        out.name,
    ]
    return [*argv, "--ignore-eos"] if workload.ignore_eos else argv


def reference_row(
    cls: str, index: int, ttft: float, itls: list[float], n: int, text: str | None, error: str
) -> dict[str, Any]:
    """One request's figures as the reference defines them (its latency: the first chunk's
    time plus every gap after it), in kbgen's names."""
    ok = not error and bool(n) and ttft > 0
    decode = sum(itls)
    return {
        "class": cls,
        "index": index,
        "ok": ok,
        "error": error or None,
        "output_tokens": n,
        "chunks": len(itls) + 1 if ok else 0,
        "hash": hashlib.sha256(text.encode()).hexdigest()[:16] if text else None,
        "decode_tok_s": (n - 1) / decode if ok and n > 1 and decode > 0 else None,
        "ttft_ms": ttft * 1e3 if ok else None,
        "tpot_ms": decode / (n - 1) * 1e3 if ok and n > 1 else None,
    }


def vllm_rows(result: dict[str, Any], todo: list[tuple[str, int, str]]) -> list[dict[str, Any]]:
    """The rows of one `vllm bench serve --save-detailed` result, in the prompts' order."""
    if len(result["ttfts"]) != len(todo):
        raise SystemExit(f"vllm bench serve ran {len(result['ttfts'])} of {len(todo)} prompts")
    errors = result.get("errors") or [""] * len(todo)
    texts = result.get("generated_texts") or [None] * len(todo)
    return [
        reference_row(
            cls,
            index,
            result["ttfts"][i],
            result["itls"][i],
            result["output_lens"][i],
            texts[i],
            errors[i],
        )
        for i, (cls, index, _) in enumerate(todo)
    ]


def guidellm_dataset(workload: specs.WorkloadSpec, todo: list[tuple[str, int, str]]) -> str:
    """The prompts as GuideLLM's `json_file` data reads them (JSON lines; its column mapper
    takes `prompt` as the text and `output_tokens_count` as the tokens to ask for, which makes it
    send `ignore_eos` and the token cap; without `ignore_eos` the cap is the backend's
    `max_tokens`)."""
    extra = {"output_tokens_count": workload.max_tokens} if workload.ignore_eos else {}
    return "".join(json.dumps({"prompt": t, **extra}) + "\n" for _, _, t in todo)


def guidellm_scenario(
    url: str,
    model: str,
    tokenizer: str,
    workload: specs.WorkloadSpec,
    dataset: Path,
    n: int,
    out: Path,
) -> dict[str, Any]:
    """The `guidellm run --config` scenario (GuideLLM 0.8) of one pass: every prompt once, in the
    file's order, at the workload's concurrency, the report as JSON at `out`."""
    chat = workload.api == "chat"
    backend: dict[str, Any] = {
        "kind": "openai_http",
        "target": url,
        "model": model,
        "request_format": "/v1/chat/completions" if chat else "/v1/completions",
        "stream": True,
        "extras": {"body": {"temperature": workload.temperature}},
    }
    if not workload.ignore_eos:
        backend["max_tokens"] = workload.max_tokens
    profile: dict[str, Any] = (
        {"kind": "synchronous"}
        if workload.concurrency == 1
        else {"kind": "concurrent", "streams": workload.concurrency}
    )
    return {
        "spec": {
            "backend": backend,
            "profile": profile,
            "constraints": [{"kind": "max_requests", "count": n}],
            "tokenizer": {"kind": "huggingface_auto", "model": tokenizer},
            "data": [{"kind": "json_file", "path": str(dataset)}],
            "data_loader": {"kind": "pytorch", "shuffle": False},
            "outputs": [{"kind": "json", "path": str(out)}],
        }
    }


def _guidellm_prompt(request: dict[str, Any]) -> str | None:
    """The prompt text a GuideLLM request sent (its `request_args`, JSON text or an object)."""
    args = request.get("request_args")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    body = (args or {}).get("body") or {}
    if isinstance(body.get("prompt"), str):
        return str(body["prompt"])
    messages = body.get("messages") or []
    if not messages:
        return None
    content = messages[-1].get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else None


def guidellm_row(cls: str, index: int, request: dict[str, Any], error: str) -> dict[str, Any]:
    """One GuideLLM request's figures in kbgen's names: TTFT from its request start to its first
    token, decode rate (N - 1) / (last token - first token), TPOT its inverse (GuideLLM's own
    `inter_token_latency_ms`), N its output tokens (the server's usage)."""
    info: dict[str, Any] = request.get("info") or {}
    timings: dict[str, Any] = info.get("timings") or {}
    start, first, last = (
        timings.get(k) for k in ("request_start", "first_token_iteration", "last_token_iteration")
    )
    if start is None or first is None or last is None:
        start = first = last = 0.0  # untimed: never ok
    n = request.get("output_tokens") or 0
    error = info.get("error") or error
    ok = not error and bool(n) and start < first <= last
    decode = last - first if ok else 0.0
    text = request.get("output")
    return {
        "class": cls,
        "index": index,
        "ok": ok,
        "error": error or None,
        "output_tokens": n,
        "chunks": (timings.get("token_iterations") or 0) if ok else 0,
        "hash": hashlib.sha256(text.encode()).hexdigest()[:16] if text else None,
        "decode_tok_s": (n - 1) / decode if ok and n > 1 and decode > 0 else None,
        "ttft_ms": (first - start) * 1e3 if ok else None,
        "tpot_ms": decode / (n - 1) * 1e3 if ok and n > 1 and decode > 0 else None,
    }


def guidellm_rows(report: dict[str, Any], todo: list[tuple[str, int, str]]) -> list[dict[str, Any]]:
    """The rows of one GuideLLM JSON report (its first benchmark), in the prompts' order: each
    prompt matched to a request that sent its text (GuideLLM lists requests by status, in an
    order that need not be the order sent); a prompt it did not send is a failed row."""
    requests = report["benchmarks"][0]["requests"]
    sent: dict[str | None, list[tuple[dict[str, Any], str]]] = {}
    for status in ("successful", "errored", "incomplete"):
        for request in (r for r in requests.get(status) or [] if isinstance(r, dict)):
            error = "" if status == "successful" else status
            sent.setdefault(_guidellm_prompt(request), []).append((request, error))
    rows = []
    for cls, index, text in todo:
        if sent.get(text):
            rows.append(guidellm_row(cls, index, *sent[text].pop(0)))
        else:
            rows.append(guidellm_row(cls, index, {}, "not in GuideLLM's report"))
    return rows


def guidellm_pass(python: Path, scenario: dict[str, Any], path: Path, log: Path) -> dict[str, Any]:
    """One `guidellm run --config` in its own Python (offline: only the spec's server), its
    report read back."""
    path.with_suffix(".scenario.json").write_text(json.dumps(scenario, indent=1))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    argv = [
        str(python),
        "-m",
        "guidellm",
        "run",
        "--config",
        str(path.with_suffix(".scenario.json")),
    ]
    with log.open("ab") as out:
        done = subprocess.run(
            [*argv, "--disable-console"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=GUIDELLM_TIMEOUT_S,
            check=False,
        )
    if done.returncode or not path.exists():
        raise SystemExit(f"guidellm run failed (exit {done.returncode}); see {log}")
    report: dict[str, Any] = json.loads(path.read_text())
    return report


async def vllm_request(
    vb: VllmBench, url: str, model: str, workload: specs.WorkloadSpec, prompt: tuple[str, int, str]
) -> dict[str, Any]:
    """One prompt through the reference's own request function (`ASYNC_REQUEST_FUNCS`)."""
    chat = workload.api == "chat"
    command = {
        "request": "openai-chat" if chat else "vllm",
        "input": {
            "prompt": prompt[2],
            "api_url": url + ("/v1/chat/completions" if chat else "/v1/completions"),
            "prompt_len": 0,
            "output_len": workload.max_tokens,
            "model": model,
            "ignore_eos": workload.ignore_eos,
            "extra_body": {"temperature": workload.temperature},
        },
    }
    out = (await asyncio.to_thread(vb.bench, command))["output"]  # type: ignore[arg-type]
    error = out["error"] if not out["success"] else ""
    return reference_row(
        prompt[0],
        prompt[1],
        out["ttft"],
        out["itl"],
        out["output_tokens"],
        out["generated_text"],
        error or ("" if out["success"] else "failed"),
    )


def client_order(clients: list[str], rounds: int, seed: int) -> list[tuple[int, str]]:
    """Round 0 in a seeded permutation, each next round the reverse of the one before."""
    first = list(clients)
    random.Random(seed).shuffle(first)
    out: list[tuple[int, str]] = []
    for r in range(rounds):
        out += [(r, c) for c in (first if r % 2 == 0 else first[::-1])]
    return out


async def run_arm(
    spec: specs.ExperimentSpec,
    arm: str,
    todo: list[tuple[str, int, str]],
    args: argparse.Namespace,
    vb: VllmBench | None,
    tmp: Path,
) -> dict[str, Any]:
    """One server start: warm-up, then every client's passes in the interleaved order."""
    launcher = launcher_for(spec.server)
    log = tmp / f"{arm}.log"
    started = time.perf_counter()
    launched = await launcher.start(arm, spec.variants[arm], log, lambda s: None)
    print(f"{arm}: server up in {time.perf_counter() - started:.0f} s ({log})", flush=True)
    workload = spec.workload
    passes = []
    guidellm_version = None
    try:
        async with Client(launched.url) as client:
            model = (await client.served_model()).id
            version = await client.engine_version()
            warm = todo[: max(workload.warmup, workload.concurrency)]
            await kbgen_pass(client, workload, model, warm * 2, "kbgen")
            # a kbgen prompt suite too (`class` beside `prompt`), in the order both clients send
            dataset = (args.out or tmp) / "prompts.jsonl"
            dataset.write_text(
                "".join(json.dumps({"class": c, "prompt": t}) + "\n" for c, _, t in todo)
            )
            guidellm_data = dataset.with_name("guidellm-prompts.jsonl")
            guidellm_data.write_text(guidellm_dataset(workload, todo))
            tokenizer = str(args.tokenizer or spec.server.model)  # type: ignore[union-attr]
            if Path(tokenizer).exists():  # GuideLLM runs elsewhere: the folder, absolute
                tokenizer = str(Path(tokenizer).resolve())
            if args.interleave == "request":
                passes = await _by_request(client, launched.url, model, workload, todo, args, vb)
            for round_, name in (
                client_order(args.clients, args.rounds, workload.order_seed)
                if args.interleave == "pass"
                else []
            ):
                before = await client.metrics_text()
                t0 = time.perf_counter()
                if name == REFERENCE:
                    assert vb is not None
                    out = tmp / f"vllm-{arm}-r{round_}.json"
                    argv = vllm_argv(
                        launched.url, model, tokenizer, workload, dataset, len(todo), out
                    )
                    await asyncio.to_thread(vb.bench, argv)
                    result = json.loads(out.read_text())
                    if args.out:
                        (args.out / out.name).write_text(json.dumps(result))
                    rows = vllm_rows(result, todo)
                elif name == GUIDELLM:
                    out = tmp / f"guidellm-{arm}-r{round_}.json"
                    scenario = guidellm_scenario(
                        launched.url, model, tokenizer, workload, guidellm_data, len(todo), out
                    )
                    log = tmp / "guidellm.log"
                    result = await asyncio.to_thread(
                        guidellm_pass, args.guidellm_python, scenario, out, log
                    )
                    guidellm_version = (result.get("metadata") or {}).get("guidellm_version")
                    if args.out:
                        (args.out / out.name).write_text(json.dumps(result))
                    rows = guidellm_rows(result, todo)
                else:
                    rows = await kbgen_pass(client, workload, model, todo, name)
                wall = time.perf_counter() - t0
                server = _framed(_server_means(before, await client.metrics_text(), model), rows)
                passes.append(
                    {
                        "round": round_,
                        "client": name,
                        "wall_s": wall,
                        "server": server,
                        "requests": rows,
                    }
                )
                ok = [r for r in rows if r["ok"]]
                mean = _geomean([r["decode_tok_s"] for r in ok if r["decode_tok_s"]])
                print(
                    f"  {arm} round {round_} {name:<11} {len(ok)}/{len(rows)} ok, "
                    f"decode {mean:7.1f} tok/s per request, server TPOT "
                    f"{server['tpot_ms'] or 0:.3f} ms, {wall:.1f} s",
                    flush=True,
                )
    finally:
        await launcher.stop()
    measured = {"engine_version": version, "model": model, "passes": passes}
    return measured | ({"guidellm_version": guidellm_version} if guidellm_version else {})


async def _by_request(
    client: Client,
    url: str,
    model: str,
    workload: specs.WorkloadSpec,
    todo: list[tuple[str, int, str]],
    args: argparse.Namespace,
    vb: VllmBench | None,
) -> list[dict[str, Any]]:
    """Every prompt through every client in turn (the order reversed from one prompt to the
    next), each request framed by `/metrics` scrapes: the server's own figures per request."""
    first = list(args.clients)
    random.Random(workload.order_seed).shuffle(first)
    passes = []
    for round_ in range(args.rounds):
        for k, prompt in enumerate(todo):
            order = first if (round_ * len(todo) + k) % 2 == 0 else first[::-1]
            for name in order:
                before = await client.metrics_text()
                t0 = time.perf_counter()
                if name == REFERENCE:
                    assert vb is not None
                    rows = [await vllm_request(vb, url, model, workload, prompt)]
                else:
                    rows = await kbgen_pass(client, workload, model, [prompt], name)
                wall = time.perf_counter() - t0
                server = _framed(_server_means(before, await client.metrics_text(), model), rows)
                passes.append(
                    {
                        "round": round_,
                        "slot": [round_, prompt[0], prompt[1]],
                        "client": name,
                        "wall_s": wall,
                        "server": server,
                        "requests": rows,
                    }
                )
        done = [p for p in passes if p["round"] == round_]
        for name in args.clients:
            mine = [r["decode_tok_s"] for p in done if p["client"] == name for r in p["requests"]]
            rate = _geomean([v for v in mine if v])
            print(f"  round {round_} {name:<14} decode {rate:7.1f} tok/s per request", flush=True)
    return passes


# --- analysis (pure: agreement.json in, figures out) ------------------------------------------

ALL = "all"  # every class together
Unit = tuple[str, int]  # a prompt: its class and index


def per_prompt(
    passes: list[dict[str, Any]], client: str, cls: str, figure: str
) -> dict[Unit, float]:
    """Each prompt's geometric mean over the rounds of one client's figure (`cls` ALL: every
    class's prompts)."""
    values: dict[Unit, list[float]] = {}
    for p in passes:
        if p["client"] != client:
            continue
        for r in p["requests"]:
            if (cls in (ALL, r["class"])) and r["ok"] and r[figure]:
                values.setdefault((r["class"], r["index"]), []).append(r[figure])
    return {unit: _geomean(v) for unit, v in values.items()}


def _geomean(values: list[float]) -> float:
    return math.exp(math.fsum(math.log(v) for v in values) / len(values)) if values else math.nan


def _effect(base: dict[Any, float], other: dict[Any, float]) -> dict[str, Any] | None:
    """`other` over `base`, paired by their common keys: geometric mean − 1 and its 95% interval."""
    units = sorted(base.keys() & other.keys())
    if len(units) < 2:
        return None
    e = paired_effect([base[u] for u in units], [other[u] for u in units])
    return {"effect": e.effect, "low": e.ci_low, "high": e.ci_high, "units": len(units)}


def _slot(p: dict[str, Any]) -> tuple[Any, ...]:
    """When a pass ran: its round, or its round and prompt where clients took turns by request."""
    return tuple(p.get("slot") or [p["round"]])


def _client_tpot(p: dict[str, Any]) -> float | None:
    values = [r["tpot_ms"] for r in p["requests"] if r["ok"] and r["tpot_ms"]]
    return math.fsum(values) / len(values) if values else None


def server_effect(
    passes: list[dict[str, Any]], client: str, against: str = REFERENCE
) -> dict[str, Any] | None:
    """The server's own mean TPOT in a client's passes over in `against`'s of the same slot:
    what the client's requests cost the server (against kbgen-final: what asking for usage on
    every chunk costs it)."""
    tpot: dict[str, dict[tuple[Any, ...], float]] = {client: {}, against: {}}
    for p in passes:
        if p["client"] in tpot and (value := _server_figure(p, "tpot_ms")):
            tpot[p["client"]][_slot(p)] = value
    return _effect(tpot[against], tpot[client])


def per_pass(passes: list[dict[str, Any]], client: str, figure: str) -> dict[int, float]:
    """Each round's geometric mean of one client's figure over every request of its pass: the
    unit when clients take turns pass by pass (the server drifts between passes)."""
    out = {}
    for p in passes:
        values = [
            r[figure] for r in p["requests"] if p["client"] == client and r["ok"] and r[figure]
        ]
        if values:
            out[p["round"]] = _geomean(values)
    return out


def reading(passes: list[dict[str, Any]], client: str) -> dict[str, Any] | None:
    """A client's mean TPOT over the server's own for the same requests, pass by pass: how
    exactly the client reads what the server did (0: exactly)."""
    server, seen = {}, {}
    for p in passes:
        value = _server_figure(p, "tpot_ms")
        if p["client"] == client and value and (t := _client_tpot(p)):
            server[_slot(p)], seen[_slot(p)] = value, t
    return _effect(server, seen)


def ttft_over_server(passes: list[dict[str, Any]], client: str) -> float | None:
    """How much later than the server's own TTFT a client sees the first token, in ms: the mean
    over its passes of its mean TTFT less the server's (network, HTTP and the client's own
    work before its stamp and after the first chunk arrives)."""
    gaps = []
    for p in passes:
        values = [r["ttft_ms"] for r in p["requests"] if r["ok"] and r["ttft_ms"]]
        value = _server_figure(p, "ttft_ms")
        if p["client"] == client and values and value:
            gaps.append(math.fsum(values) / len(values) - value)
    return math.fsum(gaps) / len(gaps) if gaps else None


def analyse(data: dict[str, Any]) -> dict[str, Any]:
    """Every figure the module docstring names, from agreement.json's measurements."""
    ours = [c for c in data["clients"] if c != REFERENCE]
    classes = [*data["classes"], ALL]
    by_pass = data.get("interleave", "pass") == "pass"
    out: dict[str, Any] = {
        "figures": {}, "server": {}, "reading": {}, "ttft_over_server": {}, "texts": {},
        "effects": {},
    }  # fmt: skip
    for arm, measured in data["arms"].items():
        passes = measured["passes"]
        for client in ours:
            for cls in classes:
                for figure in FIGURES:
                    ref: dict[int, float] | dict[Unit, float]
                    mine: dict[int, float] | dict[Unit, float]
                    if cls == ALL and by_pass:  # the pass is the unit: the server drifts
                        ref, mine = (
                            per_pass(passes, REFERENCE, figure),
                            per_pass(passes, client, figure),
                        )
                    else:
                        ref = per_prompt(passes, REFERENCE, cls, figure)
                        mine = per_prompt(passes, client, cls, figure)
                    out["figures"][f"{arm}/{client}/{cls}/{figure}"] = _effect(ref, mine)
            out["server"][f"{arm}/{client}"] = server_effect(passes, client)
            reference = {
                (r["class"], r["index"]): r["hash"]
                for p in passes
                if p["client"] == REFERENCE
                for r in p["requests"]
            }
            rows = [r for p in passes if p["client"] == client for r in p["requests"] if r["ok"]]
            same = sum(1 for r in rows if r["hash"] == reference.get((r["class"], r["index"])))
            out["texts"][f"{arm}/{client}"] = [same, len(rows)]
        if {"kbgen", "kbgen-final"} <= set(data["clients"]):  # what usage on every chunk costs
            out["server"][f"{arm}/kbgen-vs-kbgen-final"] = server_effect(
                passes, "kbgen", "kbgen-final"
            )
        for client in data["clients"]:
            out["reading"][f"{arm}/{client}"] = reading(passes, client)
            out["ttft_over_server"][f"{arm}/{client}"] = ttft_over_server(passes, client)
    baseline = data["baseline"]
    for arm in (a for a in data["arms"] if a != baseline):
        for cls in classes:
            ratio = {}
            for client in data["clients"]:
                base = per_prompt(data["arms"][baseline]["passes"], client, cls, "decode_tok_s")
                var = per_prompt(data["arms"][arm]["passes"], client, cls, "decode_tok_s")
                out["effects"][f"{arm}/{cls}/{client}"] = _effect(base, var)
                ratio[client] = {u: var[u] / base[u] for u in base.keys() & var.keys()}
            for client in ours:  # kbgen's reading of the effect over the reference's
                key = f"{arm}/{cls}/{client}-vs-{REFERENCE}"
                out["effects"][key] = _effect(ratio[REFERENCE], ratio[client])
            if {"kbgen", "kbgen-final"} <= set(ratio):  # usage on every chunk over at the end
                key = f"{arm}/{cls}/kbgen-vs-kbgen-final"
                out["effects"][key] = _effect(ratio["kbgen-final"], ratio["kbgen"])
    return out


def _inside(figure: dict[str, Any] | None, tolerance: float) -> bool:
    """Whether a ratio's whole 95% interval lies within ±tolerance of agreement."""
    return (
        figure is not None
        and figure["low"] is not None
        and -tolerance <= figure["low"]
        and figure["high"] <= tolerance
    )


def verdicts(
    data: dict[str, Any],
    client: str = "kbgen",
    reading_tolerance: float = READING_TOLERANCE,
    tolerance: float = TOLERANCE,
) -> list[tuple[str, bool]]:
    """What agreement means, claim by claim: `client` and the reference read the server's own
    TPOT within ±`reading_tolerance`, and `client`'s per-arm decode rate, TTFT and TPOT over
    every class, and its reading of each variant's effect, are within ±`tolerance` of the
    reference's — each the whole 95% interval (clients taking turns pass by pass: over passes,
    the unit there)."""
    result = analyse(data)
    claims = []
    for arm in data["arms"]:
        for who in (client, REFERENCE):
            f = result["reading"].get(f"{arm}/{who}")
            text = f"{arm}: {who} reads the server's own TPOT: {_pct(f)}"
            claims.append((text, _inside(f, reading_tolerance)))
        for figure in FIGURES:
            f = result["figures"].get(f"{arm}/{client}/{ALL}/{figure}")
            claims.append(
                (f"{arm}: {client}/{REFERENCE} {figure}: {_pct(f)}", _inside(f, tolerance))
            )
    for arm in (a for a in data["arms"] if a != data["baseline"]):
        f = result["effects"].get(f"{arm}/{ALL}/{client}-vs-{REFERENCE}")
        text = f"{arm}'s effect, {client}'s reading over {REFERENCE}'s: {_pct(f)}"
        claims.append((text, _inside(f, tolerance)))
    return claims


def _pct(f: dict[str, Any] | None) -> str:
    if f is None:
        return "-"
    if f["low"] is None:
        return f"{f['effect']:+.1%}"
    return f"{f['effect']:+.1%} [{f['low']:+.1%}, {f['high']:+.1%}]"


def report(data: dict[str, Any], client: str | None = None) -> bool:
    """Print the figures; True when every claim of `verdicts` holds for `client` (default
    kbgen, else the first client that is not the reference)."""
    result = analyse(data)
    ours = [c for c in data["clients"] if c != REFERENCE]
    client = client or ("kbgen" if "kbgen" in ours else (ours or [REFERENCE])[0])
    versions = {m["guidellm_version"] for m in data["arms"].values() if m.get("guidellm_version")}
    guidellm = f" · GuideLLM {', '.join(sorted(versions))}" if versions else ""
    print(
        f"\n{data['spec']}: vLLM {data.get('engine_version')}{guidellm} · {data['rounds']} "
        f"rounds · concurrency {data['concurrency']} · clients taking turns by "
        f"{data.get('interleave', 'pass')}: {', '.join(data['clients'])}"
    )
    print(
        "\nEach client over the reference, per prompt (geometric mean over prompts and its 95% "
        "interval)"
    )
    head = f"{'arm':<10}{'class':<13}{'figure':<14}" + "".join(f"{c:>30}" for c in ours)
    print(head + "\n" + "-" * len(head))
    for arm in data["arms"]:
        for cls in [*data["classes"], ALL]:
            for figure in FIGURES:
                cells = [_pct(result["figures"][f"{arm}/{c}/{cls}/{figure}"]) for c in ours]
                print(f"{arm:<10}{cls:<13}{figure:<14}" + "".join(f"{x:>30}" for x in cells))
    print(
        "\nThe server's own TPOT (its histogram, between scrapes) under each client over under "
        "the reference;\neach client's TPOT over the server's for the same requests, and how "
        "much later than the server's own TTFT it saw the first token"
    )
    for arm in data["arms"]:
        for c in data["clients"]:
            cost = "(reference)" if c == REFERENCE else _pct(result["server"][f"{arm}/{c}"])
            same = result["texts"].get(f"{arm}/{c}")
            text = f"   same text as the reference {same[0]}/{same[1]}" if same else ""
            seen = _pct(result["reading"][f"{arm}/{c}"])
            late = result["ttft_over_server"][f"{arm}/{c}"]
            late_text = f"   TTFT {late:+.2f} ms over the server's" if late is not None else ""
            print(f"  {arm:<10}{c:<15}server {cost:<26} reading {seen}{late_text}{text}")
    for arm in data["arms"]:
        cost = result["server"].get(f"{arm}/kbgen-vs-kbgen-final")
        if cost is not None:
            print(
                f"  {arm:<10}usage on every chunk over at the end only (kbgen over kbgen-final): "
                f"server TPOT {_pct(cost)}"
            )
    if len(data["arms"]) > 1:
        print("\nEach variant's effect on decode rate, as each client reads it")
        for key, f in result["effects"].items():
            print(f"  {key:<42}{_pct(f)}")
    claims = verdicts(data, client)
    print(
        f"\nAgreement ({client}): readings within ±{READING_TOLERANCE:.1%}; per-arm figures "
        f"and effects within ±{TOLERANCE:.0%} of the reference's (whole 95% intervals)"
    )
    for text, holds in claims:
        print(f"  {'yes' if holds else 'NO '}  {text}")
    return all(holds for _, holds in claims)


# --- main ------------------------------------------------------------------------------------


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec", nargs="?", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--rounds", type=int, default=None, help="default: the spec's, at least 2")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"of {', '.join(CLIENTS)}")
    parser.add_argument("--arms", default=None, help="the spec's arms to run (default: all)")
    parser.add_argument(
        "--port", type=int, default=None, help="the server's port (default: the spec's)"
    )
    parser.add_argument("--vllm-python", type=Path, default=None)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument(
        "--guidellm-python",
        type=Path,
        default=None,
        help="a Python with GuideLLM 0.8 installed (default: $KBGEN_GUIDELLM_VENV/bin/python); "
        "only then may --clients include guidellm",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for agreement.json (default: the log folder)"
    )
    parser.add_argument(
        "--interleave",
        choices=["pass", "request"],
        default=None,
        help="take turns pass by pass (the reference is all of `vllm bench serve`), or request "
        "by request (its request function; concurrency 1). Default: request at concurrency 1",
    )
    parser.add_argument("--report", type=Path, help="print the figures of an agreement.json")
    parser.add_argument(
        "--quick", action="store_true", help="the baseline arm alone, 2 prompts a class, 16 tokens"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a claim of agreement does not hold"
    )
    return parser.parse_args()


def _fail(message: str) -> NoReturn:
    print(f"agreement.py: {message}", file=sys.stderr)
    sys.exit(2)


def _spec(args: argparse.Namespace) -> specs.ExperimentSpec:
    """The spec as this run needs it, every mistake one line before anything starts."""
    try:
        spec = specs.load(args.spec)
    except KbgenError as exc:
        _fail(str(exc).splitlines()[0])
    args.clients = args.clients.split(",")
    unknown = [c for c in args.clients if c not in KNOWN]
    if unknown or REFERENCE not in args.clients or len(set(args.clients)) != len(args.clients):
        _fail(f"--clients: {','.join(args.clients)}: each of {', '.join(KNOWN)} at most once, "
              f"{REFERENCE} among them")  # fmt: skip
    if args.guidellm_python is None and os.environ.get("KBGEN_GUIDELLM_VENV"):
        args.guidellm_python = Path(os.environ["KBGEN_GUIDELLM_VENV"]) / "bin" / "python"
    if GUIDELLM in args.clients and args.guidellm_python is None:
        _fail("--clients guidellm needs --guidellm-python PATH (or KBGEN_GUIDELLM_VENV)")
    if args.quick:
        quick = {"per_class": 2, "max_tokens": 16}
        spec = spec.model_copy(update={"workload": spec.workload.model_copy(update=quick)})
        args.arms = args.arms or spec.baseline
    if args.port is not None:
        spec = spec.model_copy(
            update={"server": spec.server.model_copy(update={"port": args.port})}
        )
    wanted = args.arms.split(",") if args.arms else list(spec.variants)
    if missing := [a for a in wanted if a not in spec.variants]:
        _fail(f"--arms: {','.join(missing)}: not a variant of {args.spec}")
    args.arms = [a for a in [spec.baseline, *spec.variants] if a in wanted]
    args.arms = list(dict.fromkeys(args.arms))
    concurrency = spec.workload.concurrency
    by_request = concurrency == 1 and GUIDELLM not in args.clients
    args.interleave = args.interleave or ("request" if by_request else "pass")
    if GUIDELLM in args.clients and args.interleave == "request":
        _fail("guidellm takes turns pass by pass only (--interleave pass)")
    if args.interleave == "request" and concurrency != 1:
        _fail(f"--interleave request needs concurrency 1 (the spec's is {concurrency})")
    args.rounds = args.rounds or max(spec.workload.rounds, 2)
    return spec


def main() -> None:
    args = _options()
    if args.report:
        try:
            data: dict[str, Any] = json.loads(args.report.read_text())
        except (OSError, ValueError) as exc:
            _fail(f"{args.report}: {exc}")
        agree = report(data)
        sys.exit(1 if args.check and not agree else 0)
    spec = _spec(args)
    try:
        suite = prompts.load(
            Path(spec.workload.prompts or ""), spec.workload.classes, spec.workload.per_class
        )
    except KbgenError as exc:
        _fail(str(exc).splitlines()[0])
    todo = [(cls, i, text) for cls in spec.workload.classes for i, text in enumerate(suite[cls])]
    tmp = Path(tempfile.mkdtemp(prefix="kbgen-agreement-"))
    args.out = args.out or tmp
    args.out.mkdir(parents=True, exist_ok=True)
    venv = Path(os.environ.get("KBGEN_VLLM_VENV", REPO / ".vllm" / "venv"))
    vb = VllmBench(args.vllm_python or venv / "bin" / "python", tmp / "vllm_bench.log")
    print(f"{len(todo)} prompts, {args.rounds} rounds, clients {args.clients} taking turns by "
          f"{args.interleave}; logs in {tmp}, results in {args.out}")  # fmt: skip
    data = {
        "spec": spec.id,
        "baseline": spec.baseline,
        "classes": list(spec.workload.classes),
        "clients": args.clients,
        "rounds": args.rounds,
        "interleave": args.interleave,
        "concurrency": spec.workload.concurrency,
        "max_tokens": spec.workload.max_tokens,
        "api": spec.workload.api,
        "arms": {},
    }
    try:
        for arm in args.arms:
            data["arms"][arm] = asyncio.run(run_arm(spec, arm, todo, args, vb, tmp))
            data["engine_version"] = data["arms"][arm]["engine_version"]
            # kept as it goes (a later arm's failure loses nothing measured), never half-written
            done = args.out / "agreement.json.partial"
            done.write_text(json.dumps(data, indent=1))
            done.replace(args.out / "agreement.json")
    except KbgenError as exc:
        _fail(f"{str(exc).splitlines()[0]} (measured so far: {args.out / 'agreement.json'})")
    finally:
        vb.stop()
    agree = report(data)
    sys.exit(1 if args.check and not agree else 0)


if __name__ == "__main__":
    main()
