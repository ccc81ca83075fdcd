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
