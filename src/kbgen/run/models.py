"""The run folder's JSON files as models: `run.json` (`RunMeta`) and `summary.json` (`RunTotals`).

Written in field order and as set (`model_dump(exclude_unset=True)`), so a file read and
written back keeps its bytes. run.json carries the folder's `format`, which readers check first.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kbgen.kb.models import (
    Draft,
    EffectiveSettings,
    Hardware,
    KbgenBuild,
    Model,
    Software,
    SpecChanged,
    SpecCommit,
    SpecInKbgenCheckout,
)
from kbgen.kb.numbers import Bool, Count, Finite, Int, NonNegative
from kbgen.run.counters import Counters, MachineLoad

RunStatus = Literal["running", "complete", "interrupted", "failed"]

# The format of a whole run folder (every file in it, not run.json alone), kept in its run.json.
# Bump it when kbgen writes a folder that this code would misread or that lacks what it needs,
# and keep reading the formats before only on purpose: `runs.RunFolder.meta` refuses the rest.
RunFormat = Literal[1]
FORMAT: RunFormat = 1


class Window(Model):
    """One measurement window of a variant: when it ran and its two `/metrics` scrapes."""

    index: Count = Field(description="Window number within the variant, from 0.")
    start_ns: Int = Field(description="perf_counter_ns just before its first request.")
    end_ns: Int = Field(description="perf_counter_ns once its last request had finished.")
    attempt: Count = Field(description="Which run of the folder measured it: 0 first.")
    before: str = Field(description="The scrape before, relative to the run folder.")
    after: str | None = Field(
        description="The scrape after; None when the server no longer answered."
    )
    round: Count | None = Field(
        default=None, description="Round of the interleaved design, from 0 (None: one round)."
    )
    level: Count | None = Field(
        default=None, description="A sweep's load level, from 0 (None: one load)."
    )
    load: MachineLoad | None = Field(
        default=None, description="How busy the machine was meanwhile (None: not measured)."
    )
    client_processes: Count | None = Field(
        default=None,
        ge=2,
        description="Client processes its streams were split over (None: one, kbgen's own).",
    )


class VariantRun(Model):
    """How one variant's server was reached and what it said it was."""

    url: str = Field(description="Base URL of the server.")
    command: list[str] = Field(description="The command that started it (secrets redacted).")
    env: dict[str, str] = Field(description="Extra environment it was started with (redacted).")
    reused_server: Bool = Field(description="Whether the previous variant's server was reused.")
    engine_version: str | None = Field(description="What `/version` answered.")
    model: str = Field(description="The served model, as `/v1/models` names it.")
    max_model_len: Int | None = Field(ge=1, description="The served context length.")
    windows: list[Window] = Field(description="Its measurement windows, in order.")
    startup_s: list[NonNegative] = Field(
        default_factory=list,
        description="Seconds from launching its server until it answered healthy, one per "
        "launch, resumes included (a reused server is no launch; absent: none measured).",
    )
    up_s: list[NonNegative] = Field(
        default_factory=list,
        description="Seconds from launching each server (one per `startup_s`) until the end of "
        "the last window it served: what it cost (absent: none measured).",
    )
    draft: Draft | None = Field(
        default=None, description="Its draft model's weights, where it has one of its own."
    )


class Stopped(Model):
    """Why a run that stops when decided ended before its budget."""

    round: Count = Field(description="The round it stopped in, from 0.")
    windows: Count = Field(description="Windows of `order` it began (the rest were skipped).")
    reason: Literal["decided", "minutes"] = Field(
        description="`decided`: every class of every comparison was decided; `minutes`: the "
        "spec's `max_minutes` was spent."
    )


class Dropped(Model):
    """A sweep's variant that left the race: no further windows for it."""

    round: Count = Field(description="The round in which it left, from 0.")
    why: str = Field(description="What decided it.")


