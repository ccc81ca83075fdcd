"""One measured request, as kept in a run's `samples.jsonl`, and the metrics derived from it.

A sample keeps raw timestamps and every chunk's token count, so every figure can be recomputed;
the definitions: docs/design.md, "Samples and what is derived from them".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kbgen.kb.numbers import MAX_TOKENS, Bool, Count, Int


class Sample(BaseModel):
    """One request of a run: where it belongs, when things happened, and how it ended."""

    model_config = ConfigDict(extra="forbid")

    variant: str = Field(description="Variant (server configuration) it was sent to.")
    prompt_class: str = Field(description="Class of its prompt.")
    prompt_index: Count = Field(description="Index of the prompt within the suite's class.")
    repeat: Int = Field(description="Repeat number, from 0; warm-up requests are not samples.")
    round: Count | None = Field(
        default=None,
        description="Round of the interleaved design it belongs to, from 0 (arms alternate round "
        "by round); None in a run without rounds, which is one round (0).",
    )
    level: Count | None = Field(
        default=None,
        description="A sweep's load level it was sent at, an index into the spec's loads; None "
        "in a run of one load (level 0).",
    )
    attempt: Count = Field(
        default=0, description="Which run of the folder sent it: 0 first, 1 the first resume."
    )
    block: Count | None = Field(
        default=None,
        description="The block (one machine's own interleaved sequence of every arm) of a run "
        "spread over several machines, from 0; None on one machine. Arms pair within a block.",
    )
    prefix: Count | None = Field(
        default=None,
        description="The shared prefix it was sent with, an index into run.json's prefixes; "
        "None: none.",
    )
    scheduled_ns: Int = Field(description="When the request was due to be sent.")
    on_schedule: Bool | None = Field(
        default=None,
        description="Sent open loop, at a request rate: `scheduled_ns` is its time in the "
        "schedule, and its TTFT and end-to-end latency count from then (the wait for a free "
        "slot included: no coordinated omission); None: sent as soon as a stream was free.",
    )
    ready_ns: Int | None = Field(
        default=None,
        description="Sent open loop: when a sender slot took the request (a slot free under "
        "`concurrency`); later than `scheduled_ns` when it waited for one. None: not kept "
        "(sent as soon as a stream was free, or by a run before it was kept).",
    )
    sent_ns: Int = Field(
        description="When the request was written to its connection (aiohttp's trace), so that "
        "a client busy opening connections or behind in its own loop counts as lag; where the "
        "transport cannot tell, and in runs before 2026-12-07, just before the client began it."
    )
    chunk_ns: list[Int] = Field(
        default_factory=list, description="Arrival time of every token-bearing stream chunk."
    )
    chunk_tokens: list[Count] = Field(
        default_factory=list,
        description="Generated tokens in each of those chunks (from continuous usage stats).",
    )
    chunks_complete: Bool = Field(
        default=True,
        description="False when `chunk_ns` holds only the first and last token times (an import "
        "from a tool that keeps no more): then there are no chunk gaps or ITLs.",
    )
    done_ns: Int | None = Field(default=None, description="When the stream ended.")
    prompt_tokens: Count | None = Field(default=None, description="Prompt tokens (server usage).")
    output_tokens: Count | None = Field(default=None, description="Generated tokens (usage).")
    output_hash: str | None = Field(
        default=None,
        description="First 16 hex digits of the SHA-256 of the generated text: tells whether two "
        "arms generated the same output for a prompt.",
    )
    error: str | None = Field(default=None, description="Why the request failed; None if ok.")

    @model_validator(mode="after")
    def _tokens_bounded(self) -> Sample:
        # the per-token ITL has one value per token: a count past any output is no count
        if sum(self.chunk_tokens) > MAX_TOKENS:
            raise ValueError(f"chunk_tokens sum past {MAX_TOKENS:,} tokens (max_tokens' limit)")
        return self

    @model_validator(mode="after")
    def _in_order(self) -> Sample:
        # a chunk before the request was sent, or before the one before it, is a negative
        # latency; counts for some chunks only would be zipped short, silently
        times = [self.sent_ns, *self.chunk_ns, *([] if self.done_ns is None else [self.done_ns])]
        if times != sorted(times):
            raise ValueError("times out of order: sent_ns <= chunk_ns, in order, <= done_ns")
        if self.ready_ns is not None and self.ready_ns > self.sent_ns:
            raise ValueError("times out of order: ready_ns <= sent_ns")
        if self.chunk_tokens and len(self.chunk_tokens) != len(self.chunk_ns):
            raise ValueError(
                f"chunk_tokens holds {len(self.chunk_tokens)} counts for "
                f"{len(self.chunk_ns)} chunk_ns"
            )
        return self

    @property
    def ok(self) -> bool:
        return self.error is None

    def metrics(self) -> dict[str, Any]:
        """Per-request figures: latencies in ms, rates in tokens/s; lists for ITL and gaps."""
        return request_metrics(self)


def on_schedule(sample: Sample) -> Sample:
    """`sample` as an open loop sends it: at its scheduled time."""
    return sample.model_copy(update={"on_schedule": True})


def request_metrics(sample: Sample) -> dict[str, Any]:
    """TTFT, E2E, TPOT, decode rate, per-token ITL and chunk gaps of one successful request.

    A request sent on a schedule counts TTFT and E2E from its scheduled time, and keeps them
    from its send too (`ttft_sent_ms`, `e2e_sent_ms`). The time between the two is the wait
    for a free slot under `concurrency` (`slot_wait_ms`: the load's queue at the client) and
    the client's own lag (`lag_ms`: a slot free, the request not yet sent), `schedule_lag_ns`.
    """
    if not sample.ok or not sample.chunk_ns:
        return {}
    ms = 1e-6
    since = sample.scheduled_ns if sample.on_schedule else sample.sent_ns
    ttft = (sample.chunk_ns[0] - since) * ms
    e2e = (sample.chunk_ns[-1] - since) * ms
    n = sample.output_tokens if sample.output_tokens is not None else sum(sample.chunk_tokens)
    out: dict[str, Any] = {"ttft_ms": ttft, "e2e_ms": e2e, "output_tokens": n}
    if sample.on_schedule:
        wait, lag = (x * ms for x in schedule_lag_ns(sample))
        out |= {"ttft_sent_ms": ttft - wait - lag, "e2e_sent_ms": e2e - wait - lag}
        out |= {"slot_wait_ms": wait, "lag_ms": lag}
    if n > 1 and e2e > ttft:
        out["tpot_ms"] = (e2e - ttft) / (n - 1)
        out["decode_tok_s"] = (n - 1) / ((e2e - ttft) / 1000)
    if not sample.chunks_complete:
        return out
    gaps = [
        (later - earlier) * ms
        for earlier, later in zip(sample.chunk_ns, sample.chunk_ns[1:], strict=False)
    ]
    out["chunk_gap_ms"] = gaps
    out["itl_ms"] = [
        gap / tokens
        for gap, tokens in zip(gaps, sample.chunk_tokens[1:], strict=False)
        for _ in range(tokens)
    ]
    return out


def schedule_lag_ns(sample: Sample) -> tuple[int, int]:
    """An open-loop request's delay from its scheduled time to its send, in two: the wait for
    a free slot (from the scheduled time to when a slot took it, none if one was free), and
    the client's own lag after that. Without `ready_ns`, all of it is the client's lag."""
    ready = sample.scheduled_ns if sample.ready_ns is None else sample.ready_ns
    start = max(sample.scheduled_ns, ready)
    return start - sample.scheduled_ns, sample.sent_ns - start


UNIT_STRIDE = 1_000_000  # more prompts than a class can hold (`spec.MAX_REQUESTS`)


def paired_by(sample: Sample) -> int:
    """The unit a sample's prompt is paired by: its prompt index on one machine; in a block of
    a run over several machines, the prompt on that machine (prompt × machine), numbered
    `(block + 1) * UNIT_STRIDE + prompt_index` so that arms pair within a machine only."""
    if sample.block is None:
        return sample.prompt_index
    return (sample.block + 1) * UNIT_STRIDE + sample.prompt_index


def block_of(unit: int) -> int | None:
    """The block of a unit `paired_by` numbered (None: one machine)."""
    return None if unit < UNIT_STRIDE else unit // UNIT_STRIDE - 1


def clock_of(sample: Sample) -> tuple[int, int]:
    """The clock a sample's times were taken on: one process's, (block, attempt) (block -1 on
    one machine): times compare only within one clock."""
    return (-1 if sample.block is None else sample.block, sample.attempt)


def request_of(s: Sample) -> tuple[str, str, int, int, int, int]:
    """Which request of the plan a sample measures (a run without rounds is round 0, one
    without loads level 0; in a run over several machines, the prompt on its machine)."""
    return (s.variant, s.prompt_class, paired_by(s), s.round or 0, s.repeat, s.level or 0)
