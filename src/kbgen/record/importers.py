"""Results of tools people already run, as evidence for a record: `vllm bench serve`, GuideLLM.

Each importer reads one result file per variant and returns its samples (when the file has
per-request detail) or its statistics (when it has only aggregates), plus notes on what could not
be imported. What a file lacks stays missing — no per-class split becomes one class `all`, no
per-request samples means no confidence interval, per-chunk gaps are never relabelled as
per-token latencies — and the notes travel into the record's provenance: how the tool's metrics
map onto kbgen's, the tool's own headline figures, and how requests were paired.

Failures are failures: a request the tool counts as failed is one here too, even with an empty
error text, and the file's own success and failure counts must agree with its per-request lists
(a file that disagrees with itself is refused, located).

The prompt contract (`Sample.prompt_index`, the key the verdict pairs arms by): the same index
in two variants means the same prompt only when the files prove it — `pair_prompts` gives
equal indices to GuideLLM requests with the same prompt text, and to `vllm bench serve`
requests at the same position when every position has the same input length in every file (its
result file keeps no prompt texts). Otherwise every request of every file gets an index of its
own, so no pairing is implied, and the record's notes say so.
"""

from __future__ import annotations

import hashlib
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
VLLM_BENCH_MAPPING = (
    "vllm bench serve's metrics as kbgen names them: TTFT is ttft_ms, TPOT is tpot_ms (both "
    "(E2E - TTFT) / (N - 1)), E2EL is e2e_ms; its ITL is the gap between stream chunks, kept as "
    "chunk_gap_ms, and becomes the per-token itl_ms only when every chunk held one token; "
    "decode_tok_s is (N - 1) / (E2E - TTFT) per request"
)
GUIDELLM_MAPPING = (
    "GuideLLM's metrics as kbgen names them: time_to_first_token_ms is ttft_ms; "
    "inter_token_latency_ms ((last token - first token) / (N - 1)) is kbgen's tpot_ms; its "
    "time_per_output_token_ms ((last token - request start) / N) includes TTFT and is not "
    "kbgen's TPOT (not imported); e2e_ms ends at the last token, GuideLLM's request_latency "
    "at the end of the response"
)
# the tool's own per-request list keys in a `vllm bench serve --save-detailed` file
VLLM_BENCH_LISTS = ("ttfts", "output_lens", "itls", "errors", "input_lens")


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
    output_tokens: int | None = None  # the tool's output token total over the same window
    workload: dict[str, Any] = field(default_factory=dict)  # what must match across variants
    notes: list[str] = field(default_factory=list)
    # What identifies each sample's prompt, in sample order (None: unknown), and what kind of
    # evidence that is: equal keys across files mean the same prompt (`pair_prompts`).
    prompt_keys: list[str | None] = field(default_factory=list)
    prompt_evidence: str | None = None


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


def _vllm_bench_error(error: str | None, ttft: float | None, output_len: int | None) -> str | None:
    """Why a request failed, or None. vLLM writes the HTTP reason as the error, which can be
    empty; a failed request also has ttft 0 and output length 0, a successful one never ttft 0
    (it is timed at its first chunk)."""
    if error:
        return error
    if not ttft:
        return f"failed with an empty error text (ttft {ttft}, output length {output_len})"
    return None


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
    out.notes.append(VLLM_BENCH_MAPPING)  # the same for every variant: one note
    headline = _headline(
        data,
        ("output_throughput", "output throughput", "tok/s"),
        ("request_throughput", "request throughput", "req/s"),
        ("duration", "duration", "s"),
    )
    out.notes.append(
        f"{variant}: vllm bench serve's own figures: {headline} ({data['completed']} completed, "
        f"{data.get('failed', 'unknown')} failed)"
    )
    if "ttfts" in data and "output_lens" in data:
        _vllm_bench_requests(path, data, out)
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
        out.output_tokens = data.get("total_output_tokens")
        out.notes.append(
            f"{variant}: speculative-decoding counters as vllm bench serve scraped them from "
            "/metrics; tokens per engine step from its output token total (total_output_tokens)"
        )
    out.notes.append(
        f"{variant}: no per-class split (one class `{ALL}`); no client/server token cross-check"
    )
    return out


