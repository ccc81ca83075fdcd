"""The models' common ground: ids, names, metrics, loads, `Model`, outcomes and ranges."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator, with_config
from pydantic_core import InitErrorDetails, PydanticCustomError
from typing_extensions import TypedDict  # Pydantic needs its TypedDict before Python 3.12

from kbgen.kb.numbers import Count, Finite, Int

# Bump SCHEMA_VERSION only for a change that makes existing records invalid or changes the
# meaning of a field. kbgen has no migrations yet: such a bump must bring one, or every
# existing record stops validating. Adding an optional field is not a bump.
SCHEMA_VERSION = 1

ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,78}[a-z0-9])?$"
TASK_REF_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,78}[a-z0-9])?#[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"

Slug = Annotated[
    str,
    Field(
        pattern=ID_PATTERN,
        description="Lower-case letters, digits and inner hyphens; at most 80 characters. "
        "Path-safe by construction: no dots, slashes or spaces.",
        examples=["2026-11-29-ngram-vs-baseline"],
    ),
]
VARIANT_PATTERN = r"^[a-z0-9](?:[a-z0-9_-]{0,78}[a-z0-9])?$"
VariantName = Annotated[
    str,
    Field(
        pattern=VARIANT_PATTERN,
        description="A variant's name: lower-case letters, digits and inner hyphens or "
        "underscores; at most 80 characters. Path-safe (it names the variant's server log).",
        examples=["ngram_gpu-k5"],
    ),
]
TaskRef = Annotated[
    str,
    Field(
        pattern=TASK_REF_PATTERN,
        description="A plan task, written `PLAN-ID#TASK-ID`.",
        examples=["next-steps-eagle#test-ngram"],
    ),
]
Markdown = Annotated[
    str,
    Field(description="Markdown text. Raw HTML is shown as text, never executed."),
]

# Metric keys a record may measure. Latencies are in milliseconds, rates in tokens/s.
MetricName = Literal[
    "decode_tok_s",  # per request: (output tokens - 1) / (E2E - TTFT), i.e. 1 / TPOT
    "output_tok_s",  # per class window: sum of output tokens / measurement window
    "ttft_ms",
    "tpot_ms",
    "itl_ms",  # per-token inter-token latency (chunk gap / tokens in the chunk)
    "chunk_gap_ms",  # raw gap between stream chunks; inflated under speculative decoding
    "e2e_ms",
]
# Measured beside those, not decided on: `steady_output_tok_s`, at concurrency > 1, is
# `output_tok_s` over the window's steady state only, when all its streams were busy: from the
# moment the concurrency-th request was sent to the first completion after the last request was
# sent, the class's tokens arriving in it over the time in it its requests were in flight
# (record.figures.steady_states); omitted at concurrency 1, where it is the whole window.
# An open loop's requests count TTFT and E2E from their scheduled time; beside them, from their
# send (`ttft_sent_ms`, `e2e_sent_ms`), and between the two the wait for a free slot under the
# concurrency (`slot_wait_ms`) and the client's own lag (`lag_ms`).
MeasuredMetric = Literal[
    MetricName, "steady_output_tok_s", "ttft_sent_ms", "e2e_sent_ms", "slot_wait_ms", "lag_ms"
]
Api = Literal["completions", "chat"]
# Requests started per second: `inf`, each as soon as the concurrency lets it start
RequestRate = Annotated[Finite, Field(gt=0)] | Literal["inf"]


@with_config(ConfigDict(extra="forbid"))
class Load(TypedDict, total=False):
    """A load level: the client-side settings a sweep varies inside one server start, by name
    (`{"concurrency": 8}`); empty: the workload's one load. An imported sweep's level may be a
    request rate; where the tool sent each arm a load of its own at one step of its sweep
    (GuideLLM's sweep profile derives its rates from each arm's measurements), the level is that
    step, `sweep_step` (from 0, the tool's order) alone: its cells compare no arms, and the
    record's notes give each arm's load."""

    concurrency: Annotated[Int, Field(ge=1)]
    max_tokens: Annotated[Int, Field(ge=1)]
    request_rate: RequestRate
    sweep_step: Count


# How a run asked the server for token counts: on every chunk, or at the end of a stream only
UsageMode = Literal["continuous", "final"]

METRIC_UNITS: dict[str, str] = {
    "decode_tok_s": "tok/s",
    "output_tok_s": "tok/s",
    "steady_output_tok_s": "tok/s",
    "ttft_sent_ms": "ms",
    "e2e_sent_ms": "ms",
    "slot_wait_ms": "ms",
    "lag_ms": "ms",
    "ttft_ms": "ms",
    "tpot_ms": "ms",
    "itl_ms": "ms",
    "chunk_gap_ms": "ms",
    "e2e_ms": "ms",
}


def fail_at(model: str, errors: list[tuple[tuple[str | int, ...], str]]) -> None:
    """Raise cross-field errors located at the field they concern, not at the model.

    A plain ``ValueError`` in a model validator is reported at the model's own location;
    raising a ``ValidationError`` with explicit ``loc`` lets the file:line of the message
    point at the offending key.
    """
    if errors:
        raise ValidationError.from_exception_data(
            model,
            [
                InitErrorDetails(
                    type=PydanticCustomError("consistency", message), loc=loc, input=None
                )
                for loc, message in errors
            ],
        )


def repeats_of(field: str, items: Iterable[object]) -> list[tuple[tuple[str | int, ...], str]]:
    """An error at each item of the list `field` that repeats an earlier one (for `fail_at`)."""
    seen: set[object] = set()
    errors: list[tuple[tuple[str | int, ...], str]] = []
    for i, item in enumerate(items):
        if item in seen:
            errors.append(((field, i), f"{item!r} appears twice"))
        seen.add(item)
    return errors


def baseline_first(baseline: str, variants: Iterable[str]) -> list[str]:
    """The order variants are run, compared and shown in: the baseline, then the others as given."""
    return [baseline, *(name for name in variants if name != baseline)]


# What a record's setup may leave unknown (`Record.unknown`): the fields the question it answers
# reads (`kb.questions.ASKED`), by their dotted path. A required text left unknown says UNKNOWN.
Unknowable = Literal[
    "config.engine",
    "config.model",
    "config.hardware",
    "config.server_args",
    "config.server_env",
    "config.variants",
    "workload.prompt_suite",
    "workload.concurrency",
    "workload.request_rate",
    "workload.max_tokens",
    "workload.temperature",
    "workload.api",
    "workload.ignore_eos",
    "workload.usage",
]
UNKNOWN = "unknown"


def empty(value: Any) -> bool:
    """Whether a field holds nothing a reader could take for a value: None, `unknown`, an empty
    list or mapping, or a model (a mapping of models) whose every field is empty."""
    if value is None or value in ("", UNKNOWN):
        return True
    if isinstance(value, BaseModel):
        return all(empty(getattr(value, name)) for name in type(value).model_fields)
    if isinstance(value, dict):
        return all(empty(v) for v in value.values())
    if isinstance(value, list):
        return not value
    return False


class Model(BaseModel):
    """Base of every kbgen model: unknown keys are errors, and nothing is coerced silently."""

    model_config = ConfigDict(extra="forbid", validate_default=True, use_enum_values=True)


class Status(StrEnum):
    """Where a record is in its life."""

    PLANNED = "planned"
    RUNNING = "running"
    CONCLUDED = "concluded"
    SUPERSEDED = "superseded"


class Outcome(StrEnum):
    """What the evidence says about the hypothesis."""

    SUPPORTED = "supported"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"
    MIXED = "mixed"  # overall only: classes reached different decisive outcomes


class Range(Model):
    """A figure known only as a range, as reported (e.g. "1.86–2.55")."""

    low: Finite = Field(description="Lower end of the reported range.", examples=[1.86])
    high: Finite = Field(description="Upper end of the reported range.", examples=[2.55])

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low > self.high:
            fail_at("Range", [(("low",), f"{self.low} is above high ({self.high})")])
        return self


Figure = Finite | Range
