"""Server-side truth from vLLM's Prometheus `/metrics`: counter deltas over a window.

Parsed with prometheus_client's text parser, never by hand; the speculative-decoding figures
are those vLLM itself logs (docs/design.md, "The server's own figures").
"""

from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from kbgen.bench.machine import MachineLoad
from kbgen.errors import MetricsError
from kbgen.kb import numbers
from kbgen.kb.models import Model
from kbgen.kb.numbers import Bool, Finite, NonNegative

# sample name -> frozenset of (label, value) -> value
Snapshot = dict[str, dict[frozenset[tuple[str, str]], float]]

GENERATION = "vllm:generation_tokens_total"
PROMPT = "vllm:prompt_tokens_total"
SUCCESS = "vllm:request_success_total"
PREEMPTIONS = "vllm:num_preemptions_total"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def parse(text: str) -> Snapshot:
    """Every sample of a Prometheus text exposition, by name and label set."""
    snapshot: Snapshot = defaultdict(dict)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = frozenset(sample.labels.items())
                snapshot[sample.name][labels] = float(sample.value)
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsError(f"/metrics is not Prometheus text: {exc}") from exc
    return dict(snapshot)


def _total(snapshot: Snapshot, name: str, model: str | None, **labels: str) -> float | None:
    series = snapshot.get(name)
    if series is None:
        return None
    wanted = set(labels.items())
    return sum(
        value
        for key, value in series.items()
        if wanted <= key
        and (model is None or ("model_name", model) in key or not _has(key, "model_name"))
    )


def _has(key: frozenset[tuple[str, str]], label: str) -> bool:
    return any(name == label for name, _ in key)


def _label_values(snapshot: Snapshot, name: str, label: str) -> list[str]:
    return sorted(
        {value for key in snapshot.get(name, {}) for name_, value in key if name_ == label},
        key=lambda v: (len(v), v),
    )


# A counter's delta: a float from the scrapes, an int where an importer read one. Kept as it
# came, so a samples file is written back byte for byte; never negative, never NaN.
Count = numbers.Count | NonNegative


class SpecDecodeCounters(Model):
    """Speculative-decoding counter deltas of a window, and the figures vLLM logs from them.

    The figures are None where their divisor is zero; an import that has only the counters
    leaves them out.
    """

    drafts: Count = Field(description="Draft steps (`vllm:spec_decode_num_drafts`).")
    draft_tokens: Count = Field(description="Tokens proposed.")
    accepted_tokens: Count = Field(description="Tokens accepted.")
    accepted_per_position: list[Count] = Field(
        description="Tokens accepted at each draft position, position 0 first."
    )
    acceptance_rate: Finite | None = Field(
        default=None, description="accepted_tokens / draft_tokens."
    )
    mean_acceptance_length: Finite | None = Field(
        default=None, description="1 + accepted_tokens / drafts, the bonus token included."
    )
    per_position_acceptance: list[Finite] | None = Field(
        default=None, description="accepted_per_position / drafts, position by position."
    )

    @classmethod
    def of(
        cls, drafts: Count, draft_tokens: Count, accepted: Count, per_position: list[Count]
    ) -> SpecDecodeCounters:
        """The counters with their figures."""
        return cls(
            drafts=drafts,
            draft_tokens=draft_tokens,
            accepted_tokens=accepted,
            accepted_per_position=per_position,
            acceptance_rate=accepted / draft_tokens if draft_tokens else None,
            mean_acceptance_length=1 + accepted / drafts if drafts else None,
            per_position_acceptance=[a / drafts for a in per_position] if drafts else None,
        )


class Counters(Model):
    """The server's counter deltas over one measurement window, and the token cross-check.

    Written as set: a field not given is not written (`model_dump(exclude_unset=True)`), so a
    window read from a file is written back unchanged. `window` sets the deltas, and
    `spec_decode` only when the server exports those counters (vLLM does only when speculation
    is on); the run's totals add the cross-check; an import may have only `spec_decode`.
    """

    generation_tokens: Count | None = Field(
        default=None, description="Tokens generated (None: the server does not export it)."
    )
    prompt_tokens: Count | None = Field(default=None, description="Prompt tokens processed.")
    preemptions: Count | None = Field(default=None, description="Requests preempted.")
    requests_finished: dict[str, Count | None] = Field(
        default_factory=dict, description="Requests finished, by vLLM's finished_reason."
    )
    spec_decode: SpecDecodeCounters | None = Field(
        default=None, description="Speculative-decoding counters, when the server has them."
    )
    client_output_tokens: numbers.Count | None = Field(
        default=None, description="Output tokens the client counted over the same window."
    )
    tokens_match: Bool | None = Field(
        default=None, description="Whether generation_tokens equals client_output_tokens."
    )
    load: MachineLoad | None = Field(
        default=None, description="How busy the machine was during the window (None: unknown)."
    )
    round: numbers.Count | None = Field(
        default=None, description="Round of the interleaved design (None: one round)."
    )
    level: numbers.Count | None = Field(
        default=None, description="A sweep's load level (None: one load)."
    )
    window_s: NonNegative | None = Field(
        default=None,
        description="The window's length, first send to last completion, in seconds: the "
        "denominator of its aggregate output throughput.",
    )


def delta(
    before: Snapshot, after: Snapshot, name: str, model: str | None = None, **labels: str
) -> float | None:
    """How much a counter (or a histogram's `_sum` or `_count`) grew between two scrapes, summed
    over its label sets; None when the server does not export it."""
    end = _total(after, name, model, **labels)
    start = _total(before, name, model, **labels)
    if end is None:
        return None
    value = end - (start or 0.0)
    if not math.isfinite(value) or value < 0:  # a counter only grows
        series = name + "".join(f" {k}={v}" for k, v in labels.items())
        raise MetricsError(
            f"/metrics: counter {series} went from {start} to {end} over a window "
            "(a counter never falls and is a number: did the server restart?)"
        )
    return value


def window(before: Snapshot, after: Snapshot, model: str | None = None) -> Counters:
    """Counter deltas between two scrapes, and the speculative-decoding figures they give."""

    def delta_(name: str, **labels: str) -> float | None:
        return delta(before, after, name, model, **labels)

    counters = Counters(
        generation_tokens=delta_(GENERATION),
        prompt_tokens=delta_(PROMPT),
        preemptions=delta_(PREEMPTIONS),
        requests_finished={
            reason: delta_(SUCCESS, finished_reason=reason)
            for reason in _label_values(after, SUCCESS, "finished_reason")
        },
    )
    drafts = delta_(DRAFTS)
    if drafts is None:
        return counters
    counters.spec_decode = SpecDecodeCounters.of(
        drafts,
        delta_(DRAFT_TOKENS) or 0.0,
        delta_(ACCEPTED) or 0.0,
        [
            delta_(ACCEPTED_PER_POS, position=pos) or 0.0
            for pos in _label_values(after, ACCEPTED_PER_POS, "position")
        ],
    )
    return counters
