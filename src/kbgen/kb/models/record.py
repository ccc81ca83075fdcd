"""A record and a plan whole: provenance, cost, artifacts, steps, and their JSON Schemas."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from kbgen.kb.models.base import (
    Markdown,
    Model,
    Slug,
    Status,
    TaskRef,
    Unknowable,
    VariantName,
    empty,
    fail_at,
    repeats_of,
)
from kbgen.kb.models.config import (
    Config,
    Hardware,
    KbgenBuild,
    Software,
    SpecChanged,
    SpecCommit,
    SpecInKbgenCheckout,
    Workload,
)
from kbgen.kb.models.hypothesis import Hypothesis
from kbgen.kb.models.results import (
    LoadMeasurements,
    Measurements,
    PrefixCache,
    Schedule,
    SpecDecodeStats,
    Verdict,
)
from kbgen.kb.numbers import Count, Finite, Int, NonNegative


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
    git_sha: SpecCommit
    git_changed: SpecChanged
    spec_in_kbgen_checkout: SpecInKbgenCheckout
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
    prefix_cache: list[PrefixCache] = Field(
        default_factory=list,
        description="Where the server counts them: each arm's prefix-cache lookups and hits at "
        "each load level, over its windows.",
    )
    schedule: list[Schedule] = Field(
        default_factory=list,
        description="Sent open loop: how each arm's schedule was kept at each load level (the "
        "offered rate beside the achieved one, the client's lag).",
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
            elif not empty(getattr(section, name)):
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
