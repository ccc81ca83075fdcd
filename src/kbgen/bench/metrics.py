"""Server-side truth from vLLM's Prometheus `/metrics`: counter deltas over a window.

Parsed with prometheus_client's text parser, never by hand; the speculative-decoding figures
are those vLLM itself logs (docs/design.md, "The server's own figures").
"""

from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

from kbgen.errors import InvalidInput, MetricsError, Problem
from kbgen.run.counters import Counters, SpecDecodeCounters
from kbgen.run.folder import RunFolder

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
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"


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


def read(folder: RunFolder, relative: str) -> Snapshot:
    """A `/metrics` snapshot named in run.json (relative to the run folder), parsed; one that
    does not parse is a problem at its file."""
    path, text = folder.read_metrics(relative)
    try:
        return parse(text)
    except MetricsError as exc:
        raise InvalidInput([Problem(path, None, "", str(exc))]) from exc


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


def block_size(snapshot: Snapshot) -> int | None:
    """The KV-cache block size vLLM says it runs with (`vllm:cache_config_info`), if it does."""
    for key in snapshot.get("vllm:cache_config_info", {}):
        size = dict(key).get("block_size", "")
        if size.isdigit() and int(size) > 0:
            return int(size)
    return None


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
    queries, hits = delta_(PREFIX_QUERIES), delta_(PREFIX_HITS)
    if queries is not None and hits is not None:  # set only where the server counts them
        counters.prefix_cache_queries, counters.prefix_cache_hits = queries, hits
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
