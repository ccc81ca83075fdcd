"""How a workload's traffic was shaped: when requests arrived, and the prefixes they shared."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from kbgen.kb.models.base import Model, fail_at
from kbgen.kb.numbers import Finite, Int


class Arrivals(Model):
    """How requests arrive at a request rate (open loop): the gaps between them, drawn from a
    seeded process, each request sent at its time whatever is in flight (up to the workload's
    `concurrency`), as `vllm bench serve --request-rate R --burstiness B` sends them."""

    process: Literal["poisson", "gamma", "constant"] = Field(
        default="poisson",
        description="`poisson`: exponential gaps (independent arrivals). `gamma`: gaps of a gamma "
        "distribution of shape `burstiness` and mean 1/rate (burstier below 1, more even above; "
        "1 is Poisson). `constant`: every gap 1/rate.",
    )
    burstiness: Finite = Field(
        default=1.0,
        gt=0,
        le=1000,
        description="The gamma process's shape (`vllm bench serve --burstiness`); 1 otherwise.",
    )
    seed: Int = Field(
        default=0,
        description="Seed of the gaps: every arm gets the same times in a round and load level.",
    )

    @model_validator(mode="after")
    def _burstiness_of_gamma(self) -> Arrivals:
        if self.process != "gamma" and self.burstiness != 1.0:
            message = f"is the gamma process's shape: {self.process} arrivals have none"
            fail_at("Arrivals", [(("burstiness",), message)])
        return self


class Prefixes(Model):
    """Shared prefixes (system prompts, few-shot headers): `count` texts of `tokens` tokens of
    the served model, each request drawing one, seeded, so that how much of the traffic the
    prefix cache can hold is set by design."""

    count: Annotated[Int, Field(ge=1, le=10_000)] = Field(description="How many prefixes.")
    tokens: Annotated[Int, Field(ge=1, le=100_000)] = Field(
        description="Each prefix's length in the served model's tokens."
    )
    seed: Int = Field(
        default=0,
        description="Seed of the texts and of which prefix each prompt draws: every arm, round "
        "and repeat sends a prompt with the same one.",
    )


class Lengths(Model):
    """A length in tokens drawn for each request, seeded (`vllm bench serve`'s random dataset,
    GuideLLM's synthetic data): `mean` alone is every request's length."""

    distribution: Literal["fixed", "uniform", "normal", "lognormal"] = Field(
        default="fixed",
        description="`fixed`: `mean` for all. `uniform`: even over [`min`, `max`]. `normal`: "
        "mean and `stdev`. `lognormal`: a log-normal of that mean and `stdev` (long tails, as "
        "production lengths). Every draw is rounded and clipped to [`min`, `max`].",
    )
    mean: Annotated[Int, Field(ge=1, le=1_000_000)] = Field(description="The mean length.")
    stdev: Annotated[Finite, Field(ge=0)] = Field(
        default=0.0, description="Spread of `normal` and `lognormal` lengths."
    )
    min: Annotated[Int, Field(ge=1, le=1_000_000)] = Field(default=1, description="Fewest tokens.")
    max: Annotated[Int, Field(ge=1, le=1_000_000)] | None = Field(
        default=None, description="Most tokens (unset: no bound above)."
    )

    @model_validator(mode="after")
    def _bounds(self) -> Lengths:
        errors: list[tuple[tuple[str | int, ...], str]] = []
        top = self.max if self.max is not None else self.mean
        if not self.min <= self.mean <= top:
            errors.append((("mean",), f"must lie in [min, max]: [{self.min}, {self.max}]"))
        if self.distribution == "uniform" and self.max is None:
            errors.append((("max",), "a uniform length needs its upper bound"))
        elif self.distribution == "uniform" and abs(2 * self.mean - self.min - top) > 1:
            middle = (self.min + top) / 2
            errors.append(
                (("mean",), f"a uniform length's is the middle of [min, max]: {middle:g}")
            )
        if self.distribution in ("normal", "lognormal") and self.stdev == 0:
            errors.append((("stdev",), f"a {self.distribution} length needs a spread"))
        fail_at("Lengths", errors)
        return self


class Synthetic(Model):
    """Synthetic requests: `count` prompts of drawn input lengths, each its own text, each
    asking for a drawn number of output tokens; the same on every arm, round and repeat."""

    count: Annotated[Int, Field(ge=1, le=100_000)] = Field(description="How many requests.")
    input_tokens: Lengths = Field(description="Each prompt's length in the model's tokens.")
    output_tokens: Lengths = Field(description="Each request's `max_tokens`.")
    seed: Int = Field(default=0, description="Seed of the lengths and the texts.")


class Trace(Model):
    """A production trace replayed: each line's time, input and output lengths, and (Mooncake)
    its prefix blocks, so that requests with equal block ids share text as they shared a cache."""

    path: str = Field(
        description="The trace file, relative to the spec's workdir: Mooncake JSONL "
        "(`timestamp` ms, `input_length`, `output_length`, `hash_ids`) or the Azure LLM "
        "inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`).",
        examples=["bench/traces/mooncake-conversation-head.jsonl"],
    )
    format: Literal["mooncake", "azure"] | None = Field(
        default=None, description="The file's format (unset: `.csv` is azure, else mooncake)."
    )
    start_s: Annotated[Finite, Field(ge=0)] = Field(
        default=0.0, description="Seconds into the trace its slice begins."
    )
    duration_s: Annotated[Finite, Field(gt=0)] | None = Field(
        default=None, description="Seconds of the trace its slice keeps (unset: to its end)."
    )
    limit: Annotated[Int, Field(ge=1, le=100_000)] | None = Field(
        default=None, description="The most requests the slice keeps, from its start."
    )
    speedup: Annotated[Finite, Field(gt=0, le=10_000)] = Field(
        default=1.0,
        description="Played this many times faster than recorded (unset `request_rate`); a "
        "`request_rate` instead scales the gaps so that the slice arrives at that mean rate.",
    )
    block_tokens: Annotated[Int, Field(ge=1, le=1_000_000)] = Field(
        default=512, description="Tokens of one prefix block (`hash_ids`): Mooncake's are 512."
    )
    max_input_tokens: Annotated[Int, Field(ge=1, le=1_000_000)] | None = Field(
        default=None, description="Longer prompts are cut to this (a model's shorter context)."
    )
    max_output_tokens: Annotated[Int, Field(ge=1, le=1_000_000)] | None = Field(
        default=None, description="Longer outputs are cut to this."
    )
    seed: Int = Field(default=0, description="Seed of the texts of the blocks and the rest.")


class Sessions(Model):
    """Multi-turn sessions: each class's prompts, `turns` at a time in their order, are one
    chat's user turns; each turn is sent with the conversation so far (the answers this arm's
    server gave) `think_s` after the turn before it ended. Sessions start as requests would:
    at the request rate (open loop), or `concurrency` at a time. The session is the unit."""

    turns: Annotated[Int, Field(ge=2, le=1000)] = Field(description="User turns a session.")
    think_s: Annotated[Finite, Field(ge=0, le=3600)] = Field(
        default=0.0, description="Seconds between an answer's end and the next turn."
    )
