"""What was measured and decided: statistics, speculative decoding, the verdict and its cells."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from kbgen.kb.models.base import (
    Figure,
    Load,
    Markdown,
    MeasuredMetric,
    Model,
    Outcome,
    Range,
    Slug,
    VariantName,
    fail_at,
)
from kbgen.kb.numbers import Bool, Count, Finite, Int, NonNegative


class MetricStats(Model):
    """Summary statistics of one metric over the requests of one variant and class."""

    n: Count | None = Field(default=None, description="Number of samples (None: unknown).")
    mean: Finite = Field(description="Arithmetic mean.")
    median: Finite | None = Field(default=None, description="50th percentile.")
    p90: Finite | None = Field(default=None, description="90th percentile.")
    p99: Finite | None = Field(default=None, description="99th percentile.")
    stdev: NonNegative | None = Field(default=None, description="Sample standard deviation.")

    def interval(self) -> tuple[float, float] | None:
        """The 95% interval of the mean (normal approximation: mean ± 1.96·stdev/√n), if known."""
        if self.stdev is None or not self.n:
            return None
        half = 1.96 * self.stdev / math.sqrt(self.n)
        low, high = self.mean - half, self.mean + half
        return (low, high) if math.isfinite(low) and math.isfinite(high) else None  # 1e308s


# variant -> prompt class -> metric -> its statistics
Measurements = dict[VariantName, dict[Slug, dict[MeasuredMetric, MetricStats]]]


class LoadMeasurements(Model):
    """The measurements at one load level of a sweep."""

    load: Load = Field(description="The load level.", examples=[{"concurrency": 8}])
    measurements: Measurements = Field(
        default_factory=dict, description="variant → prompt class → metric → summary."
    )


class Schedule(Model):
    """How an open loop kept its schedule: one arm at one load level, over its windows."""

    variant: VariantName = Field(description="The arm.")
    load: Load = Field(default_factory=Load, description="The load level ({}: the one load).")
    offered_rps: Finite = Field(gt=0, description="Requests per second the spec asked for.")
    scheduled_rps: NonNegative | None = Field(
        default=None,
        description="The rate of the schedule drawn from it: each window's requests after the "
        "first over its first to last scheduled time, averaged over the windows (a short "
        "window's draw strays from the rate asked; None: no window of two requests).",
    )
    achieved_rps: NonNegative = Field(
        description="Requests completed per second, over the span `vllm bench serve`'s request "
        "throughput counts: each window's successful requests after the first over the time "
        "from its first scheduled send to its last end, averaged over the windows (a server "
        "that keeps up completes at about the drawn schedule's rate, one that queues below it)."
    )
    requests: Count = Field(description="Requests sent, failed ones included.")
    slot_wait_p99_ms: NonNegative = Field(
        description="99th percentile of the wait for a free slot under the concurrency cap."
    )
    lag_p99_ms: NonNegative = Field(
        description="99th percentile of the client's own lag: a slot free, the request not yet "
        "sent."
    )
    behind: list[Count] = Field(
        default_factory=list,
        description="The rounds (from 0) whose windows' lag p99 went over the bound the verdict "
        "states: the client fell behind its schedule there.",
    )


class PrefixCache(Model):
    """The server's prefix cache over one arm's windows at one load level (`/metrics`)."""

    variant: VariantName = Field(description="The arm.")
    load: Load = Field(default_factory=Load, description="The load level ({}: the one load).")
    queries: NonNegative = Field(description="Prompt tokens looked up in the cache.")
    hits: NonNegative = Field(description="Of those, the tokens it held.")
    hit_rate: Figure | None = Field(default=None, description="hits / queries (None: no query).")
    designed_hit_rate: Figure | None = Field(
        default=None,
        description="The hit rate the shared prefixes' design expects of these requests, each "
        "computed before the next with its prefix comes (None: no prefixes, or the server's "
        "block size or prompt token counts unknown).",
    )


class SpecDecodeStats(Model):
    """Speculative-decoding counters of one variant, from vLLM's `/metrics` deltas."""

    drafts: Count | None = Field(default=None, description="Draft steps.")
    draft_tokens: Count | None = Field(default=None, description="Tokens proposed.")
    accepted_tokens: Count | None = Field(default=None, description="Tokens accepted.")
    acceptance_rate: Figure | None = Field(
        default=None, description="accepted_tokens / draft_tokens (0–1)."
    )
    mean_acceptance_length: Figure | None = Field(
        default=None,
        description="1 + accepted_tokens / drafts: tokens per drafted step, bonus token "
        "included (vLLM's figure). Steps that drafted nothing are not counted, so it overstates "
        "the speed-up where few steps draft: see tokens_per_engine_step.",
    )
    generation_tokens: Count | None = Field(
        default=None,
        ge=0,
        description="Tokens generated over the same windows (`vllm:generation_tokens`; for an "
        "import without it, the tool's own output token count).",
    )
    tokens_per_engine_step: Figure | None = Field(
        default=None,
        description="generation_tokens / (generation_tokens - accepted_tokens): output tokens per "
        "engine step of a request, drafted or not — what decoding speed follows. A step of a "
        "batch counts once per request in it. Slightly high where requests stop (max_tokens, "
        "EOS) inside an accepted draft: vLLM counts the accepted tokens past the stop.",
    )
    drafted_step_share: Figure | None = Field(
        default=None,
        description="drafts / (generation_tokens - accepted_tokens): the share of engine steps "
        "that drafted (0–1).",
    )
    per_position_acceptance: list[Figure | None] | None = Field(
        default=None,
        description="Acceptance rate at each draft position, first position first; "
        "null where unknown.",
    )

    @model_validator(mode="after")
    def _within_their_range(self) -> SpecDecodeStats:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if (
            self.accepted_tokens is not None
            and self.draft_tokens is not None
            and self.accepted_tokens > self.draft_tokens
        ):
            problems.append(
                (
                    ("accepted_tokens",),
                    f"{self.accepted_tokens} exceeds draft_tokens ({self.draft_tokens})",
                )
            )
        positions = len(self.per_position_acceptance or [])
        most_per_step = 1 + positions if positions else math.inf
        bounds: list[tuple[tuple[str | int, ...], Figure | None, float, float, str]] = [
            (("acceptance_rate",), self.acceptance_rate, 0, 1, "0–1"),
            (("drafted_step_share",), self.drafted_step_share, 0, 1, "0–1"),
            (
                ("tokens_per_engine_step",),
                self.tokens_per_engine_step,
                1,
                most_per_step,
                f"1–{most_per_step:g}, 1 + the draft's positions",
            ),
            *(
                (("per_position_acceptance", i), a, 0, 1, "0–1")
                for i, a in enumerate(self.per_position_acceptance or [])
            ),
        ]
        for loc, figure, low, high, words in bounds:
            ends = (figure.low, figure.high) if isinstance(figure, Range) else (figure,)
            if any(e is not None and not low <= e <= high for e in ends):
                problems.append((loc, f"{_shown(figure)} is outside its range ({words})"))
        fail_at("SpecDecodeStats", problems)
        return self


