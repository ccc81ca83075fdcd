"""The knowledge base's data: experiment records and plans, as Pydantic models.

These models are the contract of ``records/``: every field carries a description
(it becomes the JSON Schema, the editor's hover text and the site's reference page),
unknown keys are rejected so a typo in hand-edited YAML fails loudly, and values
are normalised in validators rather than at call sites.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
    with_config,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from typing_extensions import TypedDict  # Pydantic needs its TypedDict before Python 3.12

from kbgen.kb import speculative_args
from kbgen.kb.numbers import Bool, Count, Finite, Int, NonNegative

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
MeasuredMetric = Literal[MetricName, "steady_output_tok_s"]
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


def _empty(value: Any) -> bool:
    """Whether a field holds nothing a reader could take for a value: None, `unknown`, an empty
    list or mapping, or a model (a mapping of models) whose every field is empty."""
    if value is None or value in ("", UNKNOWN):
        return True
    if isinstance(value, BaseModel):
        return all(_empty(getattr(value, name)) for name in type(value).model_fields)
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
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


# --- hypothesis ---------------------------------------------------------------------------


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


# --- configuration --------------------------------------------------------------------------


def _plain_json(value: Any, depth: int = 0) -> Any:
    """`value` if it is JSON whose numbers are finite and integers 64-bit, as kbgen reads them."""
    if depth > 32:
        raise PydanticCustomError("json", "nested more than 32 levels deep")
    if isinstance(value, dict):
        for item in value.values():
            _plain_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _plain_json(item, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("finite_number", "Input should be a finite number")
    elif isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise PydanticCustomError("int64", "Input should fit in 64 bits (at most 2**63 - 1)")
    return value


ExtraValue = Annotated[JsonValue, AfterValidator(_plain_json)]


class SpeculativeModel(BaseModel):
    """Base of the typed `--speculative-config`s: the fields kbgen knows are checked, and any
    other key vLLM takes (`rejection_sample_method`, `parallel_drafting`, one a later vLLM adds)
    is kept as given and passed to the server, so the record shows everything the arm ran with.
    A misspelt key is therefore vLLM's to refuse, when the server starts."""

    model_config = ConfigDict(extra="allow", validate_default=True)
    __pydantic_extra__: dict[str, ExtraValue] = Field(init=False)


class NgramConfig(SpeculativeModel):
    """vLLM n-gram (prompt lookup) speculation: drafts copied from the context, proposed on the
    CPU (`ngram`, which needs numba) or on the GPU (`ngram_gpu`)."""

    method: Literal["ngram", "ngram_gpu"] = Field(description="Speculation method.")
    num_speculative_tokens: Int = Field(ge=1, le=64, description="Tokens drafted per step.")
    prompt_lookup_max: Int | None = Field(
        default=None, ge=1, description="Longest n-gram matched in the context."
    )
    prompt_lookup_min: Int | None = Field(
        default=None, ge=1, description="Shortest n-gram matched in the context."
    )

    @model_validator(mode="after")
    def _lookup_window(self) -> NgramConfig:
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if lo is not None and hi is not None and lo > hi:
            fail_at(
                "NgramConfig", [(("prompt_lookup_min",), f"{lo} is above prompt_lookup_max ({hi})")]
            )
        return self


class SuffixConfig(SpeculativeModel):
    """vLLM suffix decoding (Arctic Inference): drafts from suffix trees of the prompt and of
    earlier responses."""

    method: Literal["suffix"] = Field(description="Speculation method.")
    num_speculative_tokens: Int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Most tokens drafted per step (vLLM: the tree depth when unset).",
    )
    suffix_decoding_max_tree_depth: Int | None = Field(
        default=None, ge=1, description="Depth of the suffix trees (vLLM: 24)."
    )
    suffix_decoding_max_cached_requests: Int | None = Field(
        default=None, ge=0, description="Requests kept in the global tree (vLLM: 10000)."
    )
    suffix_decoding_max_spec_factor: Finite | None = Field(
        default=None, ge=0, description="Tokens drafted per token of prefix match (vLLM: 1.0)."
    )
    suffix_decoding_min_token_prob: Finite | None = Field(
        default=None, ge=0, le=1, description="Least estimated probability drafted (vLLM: 0.1)."
    )


