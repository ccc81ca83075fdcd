"""GuideLLM's JSON reports (`--output kind=json,path=…`; schema 2, GuideLLM 0.8) as evidence.

Per request GuideLLM keeps the start, first-token and last-token times, the output token count
and the request it sent (whose prompt text pairs and classifies the requests); no per-chunk
times, so no ITL distribution. An errored request is a failure, incomplete ones are not
imported, and a report whose totals disagree with the requests it lists is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from kbgen.kb.models import fail_at
from kbgen.kb.numbers import MAX_TOKENS, Count, Finite, Int, NonNegative
from kbgen.record.importers.imported import (
    Imported,
    headline,
    no_split,
    sample,
    token_counts,
)
from kbgen.record.importers.reading import MAX_REQUESTS, Format, read_format
from kbgen.run.spec import MAX_TIMEOUT_S

MAPPING = (
    "GuideLLM's metrics as kbgen names them: time_to_first_token_ms is ttft_ms; "
    "inter_token_latency_ms ((last token - first token) / (N - 1)) is kbgen's tpot_ms; its "
    "time_per_output_token_ms ((last token - request start) / N) includes TTFT and is not "
    "kbgen's TPOT (not imported); e2e_ms ends at the last token, GuideLLM's request_latency "
    "at the end of the response"
)


class GuideLLMTimings(Format):
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


class GuideLLMInfo(Format):
    timings: GuideLLMTimings | None = None
    error: str | None = None


class GuideLLMRequest(Format):
    info: GuideLLMInfo | None = None
    prompt_tokens: Count | None = None
    output_tokens: Count | None = None
    request_args: str | dict[str, Any] | None = None  # the request sent, as JSON text


class GuideLLMRequests(Format):
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


class GuideLLMMean(Format):
    mean: Finite | None = None


class GuideLLMByStatus(Format):
    successful: GuideLLMMean | None = None


class GuideLLMTotals(Format):
    successful: Count | None = None
    errored: Count | None = None


class GuideLLMMetrics(Format):
    request_totals: GuideLLMTotals | None = None
    output_tokens_per_second: GuideLLMByStatus | None = None
    requests_per_second: GuideLLMByStatus | None = None


class GuideLLMBackend(Format):
    model: str | None = None
    request_format: str | None = None  # the endpoint: /v1/completions, /v1/chat/completions


class GuideLLMStrategy(Format):
    """How the benchmark started requests: `synchronous` one at a time, `concurrent` in
    `streams`, `throughput` all at once, `constant` / `poisson` at `rate` per second."""

    type_: str | None = None
    streams: Count | None = None
    rate: Finite | None = None
    max_concurrency: Count | None = None  # at most this many in flight (throughput: as many)


class GuideLLMBenchmarkConfig(Format):
    run_index: Count | None = None  # its position in the run's strategies (a sweep's step)
    sample_size: Count | None = None
    backend: GuideLLMBackend | None = None
    strategy: GuideLLMStrategy | None = None


class GuideLLMBenchmark(Format):
    config: GuideLLMBenchmarkConfig | None = None
    metrics: GuideLLMMetrics | None = None
    requests: GuideLLMRequests | None = None
    duration: NonNegative | None = None


class GuideLLMSeed(Format):
    value: Int | None = None


class GuideLLMSpec(Format):
    backend: GuideLLMBackend | None = None
    profile: Any = None
    constraints: Any = None
    data: Any = None
    seed: GuideLLMSeed | None = None


class GuideLLMConfig(Format):
    spec: GuideLLMSpec | None = None


class GuideLLMMetadata(Format):
    guidellm_version: str | None = None


class GuideLLMReport(Format):
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

    @model_validator(mode="after")
    def _counts_listed(self) -> GuideLLMReport:
        """Each benchmark's request totals against the requests it lists, and its run_index
        one of its own."""
        errors: list[tuple[tuple[str | int, ...], str]] = []
        indices: set[int] = set()
        for i, bench in enumerate(self.benchmarks):
            totals = (bench.metrics and bench.metrics.request_totals) or GuideLLMTotals()
            requests = bench.requests or GuideLLMRequests()
            listed = {"successful": requests.successful or [], "errored": requests.errored or []}
            sampled = bench.config and bench.config.sample_size
            hint = f" (the report keeps a sample of {sampled}: run without sample_size)"
            errors += [
                (
                    ("benchmarks", i, "metrics", "request_totals", kind),
                    f"says {said}, but the report lists {len(items)} {kind} requests"
                    + (hint if sampled else ""),
                )
                for kind, items in listed.items()
                if (said := getattr(totals, kind)) is not None and said != len(items)
            ]
            index = bench.config.run_index if bench.config else None
            if index in indices:
                errors.append((("benchmarks", i, "config", "run_index"), f"{index} is another's"))
            indices.add(i if index is None else index)
        fail_at("GuideLLMReport", errors)
        return self


def read(path: Path, variant: str) -> Imported:
    """The first benchmark of the GuideLLM report at `path`, as `variant`'s results
    (`read_all`: each of a sweep's)."""
    report = read_format(path, GuideLLMReport)
    out = _benchmark(report, 0, path, variant, variant)
    out.notes.insert(
        0,
        f"{variant}: imported from {path.name} ({_tool(report)}, first of "
        f"{len(report.benchmarks)} benchmark(s))",
    )
    return out


def read_all(path: Path, variant: str) -> list[Imported]:
    """Every benchmark of the GuideLLM report at `path`, as `variant`'s results: several are a
    sweep (`--profile kind=sweep`, a list of rates), each benchmark a step of it, by its
    run_index, the tool's kind of strategy its kind (`levels` makes them load levels)."""
    report = read_format(path, GuideLLMReport)
    if len(report.benchmarks) == 1:
        return [read(path, variant)]
    out = []
    for i, bench in enumerate(report.benchmarks):
        config = bench.config or GuideLLMBenchmarkConfig()
        strategy = config.strategy or GuideLLMStrategy()
        imported = _benchmark(report, i, path, variant, f"{variant} at {_label(strategy)}")
        imported.step = i if config.run_index is None else config.run_index
        imported.step_kind = strategy.type_
        out.append(imported)
    out[0].notes.insert(
        0,
        f"{variant}: imported from {path.name} ({_tool(report)}): its {len(out)} benchmarks as "
        "the sweep's steps, by run_index",
    )
    spec = report.config.spec if report.config and report.config.spec else GuideLLMSpec()
    if isinstance(spec.profile, dict) and spec.profile.get("kind") == "sweep":
        out[0].notes.append(SWEEP)
    return out


SWEEP = (
    "GuideLLM's sweep profile sets its constant rates from what it measured of each arm (from "
    "its synchronous to its throughput rate): the arms' rates differ, so those steps are the "
    "sweep's, not one load"
)


def _tool(report: GuideLLMReport) -> str:
    return f"GuideLLM {report.metadata.guidellm_version if report.metadata else None}"


def _label(strategy: GuideLLMStrategy) -> str:
    """A strategy as GuideLLM's console names it: `synchronous`, `constant@14.29`."""
    kind = strategy.type_ or "strategy"
    if strategy.rate is not None:
        return f"{kind}@{strategy.rate:.2f}"
    bound = strategy.streams or strategy.max_concurrency
    return f"{kind}@{bound}" if bound and kind != "synchronous" else kind


def _benchmark(
    report: GuideLLMReport, index: int, path: Path, variant: str, about: str
) -> Imported:
    """Benchmark `index` of the report, as `variant`'s results; `about` names them in the
    notes of what holds for them alone."""
    bench = report.benchmarks[index]
    spec = report.config.spec if report.config and report.config.spec else GuideLLMSpec()
    bench_config = bench.config or GuideLLMBenchmarkConfig()
    model = (spec.backend and spec.backend.model) or (
        bench_config.backend and bench_config.backend.model
    )
    version = report.metadata.guidellm_version if report.metadata else None
    out = Imported(variant, "guidellm", model or None, version=version, source=path)
    out.notes.append(MAPPING)
    metrics = bench.metrics or GuideLLMMetrics()
    figures = headline(
        (
            "output_tokens_per_second (successful, mean)",
            _mean(metrics.output_tokens_per_second),
            "tok/s",
        ),
        ("requests_per_second (successful, mean)", _mean(metrics.requests_per_second), "req/s"),
        ("duration", bench.duration, "s"),
    )
    out.notes.append(f"{about}: GuideLLM's own figures: {figures}")
    requests = bench.requests or GuideLLMRequests()
    successful, errored = requests.successful or [], requests.errored or []
    for i, req in enumerate(successful):
        timings = (req.info and req.info.timings) or GuideLLMTimings()
        start, first, last = (
            timings.request_start,
            timings.first_token_iteration,
            timings.last_token_iteration,
        )
        if start is None or first is None or last is None:
            out.samples.append(sample(variant, i, None, [], None, "no token timings in report"))
            continue
        request = sample(variant, i, first - start, [last - first], req.output_tokens, None)
        request.chunk_tokens, request.chunks_complete = [], False  # first and last token only
        out.samples.append(request)
    for i, req in enumerate(errored, start=len(successful)):
        error = (req.info and req.info.error) or "errored request"
        out.samples.append(sample(variant, i, None, [], None, error))
    if errored:
        out.notes.append(f"{about}: {len(errored)} of {len(out.samples)} requests errored")
    incomplete = requests.incomplete or []
    if incomplete:
        out.notes.append(
            f"{about}: {len(incomplete)} incomplete request(s) (cancelled when the benchmark "
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
    backend = spec.backend or bench_config.backend or GuideLLMBackend()
    out.said = {
        **_schedule(bench_config.strategy or GuideLLMStrategy()),
        **({"api": API[backend.request_format]} if backend.request_format in API else {}),
        **_asked([_body(req) for req in (*successful, *errored)]),
    }
    out.dataset = _dataset(spec)
    for key in ("input_tokens", "output_tokens"):
        field = "prompt_tokens" if key == "input_tokens" else "output_tokens"
        counts = [n for req in successful if (n := getattr(req, field)) is not None]
        if (found := token_counts(counts)) is not None:
            out.tokens[key] = found
    return out


API = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}


def _schedule(strategy: GuideLLMStrategy) -> dict[str, Any]:
    """The concurrency and request rate a GuideLLM strategy sends at (concurrency None: not a
    fixed number in flight), and at a rate the arrival process."""
    kind = strategy.type_
    if kind == "synchronous":
        return {"concurrency": 1, "request_rate": "inf"}
    if kind == "concurrent" and strategy.streams:
        return {"concurrency": strategy.streams, "request_rate": "inf"}
    if kind == "throughput":  # as many in flight as it may: its bound is its concurrency
        return {"concurrency": strategy.max_concurrency, "request_rate": "inf"}
    if kind in ("constant", "poisson") and strategy.rate is not None and strategy.rate > 0:
        return {"concurrency": None, "request_rate": strategy.rate, "arrivals": {"process": kind}}
    return {}


def _body(request: GuideLLMRequest) -> dict[str, Any] | None:
    """The JSON body a GuideLLM request sent (None: not kept)."""
    args: Any = request.request_args
    if isinstance(args, str):
        try:  # pydantic-core's parser: a nesting limit, no RecursionError
            args = pydantic_core.from_json(args)
        except ValueError:
            return None
    body = args.get("body") if isinstance(args, dict) else None
    return body if isinstance(body, dict) else None


def _asked(bodies: list[dict[str, Any] | None]) -> dict[str, Any]:
    """What every request asked for: its output length, ignore_eos (false where not sent: the
    server's default), temperature and how it asked for token counts. A setting not sent (the
    server's default, which the report does not say) or that the requests differ in is None;
    nothing is said where a request's body was not kept, or a value is not one of its type."""
    if not bodies or None in bodies:
        return {}
    sent = [b for b in bodies if b is not None]
    said: dict[str, list[Any]] = {
        "max_tokens": [b.get("max_tokens", b.get("max_completion_tokens")) for b in sent],
        "ignore_eos": [b.get("ignore_eos", False) for b in sent],
        "temperature": [b.get("temperature") for b in sent],
        "usage": [_usage(b.get("stream_options")) for b in sent],
    }
    out = {}
    for key, values in said.items():
        if not all(v is None or _typed(key, v) for v in values):
            continue
        seen = {json.dumps(v) for v in values}
        out[key] = values[0] if len(seen) == 1 else None
    return out


def _typed(key: str, value: Any) -> bool:
    """Whether a request's setting is a value of its `Workload` field's type."""
    if key == "max_tokens":
        return type(value) is int and 1 <= value <= MAX_TOKENS
    if key == "ignore_eos":
        return type(value) is bool
    if key == "temperature":
        return type(value) in (int, float) and math.isfinite(value) and value >= 0
    return value in ("continuous", "final")


def _usage(options: Any) -> str | None:
    """How a request asked for token counts: on every chunk, at the end, or not at all (None)."""
    if not isinstance(options, dict) or options.get("include_usage") is not True:
        return None
    return "continuous" if options.get("continuous_usage_stats") is True else "final"


def _dataset(spec: GuideLLMSpec) -> str | None:
    """The data GuideLLM sent, in words: each source's kind and settings, and the seed."""
    if not isinstance(spec.data, list) or not spec.data:
        return None
    parts = []
    for source in spec.data:
        if not isinstance(source, dict):
            return None
        settings = {
            # a file by its name: no machine's absolute path on a published record
            k: Path(v).name if k == "path" and isinstance(v, str) else v
            for k, v in sorted(source.items())
            if k not in ("kind", "load_kwargs") and v
        }
        words = ", ".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in settings.items())
        parts.append(
            f"{source.get('kind', 'data')} ({words})" if words else str(source.get("kind"))
        )
    seed = spec.seed.value if spec.seed else None
    return f"GuideLLM {'; '.join(parts)}" + (f", seed {seed}" if seed is not None else "")


def _mean(by_status: GuideLLMByStatus | None) -> float | None:
    return by_status.successful.mean if by_status and by_status.successful else None


def _prompt_sent(request: GuideLLMRequest) -> Any:
    """The prompt a GuideLLM request sent: its body's prompt or messages (None: not kept)."""
    body = _body(request)
    return None if body is None else body.get("prompt", body.get("messages"))


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
