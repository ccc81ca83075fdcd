"""What a measurement window counted: the server's counter deltas and the machine's load.

The data only: `bench.metrics` reads them from `/metrics` scrapes, `bench.machine` samples the
load; run.json, the samples file and the record keep them as these models.
"""

from __future__ import annotations

from pydantic import Field

from kbgen.kb import numbers
from kbgen.kb.models import Model
from kbgen.kb.numbers import Bool, Finite, Int, NonNegative


class MachineLoad(Model):
    """How busy the machine that ran the benchmark was during one window (psutil).

    kbgen's own process, the server it started and their children are not "other"; everything
    else is. A busy window measures the neighbours as much as the arms.
    """

    other_cpu_percent: Finite = Field(
        ge=0, description="CPU used by other processes, % of all cores, averaged over the window."
    )
    steal_percent: Finite | None = Field(
        default=None, ge=0, description="CPU time stolen by the hypervisor, % (None: not known)."
    )
    load_1m: Finite | None = Field(
        default=None, ge=0, description="1-minute load average at the window's end."
    )
    cpu_count: Int = Field(ge=1, description="Logical CPUs of the machine.")


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
    prefix_cache_queries: Count | None = Field(
        default=None, description="Prompt tokens looked up in the prefix cache (when exported)."
    )
    prefix_cache_hits: Count | None = Field(
        default=None, description="Of those, the tokens found there: computed by no request."
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