class DraftModelConfig(SpeculativeModel):
    """Speculation with separate draft weights: EAGLE, EAGLE-3 or DFlash heads, Medusa heads,
    an MLP speculator, a small LM (`draft_model`), or a proposer class of one's own
    (`custom_class`, its module path as `model`)."""

    method: Literal[
        "eagle", "eagle3", "draft_model", "medusa", "mlp_speculator", "dflash", "custom_class"
    ] = Field(description="Speculation method.")
    model: str = Field(
        min_length=1,
        description="Draft model: a hub name or a local path.",
        examples=["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"],
    )
    num_speculative_tokens: Int = Field(ge=1, le=64, description="Tokens drafted per step.")
    draft_tensor_parallel_size: Int | None = Field(
        default=None, ge=1, description="Tensor parallelism of the draft model."
    )
    quantization: str | None = Field(default=None, description="Weight format of the draft.")
    revision: str | None = Field(default=None, description="Revision of the draft model.")


class MtpConfig(SpeculativeModel):
    """Speculation with the target's own draft layers: multi-token prediction (`mtp`) or
    DSpark, whose weights may ship inside the target checkpoint."""

    method: Literal["mtp", "dspark"] = Field(description="Speculation method.")
    model: str | None = Field(
        default=None, min_length=1, description="Draft weights (None: the target's own)."
    )
    num_speculative_tokens: Int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Tokens drafted per step (vLLM: the draft config's when unset).",
    )


SpeculativeConfig = Annotated[
    NgramConfig | SuffixConfig | DraftModelConfig | MtpConfig,
    Field(discriminator="method", description="vLLM's `--speculative-config`, typed."),
]
_SPECULATIVE: TypeAdapter[Any] = TypeAdapter(SpeculativeConfig)


class Variant(Model):
    """One arm of the experiment: the server arguments that differ from the common ones."""

    args: list[str] = Field(
        default_factory=list,
        description="Extra server arguments of this arm, as on the command line. "
        "Secrets are redacted before they reach a record.",
        examples=[["--max-num-seqs", "8"]],
    )
    speculative_config: SpeculativeConfig | None = Field(
        default=None,
        description="Speculative decoding, or none for a plain arm. Given in `args` instead "
        "(`--speculative-config JSON`, its dotted form, `--spec-method` …), it is moved here.",
    )

    @model_validator(mode="before")
    @classmethod
    def _speculative_from_args(cls, data: Any) -> Any:
        """`--speculative-config` and its kin in `args` become the typed field: the record then
        shows the arm's speculative configuration however the spec wrote it."""
        args = data.get("args") if isinstance(data, dict) else None
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            return data  # not arguments: the field's own validation says why
        rest, found, at, problems = speculative_args.split(args)
        fail_at("Variant", [(("args", i), message) for i, message in problems])
        if found is None or at is None:
            return data
        if data.get("speculative_config") is not None:
            fail_at("Variant", [(("args", at), "a speculative config is also given here")])
        try:
            typed = _SPECULATIVE.validate_python(found)
        except ValidationError as exc:
            fail_at("Variant", [(("args", at), _speculative_problem(e)) for e in exc.errors()])
        return {**data, "args": rest, "speculative_config": typed}


def _speculative_problem(error: Any) -> str:
    """One error of a speculative config read from the arguments, as its message says it."""
    loc = list(error["loc"])[1:]  # the first is the method, the union's tag
    if error["type"] == "union_tag_not_found":
        return "speculative config: method: required field is missing"
    return f"speculative config: {'.'.join(map(str, loc)) or 'method'}: {error['msg']}"


class Engine(Model):
    """The inference engine that served the experiment."""

    name: str = Field(description="Engine name.", examples=["vllm"])
    version: str | None = Field(
        default=None, description="Engine version as the server reports it.", examples=["0.32.0"]
    )


class ModelInfo(Model):
    """The model served."""

    name: str = Field(description="Model name or path.", examples=["moonshotai/Kimi-K2.5"])
    quantization: str | None = Field(default=None, description="Weight format.", examples=["int4"])
    architecture: str | None = Field(
        default=None, description="Architecture in words.", examples=["1T-parameter MoE"]
    )


