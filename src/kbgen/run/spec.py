"""Experiment specs (`bench/experiments/*.yaml`): what `kbgen bench` runs, validated like records.

A spec names the hypothesis, how to reach or start the server, the variants (server arguments
that differ between arms, e.g. a `speculative_config`), the workload, and the plan tasks a
concluded result resolves. Its relative paths are read from its `workdir` (by default the
spec's own folder), wherever kbgen runs.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, JsonValue, PrivateAttr, model_validator
from pydantic_core import PydanticCustomError

from kbgen.errors import InvalidInput
from kbgen.kb import documents
from kbgen.kb.models import (
    Api,
    Arrivals,
    Hardware,
    Hypothesis,
    Load,
    Model,
    Prefixes,
    Sessions,
    Slug,
    Synthetic,
    TaskRef,
    Trace,
    UsageMode,
    Variant,
    VariantName,
    fail_at,
    repeats_of,
)
from kbgen.kb.numbers import MAX_TOKENS, Bool, Finite, Int
from kbgen.kb.problems import located
from kbgen.run import sweep as grid

# Limits of a spec. Concurrency: vLLM batches at most `max_num_seqs` sequences (256 by
# default, 1024 on large GPUs); past a few thousand streams the client measures itself, not
# the server. Requests: every request of a run is planned and its sample kept in memory while
# the record is made; 100,000 is more than a day of requests at one a second.
MAX_CONCURRENCY = 4096
MAX_REQUEST_RATE = grid.MAX_RATE  # requests per second
MAX_REQUESTS = 100_000
MAX_REPEATS = 1000
MAX_ROUNDS = 1000
MAX_CLIENT_PROCESSES = 64
MAX_BLOCKS = 256  # a cluster of 256 nodes; a unit of the verdict keeps its block below UNIT_STRIDE
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week; larger ones overflow the event loop's clock
Timeout = Annotated[Finite, Field(gt=0, le=MAX_TIMEOUT_S)]
ClientProcesses = Annotated[Int, Field(ge=1, le=MAX_CLIENT_PROCESSES)]


def _http_url(value: str) -> str:
    """A server's base URL: http or https, a host, a port that is one. A URL with a `${NAME}`
    in it is checked only as it is filled in, when the server is reached."""
    if "$" in value:
        return value
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise PydanticCustomError("url", "not a URL: {reason}", {"reason": str(exc)}) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError(
            "url", "should be an http:// or https:// URL with a host (http://127.0.0.1:8000)"
        )
    return value


Url = Annotated[str, AfterValidator(_http_url)]


class ExternalServer(Model):
    """A server someone else runs: kbgen only waits for it to be healthy."""

    launcher: Literal["external"] = Field(description="Reach a running server by URL.")
    url: Url = Field(description="Base URL.", examples=["http://127.0.0.1:8000"])
    startup_timeout_s: Timeout = Field(default=600, description="How long to wait for it.")


class ProcessServer(Model):
    """kbgen starts the server itself, once per variant, and stops it afterwards."""

    launcher: Literal["process"] = Field(description="Start `COMMAND MODEL ARGS…` per variant.")
    command: list[str] = Field(
        min_length=1,
        description="The command that starts vLLM; the model, the common and the variant's "
        "arguments, and `--host`/`--port` are appended.",
        examples=[["vllm", "serve"], [".vllm/venv/bin/python", "bench/vllm/vllm_cli.py", "serve"]],
    )
    model: str = Field(description="Model path or name.", examples=[".vllm/models/smollm2"])
    args: list[str] = Field(
        default_factory=list,
        description="Server arguments common to every variant.",
        examples=[["--max-model-len", "2048"]],
    )
    host: str = Field(default="127.0.0.1", description="Address to bind and to reach.")
    port: Int = Field(default=8000, ge=1, le=65535, description="Port to bind and to reach.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of the server process."
    )
    startup_timeout_s: Timeout = Field(
        default=3600,
        description="How long a start may take before kbgen gives up (a large model loads for "
        "an hour or more).",
    )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class CommandServer(Model):
    """The user's own start and stop commands (a systemd unit swap, a container, a script)."""

    launcher: Literal["command"] = Field(description="Run the user's shell commands.")
    start: str = Field(
        description="Shell command that starts the server for a variant; `{variant}` and "
        "`{args}` (the variant's server arguments, shell-quoted) are filled in.",
        examples=["sudo systemctl restart vllm@{variant}"],
    )
    stop: str | None = Field(
        default=None,
        description="Shell command that stops it.",
        examples=["sudo systemctl stop vllm@{variant}"],
    )
    url: Url = Field(description="Base URL of the server once started.")
    startup_timeout_s: Timeout = Field(default=3600, description="How long a start may take.")


