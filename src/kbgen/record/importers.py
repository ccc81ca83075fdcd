"""Results of tools people already run, as evidence for a record: `vllm bench serve`, GuideLLM.

Each importer reads one result file per variant and returns its samples (when the file has
per-request detail) or its statistics (when it has only aggregates), plus notes on what could not
be imported. What a file lacks stays missing — no per-class split becomes one class `all`
(unless `classify` takes the classes from the prompt file the tool sent), no per-request samples
means no confidence interval, per-chunk gaps are never relabelled as per-token latencies — and
the notes travel into the record's provenance: how the tool's metrics map onto kbgen's, the
tool's own headline figures, how requests were paired and how their classes were matched.

A token is what a chunk carries, never a chunk: `vllm bench serve` times its TTFT at the first
chunk with choices, which in a chat stream is vLLM's role-only chunk, so a chat request's first
token is one gap later (`VLLM_BENCH_LEADING_CHUNKS`); a per-token ITL is kept only when the file
proves every chunk of every request held one token (token chunks = output tokens).

Each file is validated as a Pydantic model of its tool's format (`VllmBenchResult`,
`GuideLLMReport`; keys kbgen does not read are ignored): numbers typed and finite, latencies and
counts non-negative, per-request lists of equal length, timings in order, at most
`MAX_REQUESTS` requests in at most `MAX_BYTES` bytes — every problem located in the file as
`file:line: dotted.path: message`, the line that of the key (found by searching the text).

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
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from kbgen.bench import prompts
from kbgen.bench.samples import Sample
from kbgen.bench.spec import MAX_TIMEOUT_S
from kbgen.errors import InvalidInput, Problem
from kbgen.kb.files import read_json
from kbgen.kb.models import ID_PATTERN, MetricName, fail_at
from kbgen.kb.numbers import Count, Finite, NonNegative
from kbgen.kb.problems import dotted, problems_of

ALL = "all"
SLUG_RULE = "lower-case letters, digits and inner hyphens, at most 80 characters"
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
VLLM_BENCH_CHAT = (
    "vllm bench serve's chat API (openai-chat) times its TTFT at vLLM's first chunk, which holds "
    "only the role; kbgen's ttft_ms is at the next chunk (TTFT + the first ITL), the first that "
    "carries a token, and its tpot_ms and decode_tok_s follow from that TTFT"
)
# the tool's own per-request list keys in a `vllm bench serve --save-detailed` file
VLLM_BENCH_LISTS = ("ttfts", "output_lens", "itls", "errors", "input_lens", "latencies")
# How many leading chunks carry no token, by `vllm bench serve --backend` (its request functions
# in vllm/benchmarks/lib/endpoint_request_func.py, 0.32 and the older ones read): it times TTFT
# at the first chunk with choices and an ITL at each later one. vLLM's chat stream opens with a
# role-only chunk, so a chat request of N tokens one per chunk has N ITLs, a completion N - 1.
# Backends not listed: which chunks carry tokens is not known, and no per-token ITL is claimed.
VLLM_BENCH_LEADING_CHUNKS = {"vllm": 0, "openai": 0, "openai-chat": 1}

# Limits of an import file. Unpaired requests are compared by a BCa bootstrap, whose jackknife
# costs n² (20,000 requests: about ten seconds); the file is read whole, as the tools write it.
MAX_REQUESTS = 20_000
MAX_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 100  # nesting of JSON arrays and objects; the tools write a dozen levels


# --- the tools' formats, as far as kbgen reads them ------------------------------------------


class _Format(BaseModel):
    """A part of another tool's file: what kbgen reads is typed, everything else is ignored."""

    model_config = ConfigDict(extra="ignore")


Rate = Annotated[Finite, Field(ge=0, le=1)]
# A latency of one request, in seconds: no request is timed past the longest timeout a spec may
# set (a week); larger ones are not timings, and overflow the nanoseconds of a sample.
Seconds = Annotated[Finite, Field(ge=0, le=MAX_TIMEOUT_S)]