class Hardware(Model):
    """Where the server ran."""

    cpu: str | None = Field(default=None, description="CPU model.")
    cpu_count: Int | None = Field(default=None, ge=1, description="Logical CPUs.")
    host: str | None = Field(
        default=None,
        description="A label for the machine: the spec's `host_label` (never the machine's own "
        "name), secrets masked.",
        examples=["lab-h200-1"],
    )
    accelerator: str | None = Field(
        default=None,
        description="GPU model, or none on a CPU server.",
        examples=["NVIDIA RTX PRO 6000 Blackwell"],
    )
    count: Int | None = Field(
        default=None,
        ge=1,
        description="Number of accelerators the server sees (those `CUDA_VISIBLE_DEVICES` in "
        "its environment leaves, not every one the machine has).",
    )
    accelerator_memory_gib: Finite | None = Field(
        default=None,
        ge=0,
        description="Memory of one accelerator in GiB (nvidia-smi's memory.total; the "
        "smallest one's when they differ).",
        examples=[140.4],
    )
    devices: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None,
        description="Which of the machine's GPUs the server was given (nvidia-smi's indices, "
        "in `CUDA_VISIBLE_DEVICES`'s order), where that variable chose them: the GPU of each "
        "block of a Ray run on a node of several; absent when the server saw them all.",
        examples=[[1]],
    )
    interconnect: str | None = Field(
        default=None, description="How accelerators are linked.", examples=["PCIe (no NVLink)"]
    )


class Software(Model):
    """The software around the engine, as `kbgen bench` found it when the run started."""

    kbgen: str | None = Field(
        default=None,
        description="The kbgen that measured (`provenance.tool` is the one that wrote the record).",
        examples=["0.1.0"],
    )
    python: str | None = Field(
        default=None, description="Python of the server's environment.", examples=["3.12.3"]
    )
    torch: str | None = Field(
        default=None, description="torch of the server's environment.", examples=["2.11.0"]
    )
    cuda: str | None = Field(
        default=None,
        description="The CUDA that torch was built for (`torch.version.cuda`); none on a CPU "
        "build.",
        examples=["13.0"],
    )
    driver: str | None = Field(
        default=None, description="NVIDIA driver version (nvidia-smi).", examples=["570.133.20"]
    )


class KbgenBuild(Model):
    """The kbgen whose code ran a benchmark: its version, and its commit where one can be known.

    Not the spec's repository: that is `Provenance.git_sha`, named separately even when the
    spec sits in kbgen's own checkout.
    """

    version: str = Field(
        min_length=1, description="kbgen's version (`kbgen.__version__`).", examples=["0.1.0"]
    )
    commit: str | None = Field(
        default=None,
        min_length=1,
        description="The commit its code came from (absent: unknown, and the record's notes say "
        "why).",
        examples=["b3f7adae1f0c4a8e6d2b9c7f5e3a1d0c8b6a4f2e"],
    )
    commit_from: Literal["checkout", "direct_url"] | None = Field(
        default=None,
        description="Where the commit was read: `checkout`, the git work tree whose commit holds "
        "the imported package's files (a clone on the path, an editable install); `direct_url`, "
        "the installed distribution's `direct_url.json` (PEP 610), which names the VCS commit "
        "`pip install git+URL@REV` built it from. Absent with the commit.",
    )
    changed: Bool | None = Field(
        default=None,
        description="From a checkout: whether the package's files there differ from that commit "
        "(then the commit is not all that ran). Absent otherwise.",
    )

    @model_validator(mode="after")
    def _commit_and_where(self) -> KbgenBuild:
        errors: list[tuple[tuple[str | int, ...], str]] = []
        if (self.commit is None) != (self.commit_from is None):
            errors.append((("commit_from",), "set with the commit, and only with it"))
        if self.changed is not None and self.commit_from != "checkout":
            errors.append((("changed",), "only a checkout has changes"))
        fail_at("KbgenBuild", errors)
        return self


class Config(Model):
    """Everything that defines the setup, so that two records can be compared fairly."""

    engine: Engine = Field(description="The engine and its version.")
    model: ModelInfo = Field(description="The model served.")
    hardware: Hardware = Field(description="The hardware it ran on.")
    software: Software | None = Field(
        default=None, description="Python, torch, CUDA and driver versions (None: not recorded)."
    )
    server_args: list[str] = Field(
        default_factory=list,
        description="Server arguments common to every variant.",
        examples=[["--max-model-len", "2048"]],
    )
    server_env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment of every variant's server (secrets masked); its `VLLM_*` "
        "variables are vLLM settings, so they are part of the question a record answers.",
        examples=[{"VLLM_USE_V2_MODEL_RUNNER": "0"}],
    )
    baseline: VariantName = Field(description="The variant the others are compared against.")
    variants: dict[VariantName, Variant] = Field(
        min_length=1, description="The arms of the experiment, by name."
    )
    sweep: dict[str, list[JsonValue]] = Field(
        default_factory=dict,
        description="The spec's grid: each swept setting by its dotted path, with its values "
        "(server settings became the variants, loads the workload's `loads`).",
        examples=[{"ngram.speculative_config.num_speculative_tokens": [1, 3, 5]}],
    )

    @model_validator(mode="after")
    def _baseline_is_a_variant(self) -> Config:
        if self.baseline not in self.variants:
            fail_at(
                "Config",
                [
                    (
                        ("baseline",),
                        f"{self.baseline!r} is not one of the variants "
                        f"({', '.join(sorted(self.variants))})",
                    )
                ],
            )
        return self


