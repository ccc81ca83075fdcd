"""`kbgen record`: a run becomes a record; its verdict, its samples, the check that recomputes."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kbgen.bench.runs import RunFolder
from kbgen.bench.samples import Sample
from kbgen.cli import cli
from kbgen.errors import Mismatch
from kbgen.kb import loading as kb
from kbgen.kb import store
from kbgen.record import core as record
from kbgen.record.core import Evidence
from tests.conftest import PLAN

SECRET = "sk-abcdefghijklmnop"


def make_sample(
    variant: str,
    cls: str,
    index: int,
    repeat: int,
    rate: float,
    rng: random.Random,
    tokens: int = 32,
    per_chunk: int = 1,
) -> Sample:
    """A request whose decode rate is about `rate` tokens/s."""
    sent = 1_000_000_000 + index * 10_000_000
    ttft = int(rng.uniform(20e6, 30e6))
    step = int(1e9 / rate * per_chunk * rng.uniform(0.95, 1.05))
    chunks = [1] + [per_chunk] * ((tokens - 1) // per_chunk)
    chunks[-1] += tokens - sum(chunks)
    times = [sent + ttft + i * step for i in range(len(chunks))]
    return Sample(
        variant=variant,
        prompt_class=cls,
        prompt_index=index,
        repeat=repeat,
        scheduled_ns=sent,
        sent_ns=sent,
        chunk_ns=times,
        chunk_tokens=chunks,
        done_ns=times[-1] + 1000,
        prompt_tokens=10,
        output_tokens=tokens,
    )


SPEC = {
    "schema_version": 1,
    "id": "synthetic",
    "title": "Synthetic A/B",
    "hypothesis": {
        "statement": "ngram is faster",
        "primary_metric": "decode_tok_s",
        "direction": "increase",
        "minimum_effect": 0.05,
    },
    "server": {
        "launcher": "process",
        "command": ["vllm", "serve"],
        "model": "m",
        "args": ["--api-key", SECRET, "--max-model-len", "2048"],
        "env": {"HF_TOKEN": "hf_abcdefghijklmnop"},
    },
    "baseline": "baseline",
    "variants": {
        "baseline": {},
        "ngram": {
            "args": [f"--hf-token={SECRET}"],
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 5},
        },
    },
    "workload": {
        "prompts": "bench/prompts/seed.jsonl",
        "classes": ["coding", "math"],
        "repeats": 3,
    },
    "resolves": ["next-steps#test-ngram"],
    "tags": ["synthetic"],
}


def metrics_text(generated: float, speculative: bool, scale: int) -> str:
    """/metrics as vLLM 0.32 writes it, with the counters these tests need."""
    model = 'engine="0",model_name="m"'
    lines = [
        "# TYPE vllm:generation_tokens counter",
        f"vllm:generation_tokens_total{{{model}}} {generated}",
    ]
    if speculative:
        lines += [
            "# TYPE vllm:spec_decode_num_drafts counter",
            f"vllm:spec_decode_num_drafts_total{{{model}}} {100 * scale}",
            "# TYPE vllm:spec_decode_num_draft_tokens counter",
            f"vllm:spec_decode_num_draft_tokens_total{{{model}}} {480 * scale}",
            "# TYPE vllm:spec_decode_num_accepted_tokens counter",
            f"vllm:spec_decode_num_accepted_tokens_total{{{model}}} {150 * scale}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{model},position="{i}"}} '
            f"{a * scale}"
            for i, a in enumerate([60, 40, 25, 15, 10])
        ]
    return "\n".join(lines) + "\n"


def make_run(
    root: Path,
    rates: dict[str, float],
    versions: tuple[str, str] = ("0.32.0", "0.32.0"),
    status: str = "complete",
    failures: int = 0,
) -> Path:
    """A complete run folder as kbgen bench leaves it, without a server."""
    rng = random.Random(5)
    meta = {
        "spec_id": "synthetic",
        "status": "running",
        "attempts": 1,
        "git_sha": "abc",
        "hardware": {"cpu": "Test CPU", "cpu_count": 2, "host": "box"},
        "variants": {},
    }
    folder = RunFolder.create(root, "synthetic", yaml.safe_dump(SPEC), meta)
    for (variant, rate), version in zip(rates.items(), versions, strict=True):
        per_chunk = 3 if variant == "ngram" else 1
        samples = [
            make_sample(variant, cls, i, r, rate, rng, per_chunk=per_chunk)
            for r in range(3)
            for cls in ("coding", "math")
            for i in range(3)
        ]
        for s in samples[:failures]:
            s.error, s.chunk_ns, s.chunk_tokens, s.output_tokens = "HTTP 500: boom", [], [], None
        for s in samples:
            folder.append(s)
        generated = sum(s.output_tokens or 0 for s in samples)
        folder.write_metrics(f"{variant}-0-before", metrics_text(100, variant == "ngram", 0))
        folder.write_metrics(
            f"{variant}-0-after", metrics_text(100 + generated, variant == "ngram", 1)
        )
        meta["variants"][variant] = {
            "engine_version": version,
            "model": "m",
            "command": ["vllm", "serve"],
            "windows": [
                {
                    "index": 0,
                    "start_ns": 0,
                    "end_ns": 2 * 10**9,
                    "attempt": 0,
                    "before": f"metrics/{variant}-0-before.prom",
                    "after": f"metrics/{variant}-0-after.prom",
                }
            ],
        }
    folder.close()
    meta["status"] = status
    folder.write_meta(meta)
    return folder.path


@pytest.fixture
def records(tmp_path: Path) -> Path:
    folder = tmp_path / "records"
    (folder / "plans").mkdir(parents=True)
    (folder / "plans" / "next-steps.yaml").write_text(PLAN)
    return folder


def test_a_run_becomes_a_valid_record_with_a_verdict(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    path = record.record_run(run, records)
    assert kb.load([records]).problems == []  # cross-references resolve too
    saved = kb.load_file(path)
    assert saved.verdict is not None and saved.verdict.outcome == "refuted"
    coding = saved.verdict.per_class["coding"]
    assert coding.effect == pytest.approx(-0.25, abs=0.03)
    assert coding.ci_low is not None and coding.ci_high is not None
    assert coding.ci_low < coding.effect < coding.ci_high and coding.n_baseline == 9
    assert "BCa bootstrap" in saved.verdict.rule
    summary = saved.measurements["ngram"]["math"]["decode_tok_s"]
    assert summary.n == 9 and summary.mean == pytest.approx(
        45 * 31 / 30, rel=0.03
    )  # 31 gaps of 30 tokens
    ngram = saved.spec_decode["ngram"]
    assert (ngram.drafts, ngram.draft_tokens, ngram.accepted_tokens) == (100, 480, 150)
    assert ngram.mean_acceptance_length == 2.5 and ngram.acceptance_rate == 0.3125
    assert ngram.per_position_acceptance == [0.6, 0.4, 0.25, 0.15, 0.1]
    assert "ngram" in saved.spec_decode and "baseline" not in saved.spec_decode
    assert saved.resolves == ["next-steps#test-ngram"]
    assert saved.provenance is not None and saved.provenance.run == run.name


def test_no_secret_reaches_the_record(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    path = record.record_run(run, records)
    text = (
        path.read_text()
        + gzip.decompress((path.parent / f"{path.stem}.samples.jsonl.gz").read_bytes()).decode()
    )
    assert SECRET not in text and "hf_abcdefghijklmnop" not in text
    assert "--api-key\n    - '***'" in text and "--hf-token=***" in text


def test_per_token_itl_is_not_the_chunk_gap_under_speculation(
    tmp_path: Path, records: Path
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 60.0})
    saved = kb.load_file(record.record_run(run, records))
    ngram = saved.measurements["ngram"]["coding"]
    assert ngram["chunk_gap_ms"].mean == pytest.approx(3 * ngram["itl_ms"].mean, rel=0.05)
    base = saved.measurements["baseline"]["coding"]
    assert base["chunk_gap_ms"].mean == pytest.approx(base["itl_ms"].mean)


def test_no_difference_is_not_supported(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 60.0})
    saved = kb.load_file(record.record_run(run, records))
    assert saved.verdict is not None and saved.verdict.outcome != "supported"


def test_failures_above_the_threshold_make_it_inconclusive(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 30.0}, failures=3)
    saved = kb.load_file(record.record_run(run, records))
    assert saved.verdict is not None and saved.verdict.outcome == "inconclusive"
    assert any("of requests failed" in c for c in saved.verdict.caveats)
    assert saved.measurements["baseline"]["coding"]["decode_tok_s"].n == 6  # failures excluded


def test_different_engine_versions_are_refused_unless_allowed(
    tmp_path: Path, records: Path
) -> None:
    run = make_run(
        tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, versions=("0.32.0", "0.31.1")
    )
    with pytest.raises(
        Mismatch, match=r"engine version differs: baseline=0\.32\.0, ngram=0\.31\.1"
    ):
        record.record_run(run, records)
    assert list(records.glob("*.yaml")) == []
    saved = kb.load_file(record.record_run(run, records, allow_mismatch=True))
    assert saved.verdict is not None
    assert any("--allow-mismatch" in c for c in saved.verdict.caveats)


def test_an_unfinished_run_is_refused(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}, status="failed")
    result = CliRunner().invoke(cli, ["record", str(run), "--records", str(records)])
    assert result.exit_code == 2 and "kbgen bench --resume" in result.stderr


PLANNED = """\
# my planned experiment
schema_version: 1
id: 2026-11-29-my-plan
title: My own title
status: planned
created: 2026-11-28
context: |
  The author's context.
