"""The other tools' result files the importers' tests read, and the changes the tests make to them.

How the fixtures were made: tests/fixtures/imports/README.md.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbgen.kb.models import Hypothesis

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "imports"
# the specs of the experiments the vllm bench pairs ran (the random completions, the chat one)
SPEC = FIXTURES / "vllm-bench-spec.yaml"
CHAT_SPEC = FIXTURES / "vllm-bench-chat-spec.yaml"
BASE, NGRAM = FIXTURES / "vllm-bench-baseline.json", FIXTURES / "vllm-bench-ngram.json"
CHAT_BASE = FIXTURES / "vllm-bench-chat-baseline.json"
CHAT_NGRAM = FIXTURES / "vllm-bench-chat-ngram.json"
H200_BASE = FIXTURES / "h200-vllm-bench-chat-baseline.json"
GL_BASE = FIXTURES / "guidellm-baseline.json"
GL_NGRAM = FIXTURES / "guidellm-ngram.json"
PROMPTS = FIXTURES / "prompts.jsonl"  # the prompt file the chat runs sent
# Real `vllm bench serve --dataset-name custom --disable-shuffle` pairs (baseline, n-gram) and
# the prompt file they sent, one row per machine: another pair of result files is one more row
# (tests/fixtures/imports/README.md says how each was made).
BY_POSITION = [
    pytest.param(CHAT_BASE, CHAT_NGRAM, PROMPTS, id="cpu-tiny-chat"),
    pytest.param(
        H200_BASE,
        FIXTURES / "h200-vllm-bench-chat-ngram.json",
        FIXTURES / "h200-prompts.jsonl",
        id="h200-smollm2-chat",
    ),
]
# The spec of the experiment each row of BY_POSITION ran, by its baseline's file
SPEC_OF = {
    CHAT_BASE: CHAT_SPEC,
    H200_BASE: REPO / "bench" / "experiments" / "gpu" / "agreement-h200-c1.yaml",
}
# Real sweeps (tests/fixtures/imports/sweeps/README.md): the experiment folder of one `vllm
# bench sweep serve` (baseline and n-gram x max_concurrency 1, 2 x runs 0, 1), and GuideLLM's
# sweep profile against each server (synchronous, throughput, two constant rates), gzipped
SWEEPS = FIXTURES / "sweeps"
VLLM_SWEEP = SWEEPS / "vllm-bench-sweep"
GL_SWEEP = {
    "baseline": SWEEPS / "guidellm-sweep.json.gz",
    "ngram": SWEEPS / "guidellm-sweep-ngram.json.gz",
}
# The experiment the vllm bench sweep ran, as a kbgen spec: `--spec` gives the variants'
# settings and what the files do not keep (what the README's commands sent)
SWEEP_SPEC = """\
schema_version: 1
id: tiny-sweep
title: n-gram (k=3) vs baseline on the tiny Llama at concurrency 1 and 2 (CPU)
hypothesis:
  statement: n-gram speculative decoding raises decode throughput at every concurrency.
  primary_metric: decode_tok_s
  direction: increase
  minimum_effect: 0.05
server:
  launcher: process
  command: [.vllm/venv/bin/python, bench/vllm/vllm_cli.py, serve]
  model: .vllm/models/kbgen-tiny-llama
  args: [--max-model-len, "2048", --dtype, bfloat16, --enforce-eager, --served-model-name, tiny]
hardware: {cpu: Intel(R) Xeon(R) Processor, cpu_count: 2}
baseline: baseline
variants:
  baseline: {}
  ngram:
    speculative_config: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4,
      prompt_lookup_min: 2}
sweep:
  workload.concurrency: [1, 2]
workload:
  prompts: prompts.jsonl
  classes: [all]
  api: completions
  max_tokens: 16
  temperature: 0
  ignore_eos: true
"""
FASTER = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)


def changed(source: Path, into: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """`source` as `change` leaves it, written to `into` on one line, as the tools write."""
    data = json.loads(source.read_text())
    change(data)
    into.write_text(json.dumps(data))
    return into


def set_at(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change setting the value at the dotted `key` (`ttfts.3`, `benchmarks.0.duration`)."""

    def change(data: dict[str, Any]) -> None:
        target, *path = key.split(".")
        node: Any = data
        for part in [target, *path][:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = [target, *path][-1]
        node[int(last) if isinstance(node, list) else last] = value

    return change


def summary_only(path: Path, into: Path) -> Path:
    """The vllm bench file at `path` without its per-request lists (no --save-detailed)."""
    data = json.loads(path.read_text())
    for key in (
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "queue_times",
        "generated_texts",
        "errors",
    ):
        data.pop(key, None)
    into.write_text(json.dumps(data))
    return into


def chat_lines() -> list[str]:
    """The lines of the prompt file the chat runs sent."""
    return PROMPTS.read_text().splitlines()


def suite_file(tmp_path: Path, lines: list[str]) -> Path:
    """A prompt file of `lines`."""
    path = tmp_path / "p.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def unpacked(tmp_path: Path) -> dict[str, Path]:
    """GuideLLM's sweep reports, by arm, unpacked into `tmp_path` byte for byte."""
    out = {}
    for arm, packed in GL_SWEEP.items():
        out[arm] = tmp_path / packed.name.removesuffix(".gz")
        out[arm].write_bytes(gzip.decompress(packed.read_bytes()))
    return out


def sweep_copy(tmp_path: Path) -> Path:
    """A copy of the `vllm bench sweep serve` folder to change."""
    return Path(shutil.copytree(VLLM_SWEEP, tmp_path / VLLM_SWEEP.name))


def rewrite(path: Path, change: Callable[[Any], None]) -> None:
    """The JSON file at `path` as `change` leaves it, indented as the sweep writes it."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=4))