class TokenCounts(Model):
    """Tokens per request over a set of requests, as the client counted them."""

    n: Count = Field(description="Requests counted.")
    mean: NonNegative = Field(description="Mean tokens per request.")
    min: Count | None = Field(
        default=None, description="Fewest tokens of a request (None: only a total was reported)."
    )
    max: Count | None = Field(
        default=None, description="Most tokens of a request (None: only a total was reported)."
    )


class Workload(Model):
    """What was sent to the server."""

    prompt_suite: str = Field(
        description="Prompt suite name or file (a measured record: its path from the top of the "
        "spec's repository).",
        examples=["bench/prompts/seed.jsonl"],
    )
    prompt_suite_sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="Checksum of the prompt suite file."
    )
    classes: list[Slug] = Field(
        min_length=1, description="Prompt classes measured.", examples=[["coding", "math"]]
    )
    max_tokens: Int | None = Field(default=None, ge=1, description="Output tokens per request.")
    temperature: Finite | None = Field(default=None, ge=0, description="Sampling temperature.")
    ignore_eos: Bool | None = Field(default=None, description="Whether output length was forced.")
    seed: Int | None = Field(default=None, description="Sampling seed.")
    warmup: Int | None = Field(default=None, ge=0, description="Warm-up requests, not measured.")
    repeats: Int | None = Field(
        default=None, ge=1, description="Times each prompt was sent to each arm within a round."
    )
    concurrency: Int | None = Field(default=None, ge=1, description="Requests in flight.")
    request_rate: RequestRate | None = Field(
        default=None,
        description="Requests started per second: `inf`, each as soon as `concurrency` lets it "
        "start, as `kbgen bench` sends them (None: not recorded; a measured record's is `inf`).",
        examples=["inf", 8.0],
    )
    api: Api | None = Field(default=None, description="OpenAI endpoint used.")
    usage: UsageMode | None = Field(
        default=None,
        description="How the client asked the server for token counts: `continuous` on every "
        "chunk, `final` at the end of each stream only (None: not recorded; kbgen's runs before "
        "this field asked on every chunk).",
    )
    input_tokens: TokenCounts | None = Field(
        default=None,
        description="Prompt tokens per request, as the client counted them over every arm's "
        "successful requests (an import's; a measured record's prompts are its suite's).",
    )
    output_tokens: TokenCounts | None = Field(
        default=None,
        description="Output tokens per request, as the client counted them over every arm's "
        "successful requests (an import's).",
    )
    rounds: Int | None = Field(
        default=None,
        ge=1,
        description="Rounds of the interleaved design: each ran every arm once (None: one "
        "round, the baseline first).",
    )
    order_seed: Int | None = Field(
        default=None, description="Seed of the round order and of each round's prompt order."
    )
    order: list[tuple[Int, VariantName] | tuple[Int, VariantName, Int]] | None = Field(
        default=None,
        description="The measurement windows as [round, variant], in the order they ran; a "
        "sweep's as [round, variant, load level] (an index into `loads`).",
        examples=[[[0, "ngram"], [0, "baseline"], [1, "baseline"], [1, "ngram"]]],
    )
    loads: list[Load] | None = Field(
        default=None,
        description="A sweep's load levels, in order: each measured inside every server start "
        "(None: the workload's one load).",
        examples=[[{"concurrency": 1}, {"concurrency": 8}]],
    )
    stop: Literal["when-decided"] | None = Field(
        default=None,
        description="`when-decided`: the run looked at the end of every round from the second "
        "on and stopped when every class was decided, `rounds` its most (None: the fixed "
        "design, every round run).",
    )
    max_minutes: Finite | None = Field(
        default=None, gt=0, description="A stopping run's wall-time budget, in minutes."
    )
    accept_time_confound: Literal[True] | None = Field(
        default=None,
        description="True: the spec accepted a verdict from one round, the arms measured one "
        "after the other and so confounded with time (None: one round decides nothing).",
    )

    @model_validator(mode="after")
    def _classes_once(self) -> Workload:
        fail_at("Workload", repeats_of("classes", self.classes))
        return self