class Placement(Model):
    """One attempt of a block: the node it ran on."""

    node: str = Field(description="The Ray node's id (hex).")
    label: str | None = Field(
        default=None, description="The node's host label (`KBGEN_HOST_LABEL` there), masked."
    )
    attempt: Count = Field(description="The block's attempt that ran there: 0 first.")
    ended: Literal["running", "complete", "node-lost", "failed", "cancelled"] = Field(
        description="How that attempt ended (`node-lost`: its node or worker died; it ran again)."
    )

    @property
    def named(self) -> str:
        """The node as messages and records name it: its id's first 8 digits, and its label."""
        return self.node[:8] + (f" ({self.label})" if self.label else "")


class Block(Model):
    """One block of a run spread over a Ray cluster: its run folder and where it ran."""

    index: Count = Field(description="The block's number, from 0 (the samples' `block`).")
    path: str = Field(description="Its run folder, relative to the top one (`blocks/<index>`).")
    placements: list[Placement] = Field(
        default_factory=list, description="Every attempt of it, in order, and its node."
    )


class Cluster(Model):
    """How a run was spread over a Ray cluster (`kbgen bench --ray`)."""

    address: str = Field(description="What `--ray` named (`local`, `auto`, or an address).")
    blocks: list[Block] = Field(description="Its blocks, in order.")


class PrefixDesign(Model):
    """What a request's shared prefix lets the server's prefix cache hold: all the design's
    expected hit rate needs (`record.figures.prefix_cache`)."""

    shared_tokens: list[Count] = Field(
        description="Per prefix, the tokens every request drawing it begins with: the prefix, "
        "and before it what the chat template puts there."
    )
    block_size: Count | None = Field(
        default=None,
        description="The server's KV-cache block size, the unit its prefix cache holds tokens in "
        "(`vllm:cache_config_info`; None: not exported).",
    )


class PrefixTexts(PrefixDesign):
    """The shared prefixes a run built with the served model's tokenizer (`workload.prefixes`)."""

    texts: list[str] = Field(description="Each prefix, in the order prompts draw them by.")
    tokens: list[Count] = Field(description="Each text's length in tokens, as the server says.")


class Traffic(Model):
    """What a run built its synthetic or trace prompts from (`run.traffic.texts`)."""

    word_tokens: dict[str, Count] = Field(
        description="Each word's length in the served model's tokens, as the server says."
    )
    added_tokens: Count = Field(
        default=0,
        description="Tokens a request adds to its prompt's (special tokens, the chat template): "
        "each prompt is built this much shorter than its input length.",
    )
    requests: Count = Field(description="The requests of the draw or the trace's slice.")
    rate_rps: Finite | None = Field(
        default=None, description="A trace slice's own rate, its speedup applied (None: none)."
    )