def _shown(figure: Figure | None) -> str:
    return f"{figure.low:g}–{figure.high:g}" if isinstance(figure, Range) else f"{figure:g}"


Unit = Literal["prompt", "round", "request"]
IntervalMethod = Literal[
    "expanded-percentile", "student-t", "bca", "percentile", "confidence-sequence", "none"
]


class ClassVerdict(Model):
    """The effect of the variant on the primary metric in one prompt class, and what it rests on."""

    outcome: Outcome = Field(description="Verdict for this class.")
    effect: Finite = Field(
        description="Relative change of the primary metric vs the baseline (-0.26 = 26% lower)."
    )
    ci_low: Finite | None = Field(default=None, description="Lower bound of the effect's CI.")
    ci_high: Finite | None = Field(default=None, description="Upper bound of the effect's CI.")
    n_baseline: Count | None = Field(default=None, description="Baseline requests used.")
    n_variant: Count | None = Field(default=None, description="Variant requests used.")
    unit: Unit | None = Field(
        default=None,
        description="What the interval resamples: `prompt` (arms paired by prompt), `round` "
        "(paired by round), `request` (unpaired requests, each its own prompt).",
    )
    interval: IntervalMethod | None = Field(
        default=None,
        description="How the interval was computed: `student-t` (on the units' log ratios), "
        "`bca` or its `percentile` fallback (unpaired requests), `none`; `expanded-percentile` "
        "(a cluster bootstrap) and `confidence-sequence` in records of earlier kbgens.",
    )
    prompts: Count | None = Field(
        default=None, ge=0, description="Distinct prompts with data in both arms (paired)."
    )
    groups: Count | None = Field(
        default=None,
        description="Where the prompt file names each prompt's `group` (a template, a source, a "
        "user): the groups the interval resamples, each its prompts' mean log ratio. The claim "
        "rests on them, not on the prompts (None: every prompt its own unit).",
    )
    rounds: Count | None = Field(default=None, description="Rounds with data in both arms.")
    # keys are read as text (YAML keys reach validation as strings): a lax int, the one place
    per_unit: dict[int, Finite] = Field(
        default_factory=dict,
        description="Each paired unit's effect (prompt index or round → relative change): "
        "shown even when too few to decide.",
    )
    drift: NonNegative | None = Field(
        default=None,
        ge=0,
        description="The larger of the two arms' drift across rounds (each arm against itself, "
        "paired by prompt: the range of its round levels, relative); None with one round.",
    )
    failure_rate_baseline: Finite | None = Field(
        default=None, ge=0, le=1, description="Failed attempts / attempts of the baseline."
    )
    failure_rate_variant: Finite | None = Field(
        default=None, ge=0, le=1, description="Failed attempts / attempts of the variant."
    )
    same_output: Finite | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of prompts whose outputs (hashes) agree across arms; None: unknown.",
    )
    decided_on: Literal["all-prompts", "same-output-prompts"] | None = Field(
        default=None,
        description="Which prompts the effect was computed over: all, or (when outputs "
        "differ across arms) only those whose outputs agree.",
    )
    prompts_needed: Int | None = Field(
        default=None,
        ge=2,
        description="Inconclusive only: about how many units (prompts, or rounds) would give an "
        "interval narrow enough to decide at the minimum effect, from the observed spread.",
    )
    reason: str | None = Field(
        default=None, description="Why the class is inconclusive, when not only its interval."
    )

    @model_validator(mode="after")
    def _ci_ordered(self) -> ClassVerdict:
        if self.ci_low is not None and self.ci_high is not None and self.ci_low > self.ci_high:
            fail_at(
                "ClassVerdict", [(("ci_low",), f"{self.ci_low} is above ci_high ({self.ci_high})")]
            )
        return self