class VllmBenchResult(_Format):
    """`vllm bench serve --save-result` (`--save-detailed`: the per-request lists too)."""

    model_id: str | None = None
    completed: Count
    failed: Count | None = None
    num_prompts: Count | None = None
    max_concurrency: Count | None = None
    request_rate: Finite | str | None = None  # "inf" for as fast as possible
    total_input_tokens: Count | None = None
    total_output_tokens: Count | None = None
    backend: str | None = None
    output_throughput: NonNegative | None = None
    request_throughput: NonNegative | None = None
    duration: NonNegative | None = None
    mean_ttft_ms: NonNegative
    median_ttft_ms: NonNegative | None = None
    p99_ttft_ms: NonNegative | None = None
    std_ttft_ms: NonNegative | None = None
    mean_tpot_ms: NonNegative | None = None
    median_tpot_ms: NonNegative | None = None
    p99_tpot_ms: NonNegative | None = None
    std_tpot_ms: NonNegative | None = None
    mean_itl_ms: NonNegative | None = None
    median_itl_ms: NonNegative | None = None
    p99_itl_ms: NonNegative | None = None
    std_itl_ms: NonNegative | None = None
    mean_e2el_ms: NonNegative | None = None
    median_e2el_ms: NonNegative | None = None
    p99_e2el_ms: NonNegative | None = None
    std_e2el_ms: NonNegative | None = None
    spec_decode_num_drafts: Count | None = None
    spec_decode_draft_tokens: Count | None = None
    spec_decode_accepted_tokens: Count | None = None
    spec_decode_per_position_acceptance_rates: list[Rate] | None = None
    # per request, in request order (seconds)
    ttfts: list[Seconds | None] | None = Field(default=None, max_length=MAX_REQUESTS)
    output_lens: list[Count | None] | None = Field(default=None, max_length=MAX_REQUESTS)
    itls: list[list[Seconds] | None] | None = Field(default=None, max_length=MAX_REQUESTS)
    errors: list[str | None] | None = Field(default=None, max_length=MAX_REQUESTS)
    input_lens: list[Count | None] | None = Field(default=None, max_length=MAX_REQUESTS)
    # not read (a sample's end is its TTFT and gaps), but a file that holds them must hold timings
    latencies: list[Seconds | None] | None = Field(default=None, max_length=MAX_REQUESTS)

    @model_validator(mode="before")
    @classmethod
    def _is_one(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "completed" not in data or "mean_ttft_ms" not in data:
            raise PydanticCustomError(
                "format",
                "not a `vllm bench serve --save-result` file (no completed / mean_ttft_ms)",
            )
        return data

    @model_validator(mode="after")
    def _consistent(self) -> VllmBenchResult:
        errors: list[tuple[tuple[str | int, ...], str]] = []
        if self.ttfts is not None:
            n = len(self.ttfts)
            for key in VLLM_BENCH_LISTS:
                listed = getattr(self, key)
                if listed is not None and len(listed) != n:
                    errors.append(((key,), f"holds {len(listed)} entries, ttfts {n}"))
        total, lengths = self.total_output_tokens, self.output_lens
        if total is not None and lengths is not None and None not in lengths:
            summed = sum(n or 0 for n in lengths)
            if summed != total:  # the total gives the tokens per engine step: one of them is wrong
                errors.append(
                    (("total_output_tokens",), f"says {total}, output_lens add up to {summed}")
                )
        drafted, accepted = self.spec_decode_draft_tokens, self.spec_decode_accepted_tokens
        if drafted is not None and accepted is not None and accepted > drafted:
            errors.append(
                (("spec_decode_accepted_tokens",), f"{accepted} exceeds the {drafted} drafted")
            )
        fail_at("VllmBenchResult", errors)
        return self


class GuideLLMTimings(_Format):
    """When a request started, got its first token and its last (seconds since the epoch)."""

    request_start: Finite | None = None
    first_token_iteration: Finite | None = None
    last_token_iteration: Finite | None = None

    @model_validator(mode="after")
    def _in_order(self) -> GuideLLMTimings:
        start, first, last = (
            self.request_start,
            self.first_token_iteration,
            self.last_token_iteration,
        )
        if start is not None and first is not None and last is not None:
            if first <= start:  # a first token in no time (or before the request) is no timing
                fail_at(
                    "GuideLLMTimings",
                    [(("first_token_iteration",), f"{first} is not after request_start {start}")],
                )
            if last < first:
                fail_at(
                    "GuideLLMTimings",
                    [(("last_token_iteration",), f"{last} is before first_token_iteration")],
                )
            if not last - start <= MAX_TIMEOUT_S:  # `not`: an overflow to inf fails too
                fail_at(
                    "GuideLLMTimings",
                    [(("last_token_iteration",), f"{last - start:g} s after request_start")],
                )
        return self


class GuideLLMInfo(_Format):
    timings: GuideLLMTimings | None = None
    error: str | None = None


class GuideLLMRequest(_Format):
    info: GuideLLMInfo | None = None
    output_tokens: Count | None = None
    request_args: str | dict[str, Any] | None = None  # the request sent, as JSON text


class GuideLLMRequests(_Format):
    successful: list[GuideLLMRequest] | None = Field(default=None, max_length=MAX_REQUESTS)
    errored: list[GuideLLMRequest] | None = Field(default=None, max_length=MAX_REQUESTS)
    incomplete: list[Any] | None = None

    @model_validator(mode="after")
    def _bounded(self) -> GuideLLMRequests:
        listed = len(self.successful or []) + len(self.errored or [])
        if listed > MAX_REQUESTS:
            fail_at(
                "GuideLLMRequests",
                [(("errored",), f"{listed:,} requests in all; at most {MAX_REQUESTS:,}")],
            )
        return self


class GuideLLMMean(_Format):
    mean: Finite | None = None


class GuideLLMByStatus(_Format):
    successful: GuideLLMMean | None = None


class GuideLLMTotals(_Format):
    successful: Count | None = None
    errored: Count | None = None


class GuideLLMMetrics(_Format):
    request_totals: GuideLLMTotals | None = None
    output_tokens_per_second: GuideLLMByStatus | None = None
    requests_per_second: GuideLLMByStatus | None = None


class GuideLLMBackend(_Format):
    model: str | None = None


class GuideLLMBenchmarkConfig(_Format):
    sample_size: Count | None = None
    backend: GuideLLMBackend | None = None


class GuideLLMBenchmark(_Format):
    config: GuideLLMBenchmarkConfig | None = None
    metrics: GuideLLMMetrics | None = None
    requests: GuideLLMRequests | None = None
    duration: NonNegative | None = None


class GuideLLMSpec(_Format):
    backend: GuideLLMBackend | None = None
    profile: Any = None
    constraints: Any = None
    data: Any = None


class GuideLLMConfig(_Format):
    spec: GuideLLMSpec | None = None


class GuideLLMMetadata(_Format):
    guidellm_version: str | None = None


class GuideLLMReport(_Format):
    """GuideLLM's JSON report (`--output kind=json,path=…`; schema 2, GuideLLM 0.8)."""

    metadata: GuideLLMMetadata | None = None
    config: GuideLLMConfig | None = None
    benchmarks: list[GuideLLMBenchmark] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _is_one(cls, data: Any) -> Any:
        benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
        if not isinstance(benchmarks, list) or not benchmarks:
            raise PydanticCustomError("format", "not a GuideLLM report (no benchmarks list)")
        return data


F = TypeVar("F", bound=_Format)


def read_format(path: Path, model: type[F]) -> F:
    """`path` read as JSON and validated as `model`; InvalidInput located in the file otherwise.

    The size is checked before reading and the nesting before validating, so a huge file or a
    deeply nested one is a clear error, not a memory or a recursion error.
    """
    data = read_json(path, MAX_BYTES)
    if _deeper_than(data, MAX_DEPTH):
        raise InvalidInput([Problem(path, None, "", f"JSON nesting is deeper than {MAX_DEPTH}")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        text = path.read_text(encoding="utf-8")
        errors = {dotted(e["loc"]): e["loc"] for e in exc.errors(include_url=False)}
        raise InvalidInput(
            [
                Problem(p.path, _line_of_key(text, errors.get(p.field, ())), p.field, p.message)
                for p in problems_of(path, exc)
            ]
        ) from exc


def _located(path: Path, loc: list[str | int], message: str) -> Problem:
    """A problem at the line of `loc` in the JSON file `path`."""
    return Problem(path, _line_of_key(path.read_text(encoding="utf-8"), loc), dotted(loc), message)


def _deeper_than(data: Any, limit: int) -> bool:
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    return False


def _line_of_key(text: str, loc: Iterable[str | int]) -> int:
    """The line of the last key of `loc`, searching the text for each key in turn (JSON keeps
    no positions once parsed): exact for a key that appears once, close otherwise."""
    at = 0
    for part in loc:
        if isinstance(part, str):
            found = text.find(json.dumps(part), at)
            if found >= 0:
                at = found
    return text.count("\n", 0, at) + 1


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
    # What `classify` matches a prompt file by: the file imported, each sample's prompt text
    # where the tool kept it (None: unknown), or whether the samples are in the order sent.
    source: Path | None = None
    prompt_texts: list[str | None] = field(default_factory=list)
    in_order_sent: bool = False


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
    result = read_format(path, VllmBenchResult)
    out = Imported(variant, "vllm bench serve", result.model_id, source=path)
    out.workload = {
        k: getattr(result, k)
        for k in ("num_prompts", "max_concurrency", "request_rate", "total_input_tokens", "backend")
    }
    out.notes.append(f"{variant}: imported from {path.name} (vllm bench serve)")
    out.notes.append(VLLM_BENCH_MAPPING)  # the same for every variant: one note
    headline = _headline(
        ("output throughput", result.output_throughput, "tok/s"),
        ("request throughput", result.request_throughput, "req/s"),
        ("duration", result.duration, "s"),
    )
    failed = "unknown" if result.failed is None else result.failed
    out.notes.append(
        f"{variant}: vllm bench serve's own figures: {headline} ({result.completed} completed, "
        f"{failed} failed)"
    )
    if result.ttfts is not None and result.output_lens is not None:
        _vllm_bench_requests(path, result, out)
    else:
        out.notes.append(
            f"{variant}: no per-request samples (run with --save-detailed): no confidence interval"
        )
        for metric, key in VLLM_BENCH_SUMMARIES:
            reported = {
                "n": result.completed,
                "mean": getattr(result, f"mean_{key}"),
                "median": getattr(result, f"median_{key}"),
                "p99": getattr(result, f"p99_{key}"),
                "stdev": getattr(result, f"std_{key}"),
            }
            if reported["mean"] is not None:
                out.stats[metric] = {k: v for k, v in reported.items() if v is not None}
        rate = 1000 / result.mean_tpot_ms if result.mean_tpot_ms else math.inf
        if math.isfinite(rate):  # a TPOT of 1e-310 ms has no rate a float can hold
            out.stats["decode_tok_s"] = {"n": result.completed, "mean": rate}
            out.notes.append(f"{variant}: decode_tok_s is 1000 / mean TPOT (summary only)")
    drafts = result.spec_decode_num_drafts
    if drafts is not None:
        rates = result.spec_decode_per_position_acceptance_rates or []
        out.spec_decode = {
            "drafts": drafts,
            "draft_tokens": result.spec_decode_draft_tokens or 0,
            "accepted_tokens": result.spec_decode_accepted_tokens or 0,
            "accepted_per_position": [round(rate * drafts) for rate in rates],
        }
        out.output_tokens = result.total_output_tokens
        out.notes.append(
            f"{variant}: speculative-decoding counters as vllm bench serve scraped them from "
            "/metrics; tokens per engine step from its output token total (total_output_tokens)"
        )
    out.notes.append(no_split(variant))
    out.notes.append(f"{variant}: no client/server token cross-check")
    return out


def _vllm_bench_requests(path: Path, result: VllmBenchResult, out: Imported) -> None:
    """The per-request lists of a `--save-detailed` file as samples, checked against its counts."""
    ttfts, lengths = result.ttfts or [], result.output_lens or []
    n = len(ttfts)
    itls = result.itls or [[] for _ in range(n)]
    errors = result.errors or [None] * n
    variant = out.variant
    leading = VLLM_BENCH_LEADING_CHUNKS.get(result.backend or "")
    for i, (ttft, gaps, length, error) in enumerate(zip(ttfts, itls, lengths, errors, strict=True)):
        failed = _vllm_bench_error(error, ttft, length)
        gaps = list(gaps or [])
        tokenless = len(gaps) < (leading or 0)  # a stream of the role chunk alone
        if leading and ttft is not None and not tokenless:
            # the first token came in the chunk after the role-only one
            ttft, gaps = ttft + sum(gaps[:leading]), gaps[leading:]
        sample = _sample(variant, i, ttft, gaps, length, failed)
        if tokenless:  # its TTFT is the tool's, at a chunk that held no token: none is counted
            sample.chunk_tokens = []
        out.samples.append(sample)
    out.in_order_sent = True  # the tool gathers its results in the order it sent the requests
    ok = sum(s.ok for s in out.samples)
    counted = {
        "completed": result.completed,
        "failed": n - ok if result.failed is None else result.failed,
    }
    read = {"completed": ok, "failed": n - ok}
    wrong = [k for k in counted if counted[k] != read[k]]
    if wrong:
        raise InvalidInput(
            [
                _located(
                    path,
                    [k],
                    f"says {counted[k]}, but its per-request lists hold {read[k]} "
                    f"({read['completed']} completed, {read['failed']} failed)",
                )
                for k in wrong
            ]
        )
    if n - ok:
        out.notes.append(f"{variant}: {n - ok} of {n} requests failed")
    if leading is None:
        for s in out.samples:
            s.chunk_tokens = []
        out.notes.append(
            f"{variant}: backend {result.backend!r}: which of its chunks carry tokens is not "
            "known: no per-token ITL for this variant (chunk gaps kept)"
        )
    elif leading:
        out.notes.append(VLLM_BENCH_CHAT)
    several = sum(1 for s in out.samples if s.ok and not s.chunk_tokens)
    if several and leading is not None:
        # The rest are the requests whose chunks each held one token — the slowest under
        # speculative decoding: a per-token ITL of them alone would be biased, so none at all.
        for s in out.samples:
            s.chunk_tokens = []
        out.notes.append(
            f"{variant}: in {several} of {ok} requests the chunks did not hold one token each "
            "(vllm bench does not say how many each held): no per-token ITL for this variant "
            "(chunk gaps kept)"
        )
    if result.input_lens and None not in result.input_lens:
        out.prompt_keys = [f"{i}:{length}" for i, length in enumerate(result.input_lens)]
        out.prompt_evidence = "input length"


def guidellm(path: Path, variant: str) -> Imported:
    """The JSON report of GuideLLM (`--output kind=json,path=…`; schema 2, GuideLLM 0.8).

    Per request GuideLLM keeps the start, first-token and last-token times, the output token
    count and the request it sent (the prompt text); no per-chunk times. The first benchmark of
    the report is imported.
    """
    report = read_format(path, GuideLLMReport)
    bench = report.benchmarks[0]
    spec = report.config.spec if report.config and report.config.spec else GuideLLMSpec()
    bench_config = bench.config or GuideLLMBenchmarkConfig()
    model = (spec.backend and spec.backend.model) or (
        bench_config.backend and bench_config.backend.model
    )
    out = Imported(variant, "guidellm", model or None, source=path)
    version = report.metadata.guidellm_version if report.metadata else None
    out.notes.append(
        f"{variant}: imported from {path.name} (GuideLLM {version}, first of "
        f"{len(report.benchmarks)} benchmark(s))"
    )
    out.notes.append(GUIDELLM_MAPPING)
    metrics = bench.metrics or GuideLLMMetrics()
    headline = _headline(
        (
            "output_tokens_per_second (successful, mean)",
            _mean(metrics.output_tokens_per_second),
            "tok/s",
        ),
        ("requests_per_second (successful, mean)", _mean(metrics.requests_per_second), "req/s"),
        ("duration", bench.duration, "s"),
    )
    out.notes.append(f"{variant}: GuideLLM's own figures: {headline}")
    requests = bench.requests or GuideLLMRequests()
    successful, errored = requests.successful or [], requests.errored or []
    _check_guidellm_counts(
        path, metrics, bench_config, {"successful": successful, "errored": errored}
    )
    for i, req in enumerate(successful):
        timings = (req.info and req.info.timings) or GuideLLMTimings()
        start, first, last = (
            timings.request_start,
            timings.first_token_iteration,
            timings.last_token_iteration,
        )
        if start is None or first is None or last is None:
            out.samples.append(_sample(variant, i, None, [], None, "no token timings in report"))
            continue
        sample = _sample(variant, i, first - start, [last - first], req.output_tokens, None)
        sample.chunk_tokens, sample.chunks_complete = [], False  # first and last token only
        out.samples.append(sample)
    for i, req in enumerate(errored, start=len(successful)):
        error = (req.info and req.info.error) or "errored request"
        out.samples.append(_sample(variant, i, None, [], None, error))
    if errored:
        out.notes.append(f"{variant}: {len(errored)} of {len(out.samples)} requests errored")
    incomplete = requests.incomplete or []
    if incomplete:
        out.notes.append(
            f"{variant}: {len(incomplete)} incomplete request(s) (cancelled when the benchmark "
            "ended) not imported"
        )
    sent = [_prompt_sent(req) for req in (*successful, *errored)]
    out.prompt_keys = [None if prompt is None else _digest(prompt) for prompt in sent]
    out.prompt_evidence = "prompt text"
    out.prompt_texts = [_text_of(prompt) for prompt in sent]
    out.notes.append(
        f"{variant}: GuideLLM keeps first and last token times only: no ITL "
        "distribution, no chunk gaps"
    )
    out.notes.append(no_split(variant))
    out.notes.append(
        f"{variant}: no /metrics, so no client/server token cross-check and no "
        "speculative-decoding counters"
    )
    out.workload = {
        key: json.dumps(getattr(spec, key), sort_keys=True, default=str)
        for key in ("profile", "constraints", "data")
    }
    return out


def _mean(by_status: GuideLLMByStatus | None) -> float | None:
    return by_status.successful.mean if by_status and by_status.successful else None


def _check_guidellm_counts(
    path: Path,
    metrics: GuideLLMMetrics,
    config: GuideLLMBenchmarkConfig,
    lists: dict[str, list[GuideLLMRequest]],
) -> None:
    """The report's request totals against the requests it lists; a mismatch is refused."""
    totals = metrics.request_totals or GuideLLMTotals()
    wrong = [
        (kind, said, len(listed))
        for kind, listed in lists.items()
        if (said := getattr(totals, kind)) is not None and said != len(listed)
    ]
    if wrong:
        sampled = config.sample_size
        hint = (
            f" (the report keeps a sample of {sampled}: run without sample_size)" if sampled else ""
        )
        raise InvalidInput(
            [
                _located(
                    path,
                    ["benchmarks", 0, "metrics", "request_totals", kind],
                    f"says {said}, but the report lists {listed} {kind} requests{hint}",
                )
                for kind, said, listed in wrong
            ]
        )


def _prompt_sent(request: GuideLLMRequest) -> Any:
    """The prompt a GuideLLM request sent: its body's prompt or messages (None: not kept)."""
    args: Any = request.request_args
    if isinstance(args, str):
        try:  # pydantic-core's parser: a nesting limit, no RecursionError
            args = pydantic_core.from_json(args)
        except ValueError:
            return None
    body = _at(args, "body") or {}
    return body.get("prompt", body.get("messages")) if isinstance(body, dict) else None


def _digest(prompt: Any) -> str | None:
    try:
        text = json.dumps(prompt, sort_keys=True)
    except (TypeError, ValueError, RecursionError):  # NaN, mixed key types, too deep
        return None
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def _text_of(prompt: Any) -> str | None:
    """The text of a prompt as sent: a completion's prompt, or a chat's last user message (its
    content, or its text parts joined); None for anything else."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, list):
        return None
    users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [p for p in parts if isinstance(p, str)]
        content = "".join(texts) if texts and len(texts) == len(parts) else None
    return content if isinstance(content, str) else None


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


def no_split(variant: str) -> str:
    """The note of an import whose requests all have one class (no --prompts)."""
    return f"{variant}: no per-class split (one class `{ALL}`)"


@dataclass(frozen=True)
class Suite:
    """The prompt file an import took its classes from."""

    path: Path
    classes: list[str]  # the classes its requests have, in the file's order
    sha256: str


def classify(found: list[Imported], path: Path) -> Suite:
    """Give every sample the class of its prompt in the suite at `path` (a kbgen prompt file):
    by text where the tool kept each request's prompt text (GuideLLM), else by position where it
    kept the order they were sent in (`vllm bench serve`, whose result file keeps no texts: with
    `--dataset-name custom --disable-shuffle` it sends the file's prompts in order). Each
    variant's notes say which. A file that does not match is InvalidInput naming it.
    """
    suite = prompts.read(path)
    bad = [
        Problem(path, p.line, "class", f"{p.prompt_class!r} is no class name: {SLUG_RULE}")
        for p in suite
        if not re.fullmatch(ID_PATTERN, p.prompt_class)
    ]
    if bad or not suite:
        raise InvalidInput(bad or [Problem(path, None, "", "no prompts")])
    for imported in found:
        matched = _match(imported, path, suite)
        for sample, prompt_class in zip(imported.samples, matched, strict=True):
            sample.prompt_class = prompt_class
        how = (
            "by prompt text (each request's prompt found in the file)"
            if imported.prompt_texts
            else "by position (the result file keeps no prompt texts: request i is taken to be "
            "the file's prompt i, as vllm bench serve --dataset-name custom --disable-shuffle "
            "sends them)"
        )
        imported.notes = [n for n in imported.notes if n != no_split(imported.variant)]
        imported.notes.append(f"{imported.variant}: classes from {path.name}, matched {how}")
    used = {s.prompt_class for imported in found for s in imported.samples}
    classes = [c for c in dict.fromkeys(p.prompt_class for p in suite) if c in used]
    return Suite(path, classes, hashlib.sha256(path.read_bytes()).hexdigest())


def _match(imported: Imported, path: Path, suite: list[prompts.Prompt]) -> list[str]:
    """The class of each of the import's samples, by prompt text or by position."""
    source = imported.source or Path(imported.variant)
    n = len(imported.samples)
    if imported.prompt_texts:
        classes: dict[str, set[str]] = {}
        for p in suite:
            classes.setdefault(p.text, set()).add(p.prompt_class)
        matched: list[str] = []
        for i, text in enumerate(imported.prompt_texts):
            found = classes.get(text, set()) if text is not None else set()
            if len(found) == 1:
                matched.append(found.pop())
                continue
            unmatched = sum(1 for t in imported.prompt_texts if t is None or t not in classes)
            message = (
                f"request {i} kept no prompt text to find in {path}"
                if text is None
                else f"the prompt of request {i} is in {path} under {len(found)} classes"
                if found
                else f"the prompt of request {i} is not in {path} ({unmatched} of {n} "
                "requests' prompts are not)"
            )
            raise InvalidInput([Problem(source, None, "", message)])
        return matched
    if not imported.in_order_sent or not n:
        raise InvalidInput(
            [
                Problem(
                    source,
                    None,
                    "",
                    "no per-request results in the order sent (vllm bench serve: run with "
                    "--save-detailed): --prompts cannot give its requests classes",
                )
            ]
        )
    if n != len(suite):
        raise InvalidInput(
            [
                Problem(
                    source,
                    None,
                    "",
                    f"{n} requests, but {path} holds {len(suite)} prompts: matching by position "
                    "needs one request per prompt, in the file's order (vllm bench serve "
                    f"--dataset-name custom --dataset-path {path.name} --disable-shuffle "
                    f"--num-prompts {len(suite)})",
                )
            ]
        )
    return [p.prompt_class for p in suite]


def _headline(*figures: tuple[str, float | None, str]) -> str:
    """`name value unit, …` for the figures the tool reported, 6 significant digits."""
    shown = [f"{name} {value:.6g} {unit}" for name, value, unit in figures if value is not None]
    return ", ".join(shown) or "none reported"


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


IMPORTERS = {"vllm-bench": vllm_bench, "guidellm": guidellm}