# --- results --------------------------------------------------------------------------------


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


class EffectiveSettings(Model):
    """What one variant's server said it ran with (vLLM's own log), beyond the arguments given.

    vLLM changes settings by itself: with n-gram speculation it turns off async scheduling and
    falls back from Model Runner V2 to V1. Compared between the arms, a difference the arms'
    own arguments do not explain is a caveat on the verdict.
    """

    args: dict[str, Any] = Field(
        default_factory=dict,
        description="vLLM's logged `non-default args: {...}` (the arguments that differ from its "
        "defaults, as it parsed them).",
        examples=[{"max_model_len": 2048, "enforce_eager": True}],
    )
    config: dict[str, str] = Field(
        default_factory=dict,
        description="The engine configuration vLLM logged at start (`Initializing a V1 LLM "
        "engine (vX) with config: ...`): its key=value pairs with plain values, the speculative "
        "config, and the compilation config's `mode` and `cudagraph_mode`, as logged.",
        examples=[{"dtype": "torch.bfloat16", "enforce_eager": "False"}],
    )
    behaviour: dict[str, str] = Field(
        default_factory=dict,
        description="What the engine chose at start, read from its log lines: `async_scheduling` "
        "(enabled, disabled) and `model_runner` (V1, V2); absent when it did not say.",
        examples=[{"async_scheduling": "disabled", "model_runner": "V1"}],
    )
    startup: list[dict[str, NonNegative]] = Field(
        default_factory=list,
        description="Each launch's start-up as its log told it, in launch order: `weights_s` "
        "(the target's weights), `draft_weights_s` (a draft model's own), `model_load_s` and "
        "`model_memory_gib` (both models loaded), `compile_s` (torch.compile; the target's "
        "where a draft model compiles too), `draft_compile_s` (the draft's torch.compile), "
        "`graph_capture_s` and `graph_memory_gib` (CUDA graphs), `kv_cache_gib` and "
        "`engine_init_s` (profiling, KV cache and warm-up); a phase it did not log is absent.",
        examples=[[{"weights_s": 0.08, "draft_weights_s": 0.01, "compile_s": 19.26}]],
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Its warnings that change behaviour (something not supported, disabled, "
        "ignored, falling back), each once across its processes and launches.",
        examples=[
            [
                "Async scheduling not supported with ngram-based speculative decoding and "
                "will be disabled."
            ]
        ],
    )


class Draft(Model):
    """The weights of a variant's own draft model (EAGLE-3, a small LM, ...), as found where its
    server started: which files the speculation ran, so a re-run can check it has the same."""

    path: str = Field(description="The speculative config's `model`, as the spec gives it.")
    sha256: str | None = Field(
        default=None,
        description="sha256 of a local file, or of a local folder's regular files (each file's "
        "name and sha256, in name order); None: not a local path (a hub name).",
    )
    bytes: Int | None = Field(default=None, ge=0, description="Their size (None: not local).")


class Artifact(Model):
    """A file or folder a step read or made, named so that another run can check it has the
    same one."""

    name: str = Field(min_length=1, description="What it is.", examples=["training rows"])
    path: str = Field(min_length=1, description="Where it was, as the step's scripts name it.")
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="Its sha256 (a folder's: each file's name and sha256, in name order).",
    )
    bytes: Int | None = Field(default=None, ge=0, description="Its size.")
    count: Int | None = Field(
        default=None, ge=0, description="How many items it holds (rows, prompts, files)."
    )


class Step(Model):
    """A plan's step that is work rather than a test — data collected, a model trained: what
    went in, what came out, its figures and what it took. A record of a step is concluded when
    the work is done; it has no hypothesis and no verdict."""

    kind: Slug = Field(description="What kind of work.", examples=["collect-data", "train-draft"])
    how: Markdown = Field(description="What was run, in words: the command, its settings.")
    inputs: list[Artifact] = Field(default_factory=list, description="What it read.")
    outputs: list[Artifact] = Field(min_length=1, description="What it made.")
    figures: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")], Finite] = Field(
        default_factory=dict,
        description="Its figures, each named with its unit (`generated_tokens`, `seconds`, "
        "`final_loss`): what the scripts measured, not a judgement.",
        examples=[{"generated_tokens": 614400, "generate_s": 25.5}],
    )
    minutes: NonNegative | None = Field(default=None, description="Its wall time.")
    accelerator_minutes: NonNegative | None = Field(
        default=None, description="Accelerator time it held (accelerators x minutes)."
    )


