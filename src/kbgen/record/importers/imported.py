"""What an importer returns: one variant's samples or statistics, its setup, and the notes.

What a file lacks stays missing — no per-class split becomes one class `all`, no per-request
samples means no confidence interval, a setting it does not keep is not in `said` — and the
notes travel into the record's provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbgen.kb.models import MetricName, TokenCounts
from kbgen.run.samples import Sample

ALL = "all"
S = 1_000_000_000  # ns per second


@dataclass
class Imported:
    """One variant's results from another tool."""

    variant: str
    tool: str
    model: str | None
    version: str | None = None  # the tool's, where its file keeps it
    samples: list[Sample] = field(default_factory=list)
    stats: dict[MetricName, dict[str, float]] = field(default_factory=dict)  # metric -> n, mean…
    # the tool's own speculative-decoding counters, as metrics.window() reports them
    spec_decode: dict[str, Any] | None = None
    output_tokens: int | None = None  # the tool's output token total over the same window
    workload: dict[str, Any] = field(default_factory=dict)  # what must match across variants
    # The workload's settings the file states, by `Workload` field (what must match across
    # variants too): a field it does not state is absent; None, a value it states but kbgen's
    # workload has none for (`vllm bench serve` without --max-concurrency: unbounded).
    said: dict[str, Any] = field(default_factory=dict)
    dataset: str | None = None  # the prompts it sent, as the file describes them
    # prompt and output tokens per successful request, as the tool counted them
    tokens: dict[str, TokenCounts] = field(default_factory=dict)
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
    # One part of a sweep: the step of the tool's sweep it was sent at (GuideLLM's run_index, a
    # bench combination of `vllm bench sweep serve`) and the tool's kind of step, and which of
    # the tool's repeated runs it is; None: the import's one. `levels` makes the record's load
    # levels of the steps, and sets `level`, the step's index in them.
    step: int | None = None
    step_kind: str | None = None
    round: int | None = None
    level: int | None = None


def sample(
    variant: str,
    index: int,
    ttft_s: float | None,
    gaps_s: list[float],
    output_tokens: int | None,
    error: str | None,
) -> Sample:
    """A request from relative timings: sent at 0, first token at TTFT, then the chunk gaps."""
    out = Sample(
        variant=variant, prompt_class=ALL, prompt_index=index, repeat=0, scheduled_ns=0, sent_ns=0
    )
    if error or ttft_s is None:
        out.error = error or "no first token"
        return out
    times = [round(ttft_s * S)]
    for gap in gaps_s:
        times.append(times[-1] + round(gap * S))
    out.chunk_ns, out.done_ns, out.output_tokens = times, times[-1], output_tokens
    # Per-chunk token counts are known only when every chunk carried one token.
    out.chunk_tokens = [1] * len(times) if output_tokens == len(times) else []
    return out


def no_split(variant: str) -> str:
    """The note of an import whose requests all have one class (no --prompts)."""
    return f"{variant}: no per-class split (one class `{ALL}`)"


def headline(*figures: tuple[str, float | None, str]) -> str:
    """`name value unit, …` for the figures the tool reported, 6 significant digits."""
    shown = [f"{name} {value:.6g} {unit}" for name, value, unit in figures if value is not None]
    return ", ".join(shown) or "none reported"


def token_counts(counts: list[int]) -> TokenCounts | None:
    """Tokens per request from each request's count (None: none counted)."""
    if not counts:
        return None
    return TokenCounts(
        n=len(counts), mean=sum(counts) / len(counts), min=min(counts), max=max(counts)
    )