Server = Annotated[
    ExternalServer | ProcessServer | CommandServer,
    Field(discriminator="launcher", description="How to reach or start the server."),
]


class WorkloadSpec(Model):
    """What to send, how often, and how."""

    prompts: str | None = Field(
        default=None,
        description="JSONL file of prompts: one object per line with `prompt` and `class` "
        "(or `synthetic` or `trace` instead).",
        examples=["bench/prompts/seed.jsonl"],
    )
    classes: list[Slug] = Field(
        default_factory=list,
        description="Prompt classes to measure (with `synthetic` or `trace`: the one class "
        "named so, unset).",
        examples=[["coding", "math"]],
    )
    sessions: Sessions | None = Field(
        default=None,
        description="Multi-turn chats (`api: chat`): each class's prompts, `turns` at a time, "
        "one session's user turns, each sent with the conversation so far after a think time; "
        "the session is the verdict's unit.",
        examples=[{"turns": 3, "think_s": 1.0}],
    )
    synthetic: Synthetic | None = Field(
        default=None,
        description="Requests of drawn input and output lengths instead of a prompt suite, each "
        "prompt built to the token with the served model's tokenizer at the first start.",
        examples=[{"count": 64, "input_tokens": {"mean": 256}, "output_tokens": {"mean": 64}}],
    )
    trace: Trace | None = Field(
        default=None,
        description="A production trace replayed instead of a prompt suite: open loop at its "
        "own times (a `request_rate` scales them), prompts built to its lengths and blocks.",
        examples=[{"path": "bench/traces/generated-small.jsonl", "speedup": 2.0}],
    )
    per_class: Int | None = Field(
        default=None,
        ge=1,
        le=MAX_REQUESTS,
        description="Use the first N prompts of each class (all if unset).",
    )
    api: Api = Field(default="completions", description="OpenAI endpoint.")
    usage: UsageMode = Field(
        default="continuous",
        description="How the server is asked for token counts. `continuous` (usage on every "
        "chunk, `continuous_usage_stats`): exact tokens per chunk, so per-token ITL under "
        "speculative decoding. `final` (usage at the end of each stream, as `vllm bench serve` "
        "asks): the least the server is asked for; TTFT, TPOT and decode rate are the same, "
        "per-token ITL only where every chunk proves to carry one token. bench/perf/agreement.py "
        "measures what either costs the server.",
    )
    max_tokens: Int = Field(
        default=128, ge=1, le=MAX_TOKENS, description="Output tokens per request."
    )
    temperature: Finite = Field(default=0.0, ge=0, description="Sampling temperature.")
    ignore_eos: Bool = Field(
        default=True, description="Force `max_tokens` tokens, so both arms generate as many."
    )
    seed: Int | None = Field(default=0, description="Sampling seed sent with every request.")
    warmup: Int = Field(
        default=2,
        ge=0,
        le=MAX_CONCURRENCY,
        description="Requests before the measurement window (at least concurrency), sent at once.",
    )
    repeats: Int = Field(
        default=3,
        ge=1,
        le=MAX_REPEATS,
        description="Times each prompt is sent to each arm within a round.",
    )
    rounds: Int = Field(
        default=2,
        ge=1,
        le=MAX_ROUNDS,
        description="Rounds of the interleaved design: in each round every arm runs once, in a "
        "seeded, balanced order (AB, BA, …), so the arms are not confounded with time. A round "
        "restarts the server only when its arguments differ from the running one's.",
    )
    accept_time_confound: bool = Field(
        default=False,
        description="Decide from one round (`rounds: 1`) although its arms ran one after the "
        "other, so that any drift of the server enters the effect. Without it a one-round "
        "class is inconclusive; with it the record states the confound beside the verdict.",
    )
    order_seed: Int = Field(
        default=0, description="Seed of the round order and of the prompt order within a round."
    )
    stop: Literal["fixed", "when-decided"] = Field(
        default="fixed",
        description="`fixed`: run every round. `when-decided`: `rounds` is the most it runs; it "
        "looks at the end of every round from the second on (when every arm has run each round "
        "so far) and stops when every class is decided or `max_minutes` is spent, skipping the "
        "starts it no longer needs; a sweep's variant ruled out, or worse than another, at every "
        "load leaves the race. Each look decides at its share of the error, so that all together "
        "err no more than one fixed interval.",
    )
    max_minutes: Finite | None = Field(
        default=None,
        gt=0,
        description="With `stop: when-decided`, a wall-time budget: no window of a round after "
        "the first begins after it, and no such round begins whose windows, as long as this "
        "run's own starts and windows took, would end after it.",
    )
    concurrency: Int = Field(
        default=1,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Requests in flight at once; with `request_rate`, the most in flight (as "
        "`vllm bench serve --max-concurrency`): a request due while that many are in flight "
        "waits, and its lag is kept.",
    )
    request_rate: Finite | None = Field(
        default=None,
        gt=0,
        le=MAX_REQUEST_RATE,
        description="Requests per second, sent open loop at the times `arrivals` draws, whatever "
        "is in flight (up to `concurrency`, which must then be given); each arm gets the same "
        "times in a round and load level. Unset: closed loop, each request sent as soon as "
        "`concurrency` lets it. A load level: `sweep: {workload.request_rate: [1, 2, 4]}`.",
        examples=[4.0],
    )
    arrivals: Arrivals | None = Field(
        default=None,
        description="How requests arrive at `request_rate` (unset: Poisson, seed 0).",
        examples=[{"process": "gamma", "burstiness": 0.5, "seed": 1}],
    )
    prefixes: Prefixes | None = Field(
        default=None,
        description="Shared prefixes put before each prompt (chat: as its system message), each "
        "prompt drawing one, built to the token with the served model's tokenizer (the server's "
        "`/tokenize`) at the first start and kept in run.json.",
        examples=[{"count": 4, "tokens": 512}],
    )
    reset_prefix_cache: Bool = Field(
        default=False,
        description="Empty the server's prefix cache after each window's warm-up (vLLM's POST "
        "/reset_prefix_cache, with VLLM_SERVER_DEV_MODE=1): no window starts warm from another.",
    )
    client_processes: ClientProcesses | Literal["auto"] = Field(
        default="auto",
        description="Processes the client's streams are split over, each with its own event "
        "loop and connections, stamping chunks on receipt (one clock for all of them); the "
        "samples come back to kbgen's own process, which alone writes the run folder, and are "
        "the same rows either way. One process ingests about 200k chunks/s on a free core; a "
        "fast server at hundreds of streams sends more. `auto`: one process per 128 streams "
        "(one up to 128), at most one per CPU kbgen may use.",
        examples=["auto", 1, 4],
    )
    stall_timeout_s: Timeout = Field(
        default=120, description="A stream silent this long is recorded as failed."
    )
    request_timeout_s: Timeout = Field(default=1800, description="Limit for one request.")

    @model_validator(mode="after")
    def _classes_once(self) -> WorkloadSpec:
        # a class listed twice would send each of its prompts twice as often as the spec says
        fail_at("WorkloadSpec", repeats_of("classes", self.classes))
        fail_at("WorkloadSpec", self._source())
        if self.sessions is not None and self.api != "chat":
            fail_at("WorkloadSpec", [(("sessions",), "are chats: they need `api: chat`")])
        if self.sessions is not None and self.trace is not None:
            message = "a trace's requests are its own: its blocks say which share a history"
            fail_at("WorkloadSpec", [(("sessions",), message)])
        if self.source != "prompts":
            self.classes = [self.source]
        if self.max_minutes is not None and self.stop != "when-decided":
            fail_at("WorkloadSpec", [(("max_minutes",), "is a budget of `stop: when-decided`")])
        return self

    @property
    def source(self) -> Literal["prompts", "synthetic", "trace"]:
        """Where the requests come from: the prompt suite, drawn lengths or a trace."""
        return "synthetic" if self.synthetic else "trace" if self.trace else "prompts"

    def _source(self) -> list[tuple[tuple[str | int, ...], str]]:
        given = [name for name in ("prompts", "synthetic", "trace") if getattr(self, name)]
        if not given:
            return [(("prompts",), "name a prompt suite (or `synthetic` or `trace` requests)")]
        if len(given) > 1:
            return [((given[1],), f"requests come from one source: {' or '.join(given)}")]
        if given[0] == "prompts":
            return [(("classes",), "name the classes to measure")] if not self.classes else []
        refused = {"per_class": "a prompt suite's", "max_tokens": "each request asks for its own"}
        if given[0] == "trace":
            refused["prefixes"] = "its blocks say which requests share a prefix"
        for name in (n for n in refused if n in self.model_fields_set):
            return [((name,), f"not with {given[0]} requests: {refused[name]}")]
        wrong = [c for c in self.classes if c != given[0]]
        return [(("classes",), f"{given[0]} requests are one class, {given[0]!r}")] * bool(wrong)


class ClusterSpec(Model):
    """How `kbgen bench --ray` splits the experiment over a Ray cluster: blocks, each the whole
    interleaved design on one node with its own server, and what a block's node must have."""

    blocks: Int = Field(
        ge=1,
        le=MAX_BLOCKS,
        description="Blocks: each runs every round of every arm on one node, its own server "
        "started there (block i on the spec's port + i, its own order seed: `order_seed` + i); "
        "the verdict pairs arms within a block and pools the blocks.",
    )
    num_gpus: Finite | None = Field(
        default=None,
        ge=0,
        description="GPUs a block holds (a fraction shares one: 0.5 runs two blocks on a GPU; "
        "give the server its share of memory in `args`).",
    )
    num_cpus: Finite = Field(default=1, ge=0, description="CPUs a block holds on its node.")
    resources: dict[str, Finite] = Field(
        default_factory=dict,
        description="Custom Ray resources a block holds (as `ray start --resources` declares "
        "them), to pin blocks to the nodes that have them.",
        examples=[{"h200": 1}],
    )
    retries: Int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times a block whose node died runs again elsewhere, from where it was.",
    )