class Saved(Model):
    """What a stopped or raced run did not spend, against its fixed design."""

    starts: Count = Field(description="Server starts the fixed design would have made more.")
    windows: Count = Field(description="Measurement windows it skipped.")
    minutes: NonNegative = Field(
        description="About the time that is: the skipped starts at this run's mean start-up, the "
        "skipped windows at its mean window."
    )
    accelerator_minutes: NonNegative | None = Field(
        default=None, description="The same in accelerator-minutes (None: no accelerator known)."
    )


class Stop(Model):
    """Where a run that stops when decided stopped, and why."""

    round: Count = Field(ge=1, description="The round it stopped in, from 1.")
    reason: Literal["decided", "minutes"] = Field(
        description="`decided`: every class of every comparison was decided; `minutes`: its "
        "`max_minutes` was spent."
    )


class Cost(Model):
    """What a measured record cost to learn."""

    design: Literal["fixed", "when-decided"] = Field(description="The design that ran.")
    starts: Count = Field(description="Server starts, resumes included.")
    startup_minutes: NonNegative = Field(description="Their start-up time in all.")
    server_minutes: NonNegative | None = Field(
        default=None,
        description="Time its servers were up, from each launch to the end of the last window "
        "it served (None: no server started by kbgen).",
    )
    accelerators: Count | None = Field(
        default=None, description="Accelerators each server ran on (None: none known)."
    )
    accelerator_minutes: NonNegative | None = Field(
        default=None, description="accelerators x server_minutes (None: either unknown)."
    )
    window_minutes: NonNegative = Field(description="Time in measurement windows.")
    windows: Count = Field(description="Measurement windows run.")
    planned_windows: Count = Field(description="Windows of the fixed design.")
    requests: Count = Field(description="Requests sent, failed attempts included.")
    output_tokens: Count = Field(description="Output tokens of the successful requests.")
    stopped: Stop | None = Field(default=None, description="Where it stopped, if early.")
    left: dict[VariantName, str] = Field(
        default_factory=dict,
        description="A sweep's variants that left the race, and why: no further windows.",
    )
    saved: Saved | None = Field(
        default=None, description="What stopping or racing saved (None: the whole design ran)."
    )

    def minutes_with(self, prompts: int, measured: int) -> float:
        """About the minutes the same design would take with `prompts` per class instead of
        the `measured`: its start-ups, its windows scaled by the prompts."""
        return self.startup_minutes + self.window_minutes * prompts / measured


class Provenance(Model):
    """Where the numbers of a record come from."""

    source: Literal["measured", "reported", "imported"] = Field(
        description="`measured` by kbgen bench, `reported` by hand from an account, or "
        "`imported` from another tool's result file."
    )
    tool: str | None = Field(default=None, description="Tool and version that wrote the record.")
    reference: str | None = Field(
        default=None, description="Where a reported or imported result was published or found."
    )
    kbgen: KbgenBuild | None = Field(
        default=None,
        description="The kbgen whose code ran the benchmark, and its commit (absent: not "
        "recorded; `tool` is the kbgen that wrote the record).",
    )
    git_sha: str | None = Field(
        default=None,
        description="Commit of the git repository the experiment spec sat in — the spec's, not "
        "kbgen's (that is `kbgen.commit`); the two are the same checkout only when "
        "`spec_in_kbgen_checkout` says so. None: the spec was in no repository (the notes say "
        "so).",
    )
    git_changed: Bool | None = Field(
        default=None,
        description="Whether the spec's work tree had changes that commit does not hold "
        "(absent: not recorded, or no repository).",
    )
    spec_in_kbgen_checkout: Bool | None = Field(
        default=None,
        description="Whether the spec sat in the very checkout kbgen's code ran from (then "
        "`git_sha` equals `kbgen.commit`); false: another repository, or another work tree. "
        "Absent: no repository, or not recorded.",
    )
    host: str | None = Field(
        default=None, description="The label of the machine that ran the benchmark."
    )
    recorded_at: dt.datetime | None = Field(default=None, description="When it was recorded.")
    run: str | None = Field(default=None, description="The `kbgen bench` run folder's id.")
    notes: list[str] = Field(
        default_factory=list,
        description="What was imported and what could not be (e.g. no per-class split).",
    )

    @model_validator(mode="after")
    def _one_checkout_one_commit(self) -> Provenance:
        kbgen_commit = self.kbgen.commit if self.kbgen is not None else None
        if self.spec_in_kbgen_checkout and (self.git_sha is None or kbgen_commit != self.git_sha):
            message = "one checkout has one commit: git_sha and kbgen.commit must be the same"
            fail_at("Provenance", [(("spec_in_kbgen_checkout",), message)])
        return self


