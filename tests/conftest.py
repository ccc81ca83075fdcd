"""Shared fixtures: a small valid knowledge base to mutate."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import vllm_env
from tests.support.free_port import free_port

REPO = Path(__file__).resolve().parents[1]

PLAN = """\
schema_version: 1
id: next-steps
title: Next steps
tasks:
  - id: test-ngram
    text: Test n-gram speculative decoding
  - id: train-draft
    text: Train a draft model
"""

RECORD = """\
# a comment the author wrote
schema_version: 1
id: ngram-test
title: n-gram vs baseline
status: concluded
created: 2026-11-01
concluded: 2026-11-02
context: |
  Why we ran it.
hypothesis:
  statement: n-gram is faster.
  primary_metric: decode_tok_s
  direction: increase
  minimum_effect: 0.05
config:
  engine: {name: vllm, version: 0.32.0}
  model: {name: tiny}
  hardware: {cpu: test cpu}
  baseline: baseline
  variants:
    baseline: {}
    ngram:
      args: [--max-num-seqs, "4"]
      speculative_config:
        method: ngram
        num_speculative_tokens: 5
        prompt_lookup_max: 4
        prompt_lookup_min: 2
measurements:
  baseline:
    coding:
      decode_tok_s: {n: 10, mean: 62.6, median: 62.0, stdev: 1.5}
  ngram:
    coding:
      decode_tok_s: {n: 10, mean: 46.4}
spec_decode:
  ngram:
    drafts: 100
    draft_tokens: 480
    accepted_tokens: 120
    per_position_acceptance: [0.5, 0.3, 0.1, 0.05, 0.01]
verdict:
  outcome: refuted
  variant: ngram
  method: bootstrap
  confidence: 0.95
  rule: the CI is below the minimum effect
  per_class:
    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}
resolves:
  - next-steps#test-ngram
tags: [ngram]
provenance:
  source: measured
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives the browser is marked `browser` by its fixture, and a benchmark's
    quick mode (tests/perf/) `perf` by its folder, so that the fast lane leaves them out."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if item.path.parent.name == "perf":
            item.add_marker(pytest.mark.perf)


@pytest.fixture(autouse=True)
def _work_in_a_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands keep caches in `.kbgen_cache/` of the current folder: never the repository's."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    """A records/ folder holding one valid record and one valid plan."""
    records = tmp_path / "records"
    (records / "plans").mkdir(parents=True)
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    (records / "ngram-test.yaml").write_text(RECORD)
    return records


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete baseline-vs-ngram run on a real vLLM, shared by the tests that read it."""
    from kbgen.cli import cli

    python = vllm_env.require()
    root = tmp_path_factory.mktemp("work")
    spec_file = root / "tiny.yaml"
    spec_file.write_text(vllm_env.spec_text(python, free_port(), per_class=3, repeats=2))
    result = CliRunner().invoke(cli, ["bench", str(spec_file), "--runs", str(root / "runs")])
    assert result.exit_code == 0, result.output
    return Path(result.stdout.strip().splitlines()[-1])