class RunMeta(Model):
    """`run.json`: what ran where, and how far the run got."""

    format: RunFormat = Field(
        description="The run folder's format (`FORMAT` when kbgen writes it); a kbgen reads "
        "only the formats it knows.",
        examples=[1],
    )
    spec_id: str = Field(description="The experiment spec's id.")
    status: RunStatus = Field(description="Where the run is; `kbgen record` needs `complete`.")
    started: str = Field(description="When the run was created (UTC, ISO 8601, to the second).")
    tool: str = Field(description="The kbgen that created it.", examples=["kbgen 0.1.0"])
    kbgen: KbgenBuild = Field(
        description="The kbgen whose code ran it, with its commit where one is known."
    )
    git_sha: SpecCommit
    git_changed: SpecChanged
    spec_in_kbgen_checkout: SpecInKbgenCheckout
    hardware: Hardware | None = Field(
        description="The machine kbgen ran on, when it started the server itself."
    )
    software: Software | None = Field(
        default=None, description="kbgen's version, and the server's Python, torch and CUDA."
    )
    host_label: str | None = Field(default=None, description="The spec's host_label, masked.")
    prompt_suite: str = Field(
        description="The prompt suite's path from the top of the spec's repository."
    )
    prompt_suite_sha256: str | None = Field(
        default=None, description="The sha256 of the prompt suite's bytes."
    )
    workdir: str | None = Field(
        default=None,
        description="The absolute folder the spec's relative paths were read from (its "
        "`workdir`), for a resume and the cluster's blocks; unset in older runs: the folder "
        "kbgen runs in.",
    )
    groups: dict[str, list[str | None]] | None = Field(
        default=None,
        description="Each class's prompts' groups, in the suite's order, where its lines name "
        "them (the verdict's unit is then the group).",
    )
    attempts: Int = Field(ge=1, description="How many times it was run: 1, then 2 on a resume.")
    variants: dict[str, VariantRun] = Field(description="Each variant measured so far.")
    finished: str | None = Field(
        default=None, description="When the run completed (UTC, ISO 8601); absent until then."
    )
    order: list[tuple[Int, str] | tuple[Int, str, Int]] = Field(
        description="The measurement windows as [round, variant], in the order they run (a "
        "resume keeps it); a sweep's with several loads as [round, variant, load level].",
        examples=[[[0, "ngram"], [0, "baseline"], [1, "baseline"], [1, "ngram"]]],
    )
    order_seed: Int | None = Field(
        default=None,
        description="The spec's order_seed: it seeded the order and each round's prompt order.",
    )
    stopped: Stopped | None = Field(
        default=None,
        description="Where a run that stops when decided stopped (absent: it ran its whole order).",
    )
    dropped: dict[str, Dropped] = Field(
        default_factory=dict, description="A sweep's variants that left the race, by name."
    )
    prefixes: PrefixTexts | None = Field(
        default=None, description="The shared prefixes, built at the first start (absent: none)."
    )
    traffic: Traffic | None = Field(
        default=None,
        description="What synthetic or trace prompts were built from at the first start.",
    )
    cluster: Cluster | None = Field(
        default=None,
        description="A run spread over a Ray cluster: its blocks, each a run folder of its own "
        "under `blocks/`, and the nodes they ran on (absent: a run on one machine).",
    )


class VariantTotals(Model):
    """One variant's totals over the run, and its client/server token cross-check."""

    engine_version: str | None = Field(description="What `/version` answered.")
    model: str = Field(description="The served model.")
    requests_ok: Count = Field(description="Requests with a successful sample.")
    requests_failed: Count = Field(description="Requests that never succeeded.")
    output_tokens: Count = Field(description="Output tokens of the successful samples.")
    window_s: NonNegative = Field(description="Seconds in its measurement windows.")
    output_tok_s: Finite | None = Field(
        description="output_tokens / window_s (None without a window)."
    )
    windows: list[Counters] = Field(
        description="The counters of each window that has its closing scrape."
    )
    tokens_match: Bool | None = Field(
        description="Whether every window's counts agree (None without such a window)."
    )
    effective: EffectiveSettings | None = Field(
        default=None,
        description="What its server said it ran with, from its log (absent: no vLLM log).",
    )


class RunTotals(Model):
    """`summary.json`: per-variant totals and the client/server token cross-check of a run."""

    spec_id: str = Field(description="The experiment spec's id.")
    variants: dict[str, VariantTotals] = Field(description="Each measured variant's totals.")


def pooled(top: RunMeta, metas: list[RunMeta]) -> RunMeta:
    """A run over a cluster as one run.json, for its record: every block's windows, starts and
    times under its variant; the first block's machine, software and order (its blocks'
    machines are alike: `kbgen record` refuses them otherwise), whichever GPUs of theirs each
    was given (each block's machine names its own)."""
    variants: dict[str, VariantRun] = {}
    for meta in metas:
        for name, run in meta.variants.items():
            if name not in variants:
                variants[name] = run.model_copy(deep=True)
                continue
            kept = variants[name]
            kept.windows = [*kept.windows, *run.windows]
            kept.startup_s = [*kept.startup_s, *run.startup_s]
            kept.up_s = [*kept.up_s, *run.up_s]
    first = metas[0]
    return top.model_copy(
        update={
            "variants": variants,
            "hardware": first.hardware and first.hardware.model_copy(update={"devices": None}),
            "software": first.software,
            "order": first.order,
            "order_seed": first.order_seed,
        }
    )