class Machine(Model):
    """One block of a run spread over several machines: where it ran and on what."""

    block: Count = Field(description="The block's number, from 0 (its samples' `block`).")
    hardware: Hardware | None = Field(default=None, description="Its machine, as its node saw.")
    software: Software | None = Field(default=None, description="Its server's software stack.")
    nodes: list[str] = Field(
        description="The Ray nodes its attempts ran on, in order (the id's first 8 hex digits, "
        "and the node's host label where it has one); more than one: a node was lost."
    )
    requests: Count = Field(description="Requests it sent, failed attempts included.")


class RawSamples(Model):
    """Pointer to the per-request samples every number on the record is computed from."""

    path: str = Field(
        pattern=r"^[^/\\][^\\]*$",
        description="Path relative to the record's folder.",
        examples=["2026-11-29-ngram-vs-baseline.samples.jsonl.gz"],
    )
    sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="Checksum of the samples file."
    )

    @model_validator(mode="after")
    def _stays_inside(self) -> RawSamples:
        if ".." in self.path.split("/"):
            fail_at("RawSamples", [(("path",), "must stay inside the records folder")])
        return self


class Record(Model):
    """One experiment: hypothesis, setup, measurements and the verdict they support."""

    schema_version: Literal[1] = Field(description="Version of this schema.")
    id: Slug = Field(description="Unique id; equals the file name without `.yaml`.")
    title: str = Field(min_length=1, max_length=200, description="One-line title.")
    status: Status = Field(description="planned → running → concluded; or superseded.")
    created: dt.date = Field(description="When the record was opened.")
    concluded: dt.date | None = Field(default=None, description="When the verdict was reached.")
    context: Markdown | None = Field(default=None, description="Why the experiment was run.")
    hypothesis: Hypothesis | None = Field(
        default=None, description="The claim under test (required once running)."
    )
    config: Config | None = Field(default=None, description="Engine, model, hardware, variants.")
    workload: Workload | None = Field(default=None, description="What was sent to the server.")
    unknown: list[Unknowable] = Field(
        default_factory=list,
        description="The parts of the setup its source did not say (an import: neither the "
        "tool's file nor the spec given with it), left empty or `unknown` in the record: "
        "unknown, not unset, so a record with one answers no question (two records that both "
        "lack a field may differ in it).",
        examples=[["config.hardware", "workload.temperature"]],
    )
    measurements: Measurements = Field(
        default_factory=dict, description="variant → prompt class → metric → summary."
    )
    by_load: list[LoadMeasurements] = Field(
        default_factory=list,
        description="A sweep with several load levels: the measurements at each, in the order "
        "of `workload.loads` (`measurements` is the first level's).",
    )
    spec_decode: dict[VariantName, SpecDecodeStats] = Field(
        default_factory=dict, description="Speculative-decoding statistics per variant."
    )
    verdict: Verdict | None = Field(default=None, description="Required once concluded.")
    decision: Markdown | None = Field(default=None, description="What was decided.")
    consequences: Markdown | None = Field(default=None, description="What follows from it.")
    resolves: list[TaskRef] = Field(
        default_factory=list, description="Plan tasks this record resolves once concluded."
    )
    supersedes: list[Slug] = Field(default_factory=list, description="Records this replaces.")
    related: list[Slug] = Field(default_factory=list, description="Records worth reading too.")
    tags: list[Slug] = Field(default_factory=list, description="Free tags for the site.")
    provenance: Provenance | None = Field(default=None, description="Where the numbers come from.")
    step: Step | None = Field(
        default=None,
        description="A plan's step that is work, not a test (no hypothesis, no verdict).",
    )
    machines: list[Machine] = Field(
        default_factory=list,
        description="A run over several machines (`kbgen bench --ray`): each block's machine, "
        "its nodes and its share of the requests (absent: one machine).",
    )
    effective: dict[VariantName, EffectiveSettings] = Field(
        default_factory=dict,
        description="What each variant's server said it ran with (measured records from a log).",
    )
    startup_s: dict[VariantName, list[NonNegative]] = Field(
        default_factory=dict,
        description="Seconds from launching each variant's server until it answered healthy, "
        "one per launch (a server reused from the arm before is no launch).",
        examples=[{"baseline": [81.4, 79.9], "ngram": [92.0]}],
    )
    drafts: dict[VariantName, Draft] = Field(
        default_factory=dict,
        description="Each variant with a draft model of its own: the draft's path and checksum.",
    )
    raw_samples: RawSamples | None = Field(default=None, description="The samples behind it.")
    cost: Cost | None = Field(
        default=None,
        description="What it cost: starts, server and accelerator time, requests, tokens; what "
        "stopping saved (a measured record's; None: not known).",
    )

    @model_validator(mode="after")
    def _lifecycle(self) -> Record:
        errors: list[tuple[tuple[str | int, ...], str]] = []
        if self.step is not None:
            for name in ("hypothesis", "verdict"):
                if getattr(self, name) is not None:
                    errors.append(((name,), "a step's record has none: it tests nothing"))
        elif self.status in (Status.RUNNING, Status.CONCLUDED) and self.hypothesis is None:
            errors.append((("hypothesis",), f"required when status is {self.status}"))
        if self.status == Status.CONCLUDED:
            needed = ("verdict", "concluded", "config", "provenance")
            for name in needed if self.step is None else ("concluded", "provenance"):
                if getattr(self, name) is None:
                    errors.append(((name,), "required when status is concluded"))
        if self.concluded is not None and self.concluded < self.created:
            errors.append((("concluded",), f"{self.concluded} is before created ({self.created})"))
        errors += repeats_of("unknown", self.unknown)
        for i, path in enumerate(self.unknown):
            part, name = path.split(".")
            section = getattr(self, part)
            if section is None:
                errors.append((("unknown", i), f"the record has no {part}"))
            elif not _empty(getattr(section, name)):
                errors.append(
                    (("unknown", i), f"{path} is set: a field that is known is not unknown")
                )
        for i, other in enumerate(self.supersedes):
            if other == self.id:
                errors.append((("supersedes", i), "a record cannot supersede itself"))
        if self.config is not None:
            variants = self.config.variants
            for section in ("measurements", "spec_decode", "effective", "startup_s", "drafts"):
                for name in getattr(self, section):
                    if name not in variants:
                        errors.append(((section, name), f"{name!r} is not a variant in config"))
            if self.verdict and self.verdict.variant not in variants:
                errors.append(
                    (("verdict", "variant"), f"{self.verdict.variant!r} is not a variant")
                )
            for i, cell in enumerate(self.verdict.cells if self.verdict else []):
                if cell.variant not in variants:
                    message = f"{cell.variant!r} is not a variant"
                    errors.append((("verdict", "cells", i, "variant"), message))
            for i, point in enumerate(self.verdict.pareto if self.verdict else []):
                for loc, name in [
                    (("variant",), point.variant),
                    *(
                        (("dominated_by", j, "variant"), d.variant)
                        for j, d in enumerate(point.dominated_by)
                    ),
                ]:
                    if name not in variants:
                        errors.append(
                            (("verdict", "pareto", i, *loc), f"{name!r} is not a variant")
                        )
        fail_at("Record", errors)
        return self


