"""Server-side truth from vLLM's Prometheus `/metrics`: counter deltas over a window.

Parsed with prometheus_client's text parser, never by hand. Counters are summed over label sets
(vLLM labels each engine) after filtering on `model_name`; the window's delta is after − before.
From the deltas come the speculative-decoding figures vLLM itself logs: acceptance rate
(accepted / drafted), mean acceptance length (1 + accepted / drafts, bonus token included) and
the acceptance rate at each draft position (accepted at position i / drafts).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kbgen.errors import MetricsError

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


def window(before: Snapshot, after: Snapshot, model: str | None = None) -> dict[str, Any]:
    """Counter deltas between two scrapes, and the speculative-decoding figures they give.

    Speculative-decoding keys are present only when the server exports those counters (vLLM
    does only when speculation is on).
    """

    def delta(name: str, **labels: str) -> float | None:
        end = _total(after, name, model, **labels)
        start = _total(before, name, model, **labels)
        if end is None:
            return None
        return end - (start or 0.0)

    out: dict[str, Any] = {
        "generation_tokens": delta(GENERATION),
        "prompt_tokens": delta(PROMPT),
        "preemptions": delta(PREEMPTIONS),
        "requests_finished": {
            reason: delta(SUCCESS, finished_reason=reason)
            for reason in _label_values(after, SUCCESS, "finished_reason")
        },
    }
    drafts = delta(DRAFTS)
    if drafts is None:
        return out
    draft_tokens = delta(DRAFT_TOKENS) or 0.0
    accepted = delta(ACCEPTED) or 0.0
    per_position = [
        delta(ACCEPTED_PER_POS, position=pos) or 0.0
        for pos in _label_values(after, ACCEPTED_PER_POS, "position")
    ]
    out["spec_decode"] = {
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "accepted_per_position": per_position,
        **acceptance(drafts, draft_tokens, accepted, per_position),
    }
    return out


def acceptance(
    drafts: float, draft_tokens: float, accepted: float, per_position: list[float]
) -> dict[str, Any]:
    """The speculative-decoding figures of counter deltas, None where a divisor is zero:
    acceptance rate, mean acceptance length and acceptance rate per draft position."""
    return {
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "per_position_acceptance": [a / drafts for a in per_position] if drafts else None,
    }