class Cell(Model):
    """One variant at one load in one class, against the baseline at the same load: the cell of a
    sweep, decided at the family's interval."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_alias=True)

    variant: VariantName = Field(description="The variant judged.")
    load: Load = Field(
        default_factory=Load,
        description="The load level: the client-side values of the sweep (empty: one load).",
        examples=[{"concurrency": 8}],
    )
    prompt_class: Slug = Field(alias="class", description="The prompt class.")
    outcome: Outcome = Field(description="Its verdict.")
    effect: Finite | None = Field(
        default=None, description="Relative change of the primary metric vs the baseline."
    )
    ci_low: Finite | None = Field(default=None, description="Lower bound of the family's interval.")
    ci_high: Finite | None = Field(
        default=None, description="Upper bound of the family's interval."
    )
    reason: str | None = Field(
        default=None, description="Why it is inconclusive, when not only its interval."
    )


class Family(Model):
    """How a record's many comparisons (a sweep's cells, an A/B's classes) are kept from
    deciding by chance."""

    method: Literal["bonferroni"] = Field(
        description="`bonferroni`: simultaneous intervals, each at 1 - (1 - confidence) / "
        "comparisons, so that the chance of any wrong decisive cell in the whole record (every "
        "class, every load, every variant) stays within 1 - confidence."
    )
    comparisons: Int = Field(
        ge=1,
        description="Comparisons in the record: variants (baseline aside) x load levels x classes.",
    )
    cell_confidence: Finite = Field(gt=0, lt=1, description="The level of each cell's interval.")


class Best(Model):
    """The configuration that does best at one load level, and how sure that is."""

    load: Load = Field(default_factory=Load, description="The load level (empty: one load).")
    variant: VariantName = Field(description="The best configuration (the baseline included).")
    probability_best: Finite = Field(
        ge=0,
        le=1,
        description="Share of the resamples of prompts (paired across every arm) in which it is "
        "the best.",
    )
    ties: list[VariantName] = Field(
        default_factory=list,
        description="Configurations that cannot be told apart from it: not worse with the "
        "family's confidence.",
    )
    excluded: list[VariantName] = Field(
        default_factory=list,
        description="Configurations left out for breaking the hypothesis' constraints at this "
        "load.",
    )
    per_class: dict[str, VariantName] | None = Field(
        default=None,
        description="With several classes: the best in each class alone (its highest mean log "
        "value). The best above is the best of their average, which may be no class's best.",
        examples=[{"coding": "ngram-k4", "chat": "baseline"}],
    )


class Configuration(Model):
    """One configuration of a sweep: a variant at a load level."""

    variant: VariantName = Field(description="The variant.")
    load: Load = Field(
        default_factory=lambda: Load(),
        description="The load level (empty: one load).",
        examples=[{"concurrency": 8}],
    )


class ParetoPoint(Model):
    """One configuration of a sweep as a point of throughput against latency, and whether it is on
    the front: whether another configuration beats it on both with confidence."""

    variant: VariantName = Field(description="The variant (the baseline included).")
    load: Load = Field(
        default_factory=lambda: Load(),
        description="The load level (empty: one load).",
        examples=[{"concurrency": 8}],
    )
    output_tok_s: Finite = Field(
        ge=0,
        description="Aggregate output tokens/s over every class: the output tokens of its "
        "requests over the time at least one of them was in flight.",
        examples=[412.5],
    )
    tpot_ms_median: Finite = Field(
        ge=0, description="Median TPOT (ms) of its requests, every class pooled."
    )
    tpot_ms_p99: Finite = Field(
        ge=0,
        description="99th percentile TPOT (ms) of its requests, every class pooled: the front's "
        "latency.",
    )
    ttft_ms_median: Finite | None = Field(
        default=None, ge=0, description="Median TTFT (ms) of its requests, every class pooled."
    )
    ttft_ms_p99: Finite | None = Field(
        default=None,
        ge=0,
        description="99th percentile TTFT (ms) of its requests, every class pooled.",
    )
    on_front: Bool = Field(
        description="Whether it is on the front: no other configuration dominates it with "
        "confidence (see `dominated_by`)."
    )
    dominance: Finite = Field(
        ge=0,
        le=1,
        description="The largest share of resamples of prompts in which one other "
        "configuration dominates it (at least its throughput and at most its p99 TPOT, better "
        "in one).",
    )
    dominated_by: list[Configuration] = Field(
        default_factory=list,
        description="The configurations that dominate it with confidence; empty on the front.",
    )


class Verdict(Model):
    """The decision the evidence supports, with the rule that produced it."""

    outcome: Outcome = Field(description="Overall verdict.")
    variant: VariantName = Field(description="The variant judged against the baseline.")
    method: Literal["samples", "bootstrap", "summary", "reported"] = Field(
        description="`samples`: computed by kbgen from raw samples, with intervals (`bootstrap` "
        "in records kbgen wrote when its intervals were bootstrapped); "
        "`summary`: from imported means only, no interval; "
        "`reported`: taken from the experimenter's account."
    )
    confidence: Finite | None = Field(
        default=None, gt=0, lt=1, description="Confidence level of the intervals."
    )
    rule: str = Field(description="The rule applied, in words.")
    per_class: dict[Slug, ClassVerdict] = Field(
        default_factory=dict, description="Verdict per prompt class."
    )
    rationale: Markdown | None = Field(default=None, description="Why, in the author's words.")
    caveats: list[str] = Field(
        default_factory=list,
        description="What limits this verdict: mismatches allowed with --allow-mismatch, "
        "imported summaries, failed requests, a hypothesis changed after the run.",
    )
    unit: Unit | None = Field(
        default=None, description="What the intervals resample (see ClassVerdict.unit)."
    )
    estimator: str | None = Field(
        default=None,
        description="How the effect is computed from the units.",
        examples=["geometric mean of per-prompt ratios"],
    )
    interval: list[IntervalMethod] = Field(
        default_factory=list, description="The interval methods the classes actually used."
    )
    guards: list[str] = Field(
        default_factory=list, description="The guards applied, each in words."
    )
    reasons: list[str] = Field(
        default_factory=list,
        description="Why the overall outcome is inconclusive whatever the classes say (a class "
        "without usable data, one-token outputs, a token mismatch).",
    )
    load: Load = Field(
        default_factory=Load,
        description="A sweep: the load level of `variant` and `per_class` (empty: one load).",
    )
    family: Family | None = Field(
        default=None,
        description="A sweep (more than one comparison per class): how the family of comparisons "
        "is controlled. None: one comparison per class, at `confidence`.",
    )
    cells: list[Cell] = Field(
        default_factory=list,
        description="A sweep: every variant at every load in every class against the baseline "
        "(`per_class` is the cells of `variant` at `load`). Empty for one comparison per class.",
    )
    best: list[Best] = Field(
        default_factory=list,
        description="A sweep: per load level, the best configuration with its probability.",
    )
    pareto: list[ParetoPoint] = Field(
        default_factory=list,
        description="A sweep measured by kbgen: every configuration (variant at load) as "
        "aggregate output tokens/s against latency, and the front of those no other dominates "
        "with confidence. Empty for an A/B, and where the requests share no clock (an import).",
    )

    def limits(self) -> list[tuple[str | None, list[str]]]:
        """What limits this verdict, each once, as its reasons and caveats state it: what
        concerns the whole comparison first (None), then each class's in `per_class`'s order,
        the class's name taken off (a caveat about a class is written `CLASS: …`) and its
        `reason` first. Classes with nothing said are left out."""
        groups: dict[str | None, list[str]] = {None: []}
        for cls, verdict in self.per_class.items():
            groups[cls] = [verdict.reason] if verdict.reason else []
        for said in [*self.reasons, *self.caveats]:
            cls, _, rest = said.partition(": ")
            if rest and cls in self.per_class:
                groups[cls].append(rest)
            else:
                groups[None].append(said)
        return [(cls, list(dict.fromkeys(said))) for cls, said in groups.items() if said]