class Task(Model):
    """One step of a plan. It is done when a concluded record resolves it."""

    id: Annotated[str, Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")] = Field(
        description="Id unique within the plan; records refer to it as `PLAN#TASK`.",
        examples=["test-ngram"],
    )
    text: str = Field(min_length=1, description="What is to be done.")


class Plan(Model):
    """A plan whose checklist ticks itself as records conclude."""

    schema_version: Literal[1] = Field(description="Version of this schema.")
    id: Slug = Field(description="Unique id; equals the file name without `.yaml`.")
    title: str = Field(min_length=1, max_length=200, description="One-line title.")
    context: Markdown | None = Field(default=None, description="Why this plan exists.")
    tasks: list[Task] = Field(min_length=1, description="The steps, in order.")

    @model_validator(mode="after")
    def _unique_tasks(self) -> Plan:
        seen: set[str] = set()
        errors: list[tuple[tuple[str | int, ...], str]] = []
        for i, task in enumerate(self.tasks):
            if task.id in seen:
                errors.append((("tasks", i, "id"), f"{task.id!r} appears twice"))
            seen.add(task.id)
        fail_at("Plan", errors)
        return self


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each document kind, keyed by file stem."""
    return {
        "record.schema": Record.model_json_schema(),
        "plan.schema": Plan.model_json_schema(),
    }