def _vllm_bench_requests(path: Path, data: dict[str, Any], out: Imported) -> None:
    """The per-request lists of a `--save-detailed` file as samples, checked against its counts."""
    n = len(data["ttfts"])
    ragged = [k for k in VLLM_BENCH_LISTS if k in data and len(data[k] or []) != n]
    if ragged:
        raise InvalidInput(
            [
                Problem(path, None, k, f"holds {len(data[k] or [])} entries, ttfts {n}")
                for k in ragged
            ]
        )
    itls = data.get("itls") or [[] for _ in range(n)]
    errors = data.get("errors") or [None] * n
    variant = out.variant
    for i, (ttft, gaps, length, error) in enumerate(
        zip(data["ttfts"], itls, data["output_lens"], errors, strict=True)
    ):
        failed = _vllm_bench_error(error, ttft, length)
        out.samples.append(_sample(variant, i, ttft, list(gaps or []), length, failed))
    ok = sum(s.ok for s in out.samples)
    counted = {"completed": data["completed"], "failed": data.get("failed", n - ok)}
    read = {"completed": ok, "failed": n - ok}
    wrong = [k for k in counted if counted[k] != read[k]]
    if wrong:
        raise InvalidInput(
            [
                Problem(
                    path,
                    None,
                    k,
                    f"says {counted[k]}, but its per-request lists hold {read[k]} "
                    f"({read['completed']} completed, {read['failed']} failed)",
                )
                for k in wrong
            ]
        )
    if n - ok:
        out.notes.append(f"{variant}: {n - ok} of {n} requests failed")
    several = sum(1 for s in out.samples if s.ok and not s.chunk_tokens)
    if several:
        # The rest are the requests whose chunks each held one token — the slowest under
        # speculative decoding: a per-token ITL of them alone would be biased, so none at all.
        for s in out.samples:
            s.chunk_tokens = []
        out.notes.append(
            f"{variant}: in {several} of {ok} requests chunks carried several tokens and vllm "
            "bench does not say how many: no per-token ITL for this variant (chunk gaps kept)"
        )
    if data.get("input_lens"):
        out.prompt_keys = [f"{i}:{length}" for i, length in enumerate(data["input_lens"])]
        out.prompt_evidence = "input length"


def guidellm(path: Path, variant: str) -> Imported:
    """The JSON report of GuideLLM (`--output kind=json,path=…`; schema 2, GuideLLM 0.8).

    Per request GuideLLM keeps the start, first-token and last-token times, the output token
    count and the request it sent (the prompt text); no per-chunk times. The first benchmark of
    the report is imported.
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
    out.notes.append(GUIDELLM_MAPPING)
    metrics = bench.get("metrics") or {}
    headline = _headline(
        {
            "output": _at(metrics, "output_tokens_per_second", "successful", "mean"),
            "requests": _at(metrics, "requests_per_second", "successful", "mean"),
            "duration": bench.get("duration"),
        },
        ("output", "output_tokens_per_second (successful, mean)", "tok/s"),
        ("requests", "requests_per_second (successful, mean)", "req/s"),
        ("duration", "duration", "s"),
    )
    out.notes.append(f"{variant}: GuideLLM's own figures: {headline}")
    requests = bench.get("requests") or {}
    successful, errored = requests.get("successful") or [], requests.get("errored") or []
    _check_guidellm_counts(path, metrics, bench, {"successful": successful, "errored": errored})
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
    if errored:
        out.notes.append(f"{variant}: {len(errored)} of {len(out.samples)} requests errored")
    incomplete = requests.get("incomplete") or []
    if incomplete:
        out.notes.append(
            f"{variant}: {len(incomplete)} incomplete request(s) (cancelled when the benchmark "
            "ended) not imported"
        )
    out.prompt_keys = [_prompt_text_key(req) for req in (*successful, *errored)]
    out.prompt_evidence = "prompt text"
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


def _check_guidellm_counts(
    path: Path, metrics: dict[str, Any], bench: dict[str, Any], lists: dict[str, list[Any]]
) -> None:
    """The report's request totals against the requests it lists; a mismatch is refused."""
    totals = metrics.get("request_totals") or {}
    wrong = [
        (kind, totals[kind], len(listed))
        for kind, listed in lists.items()
        if isinstance(totals.get(kind), int) and totals[kind] != len(listed)
    ]
    if wrong:
        sampled = _at(bench, "config", "sample_size")
        hint = (
            f" (the report keeps a sample of {sampled}: run without sample_size)" if sampled else ""
        )
        raise InvalidInput(
            [
                Problem(
                    path,
                    None,
                    f"benchmarks.0.metrics.request_totals.{kind}",
                    f"says {said}, but the report lists {listed} {kind} requests{hint}",
                )
                for kind, said, listed in wrong
            ]
        )


