"""Results of tools people already run, as evidence for a record: `vllm bench serve`, GuideLLM.

Each importer reads one result file per variant and returns its samples (when the file has
per-request detail) or its statistics (when it has only aggregates), plus notes on what could not
be imported. What a file lacks stays missing — no per-class split becomes one class `all`, no
per-request samples means no confidence interval, per-chunk gaps are never relabelled as
per-token latencies — and the notes travel into the record's provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbgen.bench.samples import Sample
from kbgen.errors import InvalidInput, Problem
from kbgen.kb.files import read_json
from kbgen.kb.models import MetricName

ALL = "all"
S = 1_000_000_000  # ns per second
# our metric <- the suffix of vllm bench's mean_/median_/p99_/std_ keys; its ITL is a chunk gap
VLLM_BENCH_SUMMARIES: tuple[tuple[MetricName, str], ...] = (
    ("ttft_ms", "ttft_ms"),
    ("tpot_ms", "tpot_ms"),
    ("chunk_gap_ms", "itl_ms"),
    ("e2e_ms", "e2el_ms"),
)


@dataclass
class Imported:
    """One variant's results from another tool."""

    variant: str
    tool: str
    model: str | None
    samples: list[Sample] = field(default_factory=list)
    stats: dict[MetricName, dict[str, float]] = field(default_factory=dict)  # metric -> n, mean…
    # the tool's own speculative-decoding counters, as metrics.window() reports them
    spec_decode: dict[str, Any] | None = None
    workload: dict[str, Any] = field(default_factory=dict)  # what must match across variants
    notes: list[str] = field(default_factory=list)


def _sample(
    variant: str,
    index: int,
    ttft_s: float | None,
    gaps_s: list[float],
    output_tokens: int | None,
    error: str | None,
) -> Sample:
    """A request from relative timings: sent at 0, first token at TTFT, then the chunk gaps."""
    sample = Sample(
        variant=variant, prompt_class=ALL, prompt_index=index, repeat=0, scheduled_ns=0, sent_ns=0
    )
    if error or ttft_s is None:
        sample.error = error or "no first token"
        return sample
    times = [round(ttft_s * S)]
    for gap in gaps_s:
        times.append(times[-1] + round(gap * S))
    sample.chunk_ns, sample.done_ns, sample.output_tokens = times, times[-1], output_tokens
    # Per-chunk token counts are known only when every chunk carried one token.
    sample.chunk_tokens = [1] * len(times) if output_tokens == len(times) else []
    return sample