class ExperimentSpec(Model):
    """One A/B (or A/B/n) experiment against an LLM server."""

    schema_version: Literal[1] = Field(description="Version of this schema.")
    id: Slug = Field(description="Experiment id; run folders and records are named after it.")
    title: str = Field(min_length=1, max_length=200, description="One-line title.")
    hypothesis: Hypothesis = Field(description="The claim under test.")
    server: Server
    baseline: VariantName = Field(description="The variant the others are compared against.")
    variants: dict[VariantName, Variant] = Field(min_length=2, description="The arms, by name.")
    workload: WorkloadSpec = Field(description="What is sent.")
    sweep: dict[str, list[JsonValue]] = Field(
        default_factory=dict,
        description="A grid, by dotted path: `VARIANT.speculative_config.FIELD` or "
        "`VARIANT.args.--FLAG` (a server setting: the variant becomes one variant per value, "
        "each its own server start, named `VARIANT-k3` and the like) and `workload.concurrency` "
        "or `workload.max_tokens` (a load: every arm runs every level inside the same start). "
        "Every variant is judged against the baseline at every load, the family of comparisons "
        "controlled.",
        examples=[
            {
                "ngram.speculative_config.num_speculative_tokens": [1, 3, 5],
                "workload.concurrency": [1, 8, 32],
            }
        ],
    )
    resolves: list[TaskRef] = Field(
        default_factory=list, description="Plan tasks a concluded result resolves."
    )
    tags: list[Slug] = Field(default_factory=list, description="Tags carried into the record.")
    host_label: str | None = Field(
        default=None,
        min_length=1,
        max_length=80,
        description="A name for the machine kbgen runs on, shown on the record. kbgen never "
        "records the machine's own name; without a label the record names no host. A label "
        "that looks like a secret is masked.",
        examples=["lab-h200-1"],
    )
    workdir: str = Field(
        default=".",
        min_length=1,
        description="The folder relative paths in this spec are read from — the prompts, and a "
        "`process` server's command, model and arguments (the server runs there) — itself "
        "relative to the spec's folder. The default is the spec's folder; `../..` reads them "
        "from the repository root for a spec two folders down.",
        examples=["../.."],
    )
    cluster: ClusterSpec | None = Field(
        default=None,
        description="Blocks over a Ray cluster, for `kbgen bench --ray` (ignored without it).",
    )
    hardware: Hardware | None = Field(
        default=None,
        description="The hardware the server runs on, for a record imported from another tool's "
        "results with this spec (`kbgen record --from … --spec`): its file does not say. "
        "`kbgen bench` records what it finds instead. The machine's label is `host_label`.",
        examples=[{"accelerator": "NVIDIA H200", "count": 1, "accelerator_memory_gib": 140.4}],
    )

    @model_validator(mode="after")
    def _baseline_is_a_variant(self) -> ExperimentSpec:
        errors: list[tuple[tuple[str | int, ...], str]] = []
        if self.baseline not in self.variants:
            errors.append((("baseline",), f"{self.baseline!r} is not a variant"))
        if self.hardware is not None and self.hardware.host is not None:
            errors.append((("hardware", "host"), "the machine's label is host_label"))
        fail_at("ExperimentSpec", errors)
        return self

    _loads: list[Load] = PrivateAttr(default_factory=lambda: [Load()])
    _folder: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _expand_sweep(self) -> ExperimentSpec:
        """The sweep's server settings become variants, its loads the levels (`loads`)."""
        errors: list[tuple[tuple[str | int, ...], str]] = []
        if self.sweep:
            self.variants = grid.variants(self.baseline, self.variants, self.sweep, errors)
            self._loads = grid.loads(self.sweep, errors)
        if self.open_loop and "concurrency" not in self.workload.model_fields_set:
            message = (
                "with a request rate, say how many requests may be in flight at most (as "
                "`vllm bench serve --max-concurrency`): the default, 1, would hold them back"
            )
            errors.append((("workload", "concurrency"), message))
        if self.workload.arrivals is not None and not self.open_loop:
            message = "needs a `request_rate` (the workload's, or a swept one) to arrive at"
            errors.append((("workload", "arrivals"), message))
        if self.workload.trace is not None and self.workload.arrivals is not None:
            message = "a trace arrives at its own times: scale them with `request_rate`"
            errors.append((("workload", "arrivals"), message))
        trace = self.workload.trace
        rated = self.workload.request_rate is not None or "workload.request_rate" in self.sweep
        if trace is not None and "speedup" in trace.model_fields_set and rated:
            message = "sets the trace's speed, as a `request_rate` does: give one of them"
            errors.append((("workload", "trace", "speedup"), message))
        if self.workload.source != "prompts" and "workload.max_tokens" in self.sweep:
            message = f"{self.workload.source} requests each ask for their own output length"
            errors.append((("sweep", "workload.max_tokens"), message))
        if "workload.request_rate" in self.sweep and "workload.concurrency" in self.sweep:
            message = "a sweep varies the request rate or the concurrency, not both"
            errors.append((("sweep", "workload.concurrency"), message))
        fail_at("ExperimentSpec", errors)
        return self

    @property
    def open_loop(self) -> bool:
        """Whether requests are sent at their times: at a request rate (at some load level, so
        at every one) or a trace's."""
        return (
            self.workload.request_rate is not None
            or self.workload.trace is not None
            or any("request_rate" in load for load in self._loads)
        )

    @property
    def loads(self) -> list[Load]:
        """The load levels every arm runs inside each start: `[{}]`, the workload's one load,
        without a swept load."""
        return self._loads

    @property
    def folder(self) -> Path:
        """The folder the spec's relative paths are read from (`workdir`, as `load` found it);
        the current folder for a spec that was not loaded from a file."""
        return self._folder if self._folder is not None else Path.cwd()

    def path(self, relative: str) -> Path:
        """`relative`, a path the spec names, where it lies: read from `folder`."""
        return self.folder / relative

    def workload_at(self, level: int) -> WorkloadSpec:
        """The workload at load level `level`: the workload with the level's settings."""
        return self.workload.model_copy(update={str(k): v for k, v in self._loads[level].items()})


