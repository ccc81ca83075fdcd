"""A record's hypothesis: the claim, its metric, direction, minimum effect and bounds."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_serializer, field_validator
from pydantic_core import PydanticCustomError

from kbgen.kb.models.base import Markdown, MetricName, Model
from kbgen.kb.numbers import Finite, Int

MAX_EFFECT = 10  # +1000%: more than any engine setting gains; a larger one is a typo
PERCENT = r"^[0-9]+(\.[0-9]+)?%$"  # a minimum effect written as a percentage: '5%', '300%'


def _fraction_or_percent(schema: dict[str, Any]) -> None:
    """The JSON Schema of a minimum effect as it may be written: a fraction below 1 or a
    percentage."""
    schema.pop("type", None)
    schema["anyOf"] = [
        {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        {"type": "string", "pattern": PERCENT},
    ]


class Constraint(Model):
    """A bound a configuration must keep to be named the best at a load of a sweep: a latency
    statistic over all its requests at that load, every class pooled."""

    metric: Literal["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"] = Field(
        description="The latency bounded.", examples=["ttft_ms"]
    )
    statistic: Literal["mean", "median", "p90", "p99"] = Field(
        default="p99", description="Which statistic of it."
    )
    at_most: Finite = Field(gt=0, description="Its bound, in milliseconds.", examples=[500])


class Hypothesis(Model):
    """What the experiment expects, stated so that a rule can decide it."""

    statement: Markdown = Field(
        description="The claim under test, in one or two sentences.",
        examples=["n-gram speculative decoding raises single-stream decode throughput."],
    )
    primary_metric: MetricName = Field(
        description="The metric the verdict is decided on.", examples=["decode_tok_s"]
    )
    direction: Literal["increase", "decrease"] = Field(
        description="Which way the primary metric must move for the hypothesis to hold.",
        examples=["increase"],
    )
    minimum_effect: Finite = Field(
        description="Smallest relative change that matters, as a fraction (0.05) or a "
        f"percentage ('5%'): from 0 to {MAX_EFFECT * 100:g}%, and below 100% for a decrease. A "
        "change of 100% or more is written as a percentage ('300%'), so that a bare 5 is never "
        "read as 500%.",
        examples=[0.05, "5%"],
        json_schema_extra=_fraction_or_percent,
    )
    min_prompts: Int = Field(
        default=8,
        ge=2,
        le=10_000,
        description="Distinct prompts a class needs before it can be decided: the prompt is the "
        "unit of analysis (repeats of a prompt measure timing noise, not content).",
    )
    constraints: list[Constraint] = Field(
        default_factory=list,
        description="A sweep: bounds a configuration must keep at a load to be named the best "
        "there (`verdict.best`); one that breaks one, or has no figure to show it keeps it, is "
        "excluded.",
        examples=[[{"metric": "ttft_ms", "statistic": "p99", "at_most": 500}]],
    )

    @field_validator("minimum_effect", mode="before")
    @classmethod
    def _effect_as_written(cls, value: Any) -> Any:
        """'5%' is 0.05; a bare number of 1 or more is refused: 5 meant as 5% would be read as
        +500%, and every verdict on a real change would be refuted."""
        if isinstance(value, str) and re.fullmatch(PERCENT, value.strip()):
            return float(value.strip().rstrip("%")) / 100
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1:
            raise PydanticCustomError(
                "effect_percent",
                "{value} would read as {percent}%: write a fraction (0.05) or a percentage "
                "('5%'); a change of 100% or more is written as a percentage ('{percent}%')",
                {"value": f"{value:g}", "percent": f"{value * 100:g}"},
            )
        return value

    @field_serializer("minimum_effect")
    def _effect_as_read(self, value: float) -> float | str:
        """A change of 100% or more as the percentage it must be written as."""
        return f"{value * 100:.12g}%" if value >= 1 else value

    @field_validator("minimum_effect")
    @classmethod
    def _effect_in_range(cls, value: float, info: ValidationInfo) -> float:
        """The range said in the error, the direction's: a relative change is above -100%, so a
        decrease by 1 (100%) or more could never be seen, and every verdict would be refuted."""
        shown = f"{value * 100:g}%"
        if info.data.get("direction") == "decrease" and not 0 <= value < 1:
            raise PydanticCustomError(
                "effect_range",
                "{value} is out of range: a decrease's minimum effect is from 0 to below 100% "
                "(a fraction, 0.05, or a percentage, '5%'; a metric cannot fall by 100%)",
                {"value": shown},
            )
        if not 0 <= value <= MAX_EFFECT:
            raise PydanticCustomError(
                "effect_range",
                "{value} is out of range: the minimum effect is from 0 to {most}% (a fraction, "
                "0.05, or a percentage, '5%')",
                {"value": shown, "most": f"{MAX_EFFECT * 100:g}"},
            )
        return value
