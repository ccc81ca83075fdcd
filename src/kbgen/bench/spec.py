"""Experiment specs (`bench/experiments/*.yaml`): what `kbgen bench` runs, validated like records.

A spec names the hypothesis, how to reach or start the server, the variants (server arguments
that differ between arms, e.g. a `speculative_config`), the workload, and the plan tasks a
concluded result resolves. Relative paths in a spec are relative to the folder kbgen runs in
(normally the repository root), like every path on a command line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from kbgen.kb import loading as kb
from kbgen.kb.models import Api, Hypothesis, Model, Slug, TaskRef, Variant, fail_at


class ExternalServer(Model):
    """A server someone else runs: kbgen only waits for it to be healthy."""

    launcher: Literal["external"] = Field(description="Reach a running server by URL.")
    url: str = Field(description="Base URL.", examples=["http://127.0.0.1:8000"])
    startup_timeout_s: float = Field(default=600, gt=0, description="How long to wait for it.")


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
    port: int = Field(default=8000, ge=1, le=65535, description="Port to bind and to reach.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of the server process."
    )
    startup_timeout_s: float = Field(
        default=3600,
        gt=0,
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
    url: str = Field(description="Base URL of the server once started.")
    startup_timeout_s: float = Field(default=3600, gt=0, description="How long a start may take.")


Server = Annotated[
    ExternalServer | ProcessServer | CommandServer,
    Field(discriminator="launcher", description="How to reach or start the server."),
]


class WorkloadSpec(Model):
    """What to send, how often, and how."""

    prompts: str = Field(
        description="JSONL file of prompts: one object per line with `prompt` and `class`.",
        examples=["bench/prompts/seed.jsonl"],
    )
    classes: list[Slug] = Field(
        min_length=1, description="Prompt classes to measure.", examples=[["coding", "math"]]
    )
    per_class: int | None = Field(
        default=None, ge=1, description="Use the first N prompts of each class (all if unset)."
    )
    api: Api = Field(default="completions", description="OpenAI endpoint.")
    max_tokens: int = Field(default=128, ge=1, description="Output tokens per request.")
    temperature: float = Field(default=0.0, ge=0, description="Sampling temperature.")
    ignore_eos: bool = Field(
        default=True, description="Force `max_tokens` tokens, so both arms generate as many."
    )
    seed: int | None = Field(default=0, description="Sampling seed sent with every request.")
    warmup: int = Field(
        default=2,
        ge=0,
        description="Requests before the measurement window (at least concurrency).",
    )
    repeats: int = Field(
        default=3, ge=1, description="Times each prompt is sent to each arm within a round."
    )
    rounds: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="Rounds of the interleaved design: in each round every arm runs once, in a "
        "seeded, balanced order (AB, BA, …), so the arms are not confounded with time. A round "
        "restarts the server only when its arguments differ from the running one's.",
    )
    order_seed: int = Field(
        default=0, description="Seed of the round order and of the prompt order within a round."
    )
    concurrency: int = Field(default=1, ge=1, description="Requests in flight at once.")
    stall_timeout_s: float = Field(
        default=120, gt=0, description="A stream silent this long is recorded as failed."
    )
    request_timeout_s: float = Field(default=1800, gt=0, description="Limit for one request.")


class ExperimentSpec(Model):
    """One A/B (or A/B/n) experiment against an LLM server."""

    schema_version: Literal[1] = Field(description="Version of this schema.")
    id: Slug = Field(description="Experiment id; run folders and records are named after it.")
    title: str = Field(min_length=1, max_length=200, description="One-line title.")
    hypothesis: Hypothesis = Field(description="The claim under test.")
    server: Server
    baseline: Slug = Field(description="The variant the others are compared against.")
    variants: dict[Slug, Variant] = Field(min_length=2, description="The arms, by name.")
    workload: WorkloadSpec = Field(description="What is sent.")
    resolves: list[TaskRef] = Field(
        default_factory=list, description="Plan tasks a concluded result resolves."
    )
    tags: list[Slug] = Field(default_factory=list, description="Tags carried into the record.")

    @model_validator(mode="after")
    def _baseline_is_a_variant(self) -> ExperimentSpec:
        if self.baseline not in self.variants:
            fail_at("ExperimentSpec", [(("baseline",), f"{self.baseline!r} is not a variant")])
        return self


def server_args(variant: Variant) -> list[str]:
    """The command-line arguments that make a server run `variant`."""
    args = list(variant.args)
    if variant.speculative_config is not None:
        config = variant.speculative_config.model_dump(exclude_none=True)
        args += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    return args


def load(path: Path) -> ExperimentSpec:
    """A validated spec; InvalidInput with located problems otherwise."""
    return kb.load_model(path, ExperimentSpec)