def vllm_bench(path: Path, variant: str) -> Imported:
    """The JSON of `vllm bench serve --save-result` (with `--save-detailed`: per request)."""
    data = read_json(path)
    if "completed" not in data or "mean_ttft_ms" not in data:
        raise InvalidInput(
            [
                Problem(
                    path,
                    None,
                    "",
                    "not a `vllm bench serve --save-result` file (no completed / mean_ttft_ms)",
                )
            ]
        )
    out = Imported(variant, "vllm bench serve", data.get("model_id"))
    out.workload = {
        k: data.get(k)
        for k in ("num_prompts", "max_concurrency", "request_rate", "total_input_tokens", "backend")
    }
    out.notes.append(f"{variant}: imported from {path.name} (vllm bench serve)")
    if "ttfts" in data and "output_lens" in data:
        itls = data.get("itls") or [[] for _ in data["ttfts"]]
        errors = data.get("errors") or [None] * len(data["ttfts"])
        out.samples = [
            _sample(variant, i, ttft, list(gaps or []), n, err or None)
            for i, (ttft, gaps, n, err) in enumerate(
                zip(data["ttfts"], itls, data["output_lens"], errors, strict=False)
            )
        ]
        if any(s.ok and not s.chunk_tokens for s in out.samples):
            out.notes.append(
                f"{variant}: chunks carried several tokens and vllm bench does not "
                "say how many: no per-token ITL (chunk gaps kept)"
            )
    else:
        out.notes.append(
            f"{variant}: no per-request samples (run with --save-detailed): no confidence interval"
        )
        for metric, key in VLLM_BENCH_SUMMARIES:
            reported = {
                "n": data["completed"],
                "mean": data.get(f"mean_{key}"),
                "median": data.get(f"median_{key}"),
                "p99": data.get(f"p99_{key}"),
                "stdev": data.get(f"std_{key}"),
            }
            if reported["mean"] is not None:
                out.stats[metric] = {k: v for k, v in reported.items() if v is not None}
        if data.get("mean_tpot_ms"):
            out.stats["decode_tok_s"] = {
                "n": data["completed"],
                "mean": 1000 / data["mean_tpot_ms"],
            }
            out.notes.append(f"{variant}: decode_tok_s is 1000 / mean TPOT (summary only)")
    if data.get("spec_decode_num_drafts") is not None:
        drafts = data["spec_decode_num_drafts"]
        rates = data.get("spec_decode_per_position_acceptance_rates") or []
        out.spec_decode = {
            "drafts": drafts,
            "draft_tokens": data.get("spec_decode_draft_tokens", 0),
            "accepted_tokens": data.get("spec_decode_accepted_tokens", 0),
            "accepted_per_position": [round(rate * drafts) for rate in rates],
        }
        out.notes.append(
            f"{variant}: speculative-decoding counters as vllm bench serve "
            "scraped them from /metrics"
        )
    out.notes.append(
        f"{variant}: no per-class split (one class `{ALL}`); no client/server token cross-check"
    )
    return out


def guidellm(path: Path, variant: str) -> Imported:
    """The JSON report of GuideLLM (`--output kind=json,path=…`; schema 2, GuideLLM 0.8).

    Per request GuideLLM keeps the start, first-token and last-token times and the output token
    count; no per-chunk times. The first benchmark of the report is imported.
    """
    data = read_json(path)
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks or not isinstance(benchmarks[0], dict):
        raise InvalidInput(
            [Problem(path, None, "benchmarks", "not a GuideLLM report (no benchmarks list)")]
        )
    bench = benchmarks[0]
    spec = _at(data, "config", "spec") or {}
    model = _at(spec, "backend", "model") or _at(bench, "config", "backend", "model")
    out = Imported(variant, "guidellm", model if isinstance(model, str) else None)
    version = _at(data, "metadata", "guidellm_version")
    out.notes.append(
        f"{variant}: imported from {path.name} (GuideLLM {version}, first of "
        f"{len(benchmarks)} benchmark(s))"
    )
    requests = bench.get("requests") or {}
    successful, errored = requests.get("successful") or [], requests.get("errored") or []
    for i, req in enumerate(successful):
        timings = _at(req, "info", "timings") or {}
        start, first, last = (
            timings.get(k)
            for k in ("request_start", "first_token_iteration", "last_token_iteration")
        )
        if start is None or first is None or last is None:
            out.samples.append(_sample(variant, i, None, [], None, "no token timings in report"))
            continue
        sample = _sample(variant, i, first - start, [last - first], req.get("output_tokens"), None)
        sample.chunk_tokens, sample.chunks_complete = [], False  # first and last token only
        out.samples.append(sample)
    for i, req in enumerate(errored, start=len(successful)):
        error = _at(req, "info", "error") or "errored request"
        out.samples.append(_sample(variant, i, None, [], None, str(error)))
    out.notes.append(
        f"{variant}: GuideLLM keeps first and last token times only: no ITL "
        "distribution, no chunk gaps"
    )
    out.notes.append(
        f"{variant}: no per-class split (one class `{ALL}`); no /metrics, so no "
        "client/server token cross-check and no speculative-decoding counters"
    )
    out.workload = {
        key: json.dumps(spec.get(key), sort_keys=True, default=str)
        for key in ("profile", "constraints", "data")
    }
    return out


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


IMPORTERS = {"vllm-bench": vllm_bench, "guidellm": guidellm}
