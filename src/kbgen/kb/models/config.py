"""What ran: the engine, model, hardware, software, server settings, variants and workload."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kbgen.kb import speculative_args
from kbgen.kb.models.base import (
    Api,
    Load,
    Model,
    RequestRate,
    Slug,
    UsageMode,
    VariantName,
    fail_at,
    repeats_of,
)
from kbgen.kb.models.traffic import Arrivals, Prefixes, Sessions, Synthetic, Trace
from kbgen.kb.numbers import Bool, Count, Finite, Int, NonNegative


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


# Where the experiment spec came from, as run.json and a record's provenance both keep it
SpecCommit = Annotated[
    str | None,
    Field(
        default=None,
        description="Commit of the git repository the experiment spec sat in (without a spec "
        "path, the folder kbgen ran in) — the spec's, not kbgen's (that is `kbgen.commit`); the "
        "two are the same checkout only when `spec_in_kbgen_checkout` says so. None: the spec "
        "was in no repository (the notes say so).",
    ),
]
SpecChanged = Annotated[
    Bool | None,
    Field(
        default=None,
        description="Whether the spec's work tree had changes that commit does not hold "
        "(absent: not recorded, or no repository).",
    ),
]
SpecInKbgenCheckout = Annotated[
    Bool | None,
    Field(
        default=None,
        description="Whether the spec sat in the very checkout kbgen's code ran from (then "
        "`git_sha` equals `kbgen.commit`); false: another repository, or another work tree. "
        "Absent: no repository, or not recorded.",
    ),
]


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
    arrivals: Arrivals | None = Field(
        default=None,
        description="How requests arrived at `request_rate` (None: as soon as `concurrency` let "
        "each start, or as the importing tool said).",
    )
    prefixes: Prefixes | None = Field(
        default=None, description="The shared prefixes the requests drew (None: none)."
    )
    synthetic: Synthetic | None = Field(
        default=None, description="The drawn lengths the requests had (None: a prompt suite)."
    )
    trace: Trace | None = Field(
        default=None, description="The trace replayed, its slice and speed (None: none)."
    )
    sessions: Sessions | None = Field(
        default=None, description="The multi-turn sessions the prompts made (None: none)."
    )
    reset_prefix_cache: Bool | None = Field(
        default=None, description="Whether each window began with the prefix cache emptied."
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
