"""`vllm bench serve --save-result` files (`--save-detailed`: per request) as evidence.

Tokens are what chunks carry, never chunks; a chat stream's first token is one gap after the
role-only chunk (`LEADING_CHUNKS`). See docs/design.md, "Other tools' results".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from kbgen.kb.models import MetricName, TokenCounts, fail_at
from kbgen.kb.numbers import Count, Finite, NonNegative
from kbgen.record.importers.imported import (
    Imported,
    headline,
    no_split,
    sample,
    token_counts,
)
from kbgen.record.importers.reading import MAX_REQUESTS, Format, read_format
from kbgen.run.spec import MAX_TIMEOUT_S

# our metric <- the suffix of vllm bench's mean_/median_/p99_/std_ keys; its ITL is a chunk gap
SUMMARIES: tuple[tuple[MetricName, str], ...] = (
    ("ttft_ms", "ttft_ms"),
    ("tpot_ms", "tpot_ms"),
    ("chunk_gap_ms", "itl_ms"),
    ("e2e_ms", "e2el_ms"),
)
MAPPING = (
    "vllm bench serve's metrics as kbgen names them: TTFT is ttft_ms, TPOT is tpot_ms (both "
    "(E2E - TTFT) / (N - 1)), E2EL is e2e_ms; its ITL is the gap between stream chunks, kept as "
    "chunk_gap_ms, and becomes the per-token itl_ms only when every chunk held one token; "
    "decode_tok_s is (N - 1) / (E2E - TTFT) per request"
)
CHAT = (
    "vllm bench serve's chat API (openai-chat) times its TTFT at vLLM's first chunk, which holds "
    "only the role; kbgen's ttft_ms is at the next chunk (TTFT + the first ITL), the first that "
    "carries a token, and its tpot_ms and decode_tok_s follow from that TTFT"
)
# the tool's own per-request list keys in a `vllm bench serve --save-detailed` file
LISTS = ("ttfts", "output_lens", "itls", "errors", "input_lens", "latencies")
# How many leading chunks carry no token, by `vllm bench serve --backend` (its request functions
# in vllm/benchmarks/lib/endpoint_request_func.py, 0.32 and the older ones read): it times TTFT
# at the first chunk with choices and an ITL at each later one. vLLM's chat stream opens with a
# role-only chunk, so a chat request of N tokens one per chunk has N ITLs, a completion N - 1.
# Backends not listed: which chunks carry tokens is not known, and no per-token ITL is claimed.
LEADING_CHUNKS = {"vllm": 0, "openai": 0, "openai-chat": 1}
# The OpenAI endpoint of each of those backends; each asks for usage at the end of its stream
API = {"vllm": "completions", "openai": "completions", "openai-chat": "chat"}
UNSAID = (
    "vllm bench serve's file keeps neither its version, its dataset, nor the temperature, output "
    "length (max_tokens) and ignore_eos it asked for"
)

Rate = Annotated[Finite, Field(ge=0, le=1)]
# A latency of one request, in seconds: no request is timed past the longest timeout a spec may
# set (a week); larger ones are not timings, and overflow the nanoseconds of a sample.
Seconds = Annotated[Finite, Field(ge=0, le=MAX_TIMEOUT_S)]


class VllmBenchResult(Format):
    """`vllm bench serve --save-result` (`--save-detailed`: the per-request lists too)."""

    model_id: str | None = None
    completed: Count
    failed: Count | None = None
    num_prompts: Count | None = None
    max_concurrency: Annotated[Count, Field(ge=1)] | None = None  # None: no bound
    request_rate: Finite | str | None = None  # "inf" for as fast as possible
    burstiness: Finite | None = None
    total_input_tokens: Count | None = None
    total_output_tokens: Count | None = None
    backend: str | None = None
    output_throughput: NonNegative | None = None
    request_throughput: NonNegative | None = None
    duration: NonNegative | None = None
    mean_ttft_ms: NonNegative
    median_ttft_ms: NonNegative | None = None
    p90_ttft_ms: NonNegative | None = None  # with --metric-percentiles 90,99
    p99_ttft_ms: NonNegative | None = None
    std_ttft_ms: NonNegative | None = None
    mean_tpot_ms: NonNegative | None = None
    median_tpot_ms: NonNegative | None = None
    p90_tpot_ms: NonNegative | None = None  # with --metric-percentiles 90,99
    p99_tpot_ms: NonNegative | None = None
    std_tpot_ms: NonNegative | None = None
    mean_itl_ms: NonNegative | None = None
    median_itl_ms: NonNegative | None = None
    p90_itl_ms: NonNegative | None = None  # with --metric-percentiles 90,99
    p99_itl_ms: NonNegative | None = None
    std_itl_ms: NonNegative | None = None
    mean_e2el_ms: NonNegative | None = None
    median_e2el_ms: NonNegative | None = None
    p90_e2el_ms: NonNegative | None = None  # with --metric-percentiles 90,99
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
            for key in LISTS:
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
        if not errors:  # the counts, against lists that agree with each other
            errors = self._counts_listed()
        fail_at("VllmBenchResult", errors)
        return self

    def _counts_listed(self) -> list[tuple[tuple[str | int, ...], str]]:
        """The completed and failed counts against the per-request lists (when it has them)."""
        if self.ttfts is None or self.output_lens is None:
            return []
        n = len(self.ttfts)
        listed = zip(self.errors or [None] * n, self.ttfts, self.output_lens, strict=True)
        ok = sum(_error(error, ttft, length) is None for error, ttft, length in listed)
        said = {
            "completed": self.completed,
            "failed": n - ok if self.failed is None else self.failed,
        }
        held = {"completed": ok, "failed": n - ok}
        return [
            (
                (key,),
                f"says {said[key]}, but its per-request lists hold {held[key]} "
                f"({held['completed']} completed, {held['failed']} failed)",
            )
            for key in said
            if said[key] != held[key]
        ]


def _said(result: VllmBenchResult) -> dict[str, Any]:
    """The workload's settings the file states: its concurrency (None: unbounded), request rate
    and arrival process, endpoint and how it asked for token counts."""
    said: dict[str, Any] = {}
    if "max_concurrency" in result.model_fields_set:
        said["concurrency"] = result.max_concurrency
    rate = result.request_rate
    if rate == "inf" or (isinstance(rate, float) and rate > 0):
        said["request_rate"] = rate
    if isinstance(rate, float) and rate > 0:  # open loop: gamma gaps of shape --burstiness
        shape = result.burstiness if result.burstiness is not None else 1.0
        gamma = {"process": "gamma", "burstiness": shape}
        said["arrivals"] = {"process": "poisson"} if shape == 1.0 else gamma
    if result.backend in API:
        said["api"] = API[result.backend]
        said["usage"] = "final"  # 0.26–0.32: include_usage, at the end of each stream only
    return said


def _error(error: str | None, ttft: float | None, output_len: int | None) -> str | None:
    """Why a request failed, or None. vLLM writes the HTTP reason as the error, which can be
    empty; a failed request also has ttft 0 and output length 0, a successful one never ttft 0
    (it is timed at its first chunk)."""
    if error:
        return error
    if not ttft:
        return f"failed with an empty error text (ttft {ttft}, output length {output_len})"
    return None


def read(path: Path, variant: str, about: str | None = None) -> Imported:
    """The JSON of `vllm bench serve --save-result` (with `--save-detailed`: per request);
    `about` names these results in the notes of what holds for them alone (the variant's name;
    one run of a sweep: which)."""
    result = read_format(path, VllmBenchResult)
    about = about or variant
    out = Imported(variant, "vllm bench serve", result.model_id, source=path)
    out.workload = {
        k: getattr(result, k)
        for k in ("num_prompts", "total_input_tokens", "backend", "burstiness")
    }
    out.said = _said(result)
    out.notes.append(f"{about}: imported from {path.name} (vllm bench serve)")
    out.notes.append(MAPPING)  # the same for every variant: one note
    out.notes.append(UNSAID)
    if out.said.get("concurrency", 0) is None:
        out.notes.append(
            f"{about}: run without --max-concurrency: how many requests were in flight was not "
            "bounded (concurrency unknown)"
        )
    figures = headline(
        ("output throughput", result.output_throughput, "tok/s"),
        ("request throughput", result.request_throughput, "req/s"),
        ("duration", result.duration, "s"),
    )
    failed = "unknown" if result.failed is None else result.failed
    out.notes.append(
        f"{about}: vllm bench serve's own figures: {figures} ({result.completed} completed, "
        f"{failed} failed)"
    )
    if result.ttfts is not None and result.output_lens is not None:
        _requests(result, out, about)
    else:
        out.notes.append(
            f"{variant}: no per-request samples (run with --save-detailed): no confidence interval"
        )
        for metric, key in SUMMARIES:
            reported = {
                "n": result.completed,
                "mean": getattr(result, f"mean_{key}"),
                "median": getattr(result, f"median_{key}"),
                "p90": getattr(result, f"p90_{key}"),
                "p99": getattr(result, f"p99_{key}"),
                "stdev": getattr(result, f"std_{key}"),
            }
            if reported["mean"] is not None:
                out.stats[metric] = {k: v for k, v in reported.items() if v is not None}
        for key, total in (
            ("input_tokens", result.total_input_tokens),
            ("output_tokens", result.total_output_tokens),
        ):
            if total is not None and result.completed:
                out.tokens[key] = TokenCounts(n=result.completed, mean=total / result.completed)
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


def _requests(result: VllmBenchResult, out: Imported, about: str) -> None:
    """The per-request lists of a `--save-detailed` file as samples."""
    ttfts, lengths = result.ttfts or [], result.output_lens or []
    n = len(ttfts)
    itls = result.itls or [[] for _ in range(n)]
    errors = result.errors or [None] * n
    variant = out.variant
    leading = LEADING_CHUNKS.get(result.backend or "")
    for i, (ttft, gaps, length, error) in enumerate(zip(ttfts, itls, lengths, errors, strict=True)):
        failed = _error(error, ttft, length)
        gaps = list(gaps or [])
        tokenless = len(gaps) < (leading or 0)  # a stream of the role chunk alone
        if leading and ttft is not None and not tokenless:
            # the first token came in the chunk after the role-only one
            ttft, gaps = ttft + sum(gaps[:leading]), gaps[leading:]
        request = sample(variant, i, ttft, gaps, length, failed)
        if tokenless:  # its TTFT is the tool's, at a chunk that held no token: none is counted
            request.chunk_tokens = []
        out.samples.append(request)
    out.in_order_sent = True  # the tool gathers its results in the order it sent the requests
    ok = sum(s.ok for s in out.samples)
    if n - ok:
        out.notes.append(f"{about}: {n - ok} of {n} requests failed")
    if leading is None:
        for s in out.samples:
            s.chunk_tokens = []
        out.notes.append(
            f"{variant}: backend {result.backend!r}: which of its chunks carry tokens is not "
            "known: no per-token ITL for this variant (chunk gaps kept)"
        )
    elif leading:
        out.notes.append(CHAT)
    several = sum(1 for s in out.samples if s.ok and not s.chunk_tokens)
    if several and leading is not None:
        # The rest are the requests whose chunks each held one token — the slowest under
        # speculative decoding: a per-token ITL of them alone would be biased, so none at all.
        for s in out.samples:
            s.chunk_tokens = []
        out.notes.append(
            f"{about}: in {several} of {ok} requests the chunks did not hold one token each "
            "(vllm bench does not say how many each held): no per-token ITL for this variant "
            "(chunk gaps kept)"
        )
    if result.input_lens and None not in result.input_lens:
        out.prompt_keys = [f"{i}:{length}" for i, length in enumerate(result.input_lens)]
        out.prompt_evidence = "input length"
    done = [s.ok for s in out.samples]
    for key, listed in (("input_tokens", result.input_lens), ("output_tokens", lengths)):
        counted = [n for n, ok in zip(listed or [], done, strict=False) if ok and n is not None]
        if (found := token_counts(counted)) is not None:
            out.tokens[key] = found