hypothesis:
  statement: ngram is faster by a lot
  primary_metric: decode_tok_s
  direction: increase
  minimum_effect: 0.5   # the author's bar, not the spec's
resolves: []   # filled in by the record
tags: [mine]
"""


def test_filling_a_planned_record_keeps_the_author_s_words(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    planned = records / "2026-11-29-my-plan.yaml"
    planned.write_text(PLANNED)
    result = CliRunner().invoke(cli, ["record", str(run), "--into", str(planned)])
    assert result.exit_code == 0, result.output
    text = planned.read_text()
    assert text.startswith("# my planned experiment\n")
    assert re.search(r"minimum_effect: 0.5 +# the author's bar, not the spec's", text)
    assert "title: My own title" in text and "The author's context." in text
    saved = kb.load_file(planned)
    assert saved.status == "concluded" and saved.created.isoformat() == "2026-11-28"
    # +25% clears the spec's 5% but not the author's 50%: the record's hypothesis rules
    assert saved.verdict is not None and saved.verdict.outcome == "refuted"
    assert any("hypothesis differs" in c for c in saved.verdict.caveats)
    assert saved.tags == ["mine", "synthetic"] and saved.resolves == ["next-steps#test-ngram"]


def test_a_concluded_record_is_not_overwritten(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    first = record.record_run(run, records)
    second = record.record_run(run, records)  # a second record, never a clobbered first
    assert first != second and second.stem == f"{first.stem}-2"
    result = CliRunner().invoke(cli, ["record", str(run), "--into", str(first)])
    assert result.exit_code == 2 and "only a planned or running record" in result.stderr


def test_check_recomputes_every_number_and_catches_an_edit(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    path = record.record_run(run, records)
    ok = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert ok.exit_code == 0, ok.output
    doc = store.load_document(path)
    doc.data["measurements"]["ngram"]["math"]["ttft_ms"]["mean"] = 1.0
    doc.data["verdict"]["per_class"]["coding"]["outcome"] = "supported"
    store.save(doc)
    bad = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert bad.exit_code == 1
    lines = bad.stderr.splitlines()
    assert any(
        re.match(
            rf"{re.escape(str(path))}:\d+: measurements\.ngram\.math\.ttft_ms\.mean: "
            r"is 1\.0, but its samples give",
            line,
        )
        for line in lines
    )
    assert any("verdict.per_class.coding.outcome: is 'supported'" in line for line in lines)


def test_check_refuses_a_tampered_samples_file(tmp_path: Path, records: Path) -> None:
    path = record.record_run(
        make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}), records
    )
    samples = path.parent / f"{path.stem}.samples.jsonl.gz"
    samples.write_bytes(gzip.compress(b"{}\n"))
    [problem] = record.check(path)
    assert problem.field == "raw_samples.sha256" and problem.line is not None


def test_samples_file_is_deterministic_and_round_trips() -> None:
    rng = random.Random(1)
    evidence = Evidence(
        "a",
        ["a", "b"],
        ["c"],
        [make_sample("a", "c", 0, 0, 50.0, rng), make_sample("b", "c", 0, 0, 40.0, rng)],
        {"b": [{"generation_tokens": 64.0}]},
    )
    first, second = record.samples_bytes(evidence), record.samples_bytes(evidence)
    assert first == second
    lines = [json.loads(line) for line in gzip.decompress(first).decode().splitlines()]
    assert [line["kind"] for line in lines] == ["evidence", "window", "sample", "sample"]
    assert all(line["sent_ns"] == 0 for line in lines if line["kind"] == "sample")


@pytest.mark.integration
def test_reference_flow_on_a_real_vllm(tiny_run: Path, records: Path) -> None:
    """bench (the shared real run) -> record -> validate clean -> check recomputes it."""
    made = CliRunner().invoke(cli, ["record", str(tiny_run), "--records", str(records)])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    valid = CliRunner().invoke(cli, ["validate", str(records), "--root", str(records)])
    assert valid.exit_code == 0, valid.output
    saved = kb.load_file(path)
    assert saved.verdict is not None and saved.verdict.method == "bootstrap"
    samples = RunFolder.open(tiny_run).samples()
    for cls in ("coding", "math"):
        verdict = saved.verdict.per_class[cls]
        assert verdict.ci_low is not None and verdict.ci_high is not None
        assert verdict.ci_low <= verdict.effect <= verdict.ci_high
        # a request whose tokens all arrived in one read has no decode rate (a loaded machine
        # can do that); n counts exactly the requests that have one
        with_rate = [
            s
            for s in samples
            if s.variant == "baseline" and s.prompt_class == cls and "decode_tok_s" in s.metrics()
        ]
        assert verdict.n_baseline == len(with_rate) >= 4
    assert saved.config is not None and saved.config.engine.version == "0.32.0"
    ngram = saved.spec_decode["ngram"]
    assert ngram.drafts and ngram.mean_acceptance_length and ngram.mean_acceptance_length > 1
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output