def recorded(variant: Variant) -> Variant:
    """A spec's variant as a record keeps it: what it sets (secrets are masked on writing)."""
    return Variant.model_validate(variant.model_dump(exclude_none=True, exclude_defaults=True))


def server_args(variant: Variant) -> list[str]:
    """The command-line arguments that make a server run `variant`."""
    args = list(variant.args)
    if variant.speculative_config is not None:
        config = variant.speculative_config.model_dump(exclude_none=True)
        args += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    return args


def check_requests(spec: ExperimentSpec, suite: dict[str, list[str]], path: Path) -> None:
    """InvalidInput, located at `workload` in `path` (the spec), when the run would plan more
    than MAX_REQUESTS requests with the prompts of `suite`."""
    prompts = sum(len(suite[name]) for name in spec.workload.classes)
    w, arms, levels = spec.workload, len(spec.variants), len(spec.loads)
    planned = arms * levels * w.rounds * w.repeats * prompts
    if planned > MAX_REQUESTS:
        loads = f" x {levels} loads" if levels > 1 else ""
        raise InvalidInput(
            [
                located(
                    path,
                    ["workload"],
                    f"plans {planned:,} requests ({arms} variants{loads} x {w.rounds} round(s) x "
                    f"{w.repeats} repeat(s) x {prompts:,} prompts); the limit is "
                    f"{MAX_REQUESTS:,}: set per_class, or split the experiment",
                )
            ]
        )


def load(path: Path, folder: Path | None = None) -> ExperimentSpec:
    """A validated spec; InvalidInput with located problems otherwise. Its relative paths are
    read from `folder` where given (a run's spec copy: the folder its original named, kept in
    run.json), from its `workdir` next to `path` otherwise."""
    spec = documents.load_model(path, ExperimentSpec)
    if folder is None:
        folder = (path.parent / spec.workdir).resolve()
        if not folder.is_dir():
            problem = f"{folder} is not a folder (read from the spec's folder)"
            raise InvalidInput([located(path, ["workdir"], problem)])
    spec._folder = folder
    return spec