def _prompt_text_key(request: dict[str, Any]) -> str | None:
    """A digest of the prompt a GuideLLM request sent (its body's prompt or messages)."""
    args = request.get("request_args")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    body = _at(args, "body") or {}
    prompt = body.get("prompt", body.get("messages")) if isinstance(body, dict) else None
    if prompt is None:
        return None
    return hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()


def pair_prompts(found: list[Imported]) -> tuple[bool, str]:
    """Set every sample's prompt_index (and repeat) by what the files prove; whether the arms
    are paired by prompt, and how, as a note.

    Same index across files means the same prompt only when proven: equal prompt texts, or equal
    input lengths at every position of every file (a file without texts). Otherwise each file's
    requests get indices of their own, after the previous file's: nothing is paired.
    """
    kinds = {i.prompt_evidence for i in found}
    evidence = kinds.pop() if len(kinds) == 1 else None
    keyed = all(len(i.prompt_keys) == len(i.samples) and None not in i.prompt_keys for i in found)
    reason = ""
    if evidence is None or not keyed:
        reason = "the files do not all say which prompt each request sent"
    elif evidence == "prompt text":
        index: dict[str | None, int] = {}
        for imported in found:
            seen: dict[int, int] = {}
            for sample, key in zip(imported.samples, imported.prompt_keys, strict=True):
                sample.prompt_index = index.setdefault(key, len(index))
                sample.repeat = seen.get(sample.prompt_index, 0)
                seen[sample.prompt_index] = sample.repeat + 1
        common = set.intersection(*({s.prompt_index for s in i.samples} for i in found))
        return True, (
            f"requests paired by prompt text: {len(common)} prompt(s) sent to every variant, "
            f"of {len(index)}"
        )
    elif all(i.prompt_keys == found[0].prompt_keys for i in found):
        return True, (
            f"requests paired by position: the files keep no prompt texts, and each of the "
            f"{len(found[0].samples)} positions has the same {evidence} in every file"
        )
    else:
        reason = f"the {evidence} differs between the files"
    offset = 0
    for imported in found:
        for i, sample in enumerate(imported.samples):
            sample.prompt_index, sample.repeat = offset + i, 0
        offset += len(imported.samples)
    return False, (
        f"requests not paired by prompt ({reason}): the verdict compares requests, unpaired"
    )


def _headline(data: dict[str, Any], *figures: tuple[str, str, str]) -> str:
    """`name value unit, …` for the figures the tool reported, 6 significant digits."""
    shown = [
        f"{name} {data[key]:.6g} {unit}"
        for key, name, unit in figures
        if isinstance(data.get(key), int | float)
    ]
    return ", ".join(shown) or "none reported"


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


IMPORTERS = {"vllm-bench": vllm_bench, "guidellm": guidellm}
