"""`kbgen new --spec`: a commented experiment spec to start from, valid as it is written."""

from __future__ import annotations

import json
from pathlib import Path

from kbgen.kb import files
from kbgen.kb.scaffold import free, slugify, validated
from kbgen.run.spec import ExperimentSpec

FOLDER = "experiments"  # beside the records folder, as docs/ is

TEMPLATE = """\
# yaml-language-server: $schema=../docs/schema/experiment.schema.json
# An experiment for `kbgen bench`. Fill in the hypothesis, the server and the arms, then:
#   kbgen bench --estimate {path}   # what it will cost, from the records you have
#   kbgen bench {path}              # measure; then `kbgen record RUN` makes the record
# Every field: kbgen's guide, "Experiment specs". Relative paths are read from this folder.
schema_version: 1
id: {id}
title: {title}
hypothesis:
  statement: What you expect to happen, in one sentence.
  primary_metric: decode_tok_s   # decode_tok_s, output_tok_s, ttft_ms, tpot_ms, itl_ms, e2e_ms
  direction: increase            # increase or decrease
  minimum_effect: 5%             # the smallest change that matters
server:
  launcher: process              # kbgen starts the server for each arm (or: external, command)
  command: [vllm, serve]
  model: Qwen/Qwen3-8B           # a hub name, or a path
  args: [--max-model-len, "8192"]
  port: 8000
baseline: baseline
variants:                        # the arms: the server settings that differ between them
  baseline: {{}}
  ngram:
    speculative_config: {{method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4}}
workload:
  prompts: prompts.jsonl         # one JSON object a line: {{"class": "coding", "prompt": "..."}}
  classes: [coding]              # at least 8 distinct prompts a class (hypothesis.min_prompts)
  api: chat
  max_tokens: 256
  concurrency: 1
  rounds: 2                      # the arms interleaved (AB, then BA): one round decides nothing
resolves: []                     # plan tasks a concluded result ticks: PLAN-ID#TASK-ID
"""


def new_spec(title: str, records: Path, spec_id: str | None = None) -> Path:
    """Write a spec for `title` into the experiments folder beside `records` and return its
    path: named `spec_id`, by default the title's slug; either must be free."""
    path = free(records.parent / FOLDER, spec_id if spec_id is not None else slugify(title))
    text = TEMPLATE.format(id=path.stem, title=json.dumps(title), path=f"{FOLDER}/{path.name}")
    files.write_atomic(path, validated(text, ExperimentSpec, path.stem).encode(), replace=False)
    return path
