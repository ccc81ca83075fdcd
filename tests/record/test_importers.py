"""Importers, on result files written by the real tools against the local vLLM (tiny model).

How the fixtures were made: tests/fixtures/imports/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.errors import InvalidInput, Mismatch
from kbgen.kb import loading as kb
from kbgen.kb.models import Hypothesis
from kbgen.record import compose
from kbgen.record import importers as imports

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"
BASE, NGRAM = FIXTURES / "vllm-bench-baseline.json", FIXTURES / "vllm-bench-ngram.json"
FASTER = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)


def test_vllm_bench_detailed_becomes_samples() -> None:
    raw = json.loads(BASE.read_text())
    base = imports.vllm_bench(BASE, "baseline")
    assert base.model == "tiny" and len(base.samples) == raw["completed"] == 12
    first = base.samples[0]
    assert first.ok and first.output_tokens == raw["output_lens"][0]
    assert first.metrics()["ttft_ms"] == pytest.approx(raw["ttfts"][0] * 1000, abs=1e-3)
    assert first.metrics()["e2e_ms"] == pytest.approx(raw["latencies"][0] * 1000, abs=0.01)
    assert first.chunk_tokens == [1] * raw["output_lens"][0]  # one token per chunk: ITL known


def test_vllm_bench_multi_token_chunks_keep_no_per_token_itl() -> None:
    ngram = imports.vllm_bench(NGRAM, "ngram")
    assert any(s.ok and not s.chunk_tokens for s in ngram.samples)
    assert any("no per-token ITL" in note for note in ngram.notes)
    raw = json.loads(NGRAM.read_text())
    assert ngram.spec_decode is not None
    assert ngram.spec_decode["drafts"] == raw["spec_decode_num_drafts"]
    assert ngram.spec_decode["accepted_tokens"] == raw["spec_decode_accepted_tokens"]


def test_import_makes_a_record_that_checks(tmp_path: Path) -> None:
    records = tmp_path / "records"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        (Path(__file__).parents[2] / "bench/experiments/ngram-vs-baseline.yaml").read_text()
    )
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--from",
            "vllm-bench",
            f"baseline={BASE}",
            f"ngram={NGRAM}",
            "--spec",
            str(spec),
            "--records",
            str(records),
        ],
    )
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.splitlines()[0])  # then one line per class
    saved = kb.load_file(path)
    assert saved.provenance is not None and saved.provenance.source == "imported"
    assert any("no per-class split" in n for n in saved.provenance.notes)
    assert saved.verdict is not None and saved.verdict.method == "bootstrap"
    assert list(saved.verdict.per_class) == ["all"]
    ngram = saved.spec_decode["ngram"]
    raw = json.loads(NGRAM.read_text())
    assert ngram.acceptance_rate == pytest.approx(raw["spec_decode_acceptance_rate"] / 100, 1e-5)
    assert ngram.mean_acceptance_length == pytest.approx(raw["spec_decode_acceptance_length"], 1e-5)
    assert "itl_ms" in saved.measurements["baseline"]["all"]
    assert "itl_ms" not in saved.measurements["ngram"]["all"]  # unknown tokens per chunk
    assert CliRunner().invoke(cli, ["record", "--check", str(path)]).exit_code == 0


def _summary_only(path: Path, into: Path) -> Path:
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


def test_summary_only_is_inconclusive_unless_allowed(tmp_path: Path) -> None:
    found = [
        imports.vllm_bench(_summary_only(BASE, tmp_path / "b.json"), "baseline"),
        imports.vllm_bench(_summary_only(NGRAM, tmp_path / "n.json"), "ngram"),
    ]
    assert not found[0].samples and "decode_tok_s" in found[0].stats
    data, evidence = compose.from_imports(found, "x", "X", FASTER)
    assert evidence is None and data.raw_samples is None
    assert data.verdict is not None
    assert data.verdict.outcome == "inconclusive" and data.verdict.method == "summary"
    assert any("no confidence interval" in c for c in data.verdict.caveats)
    allowed, _ = compose.from_imports(found, "x", "X", FASTER, allow_summary_only=True)
    tpot = {
        name: json.loads(path.read_text())["mean_tpot_ms"]
        for name, path in (("baseline", BASE), ("ngram", NGRAM))
    }
    assert allowed.verdict is not None
    effect = allowed.verdict.per_class["all"].effect  # decode rate = 1000 / TPOT
    assert effect == pytest.approx(tpot["baseline"] / tpot["ngram"] - 1, rel=1e-5)
    assert allowed.verdict.outcome != "inconclusive"


def test_different_models_are_refused(tmp_path: Path) -> None:
    other = json.loads(NGRAM.read_text())
    other["model_id"] = "another-model"
    (tmp_path / "n.json").write_text(json.dumps(other))
    found = [imports.vllm_bench(BASE, "baseline"), imports.vllm_bench(tmp_path / "n.json", "n")]
    with pytest.raises(Mismatch, match="model differs: baseline=tiny, n=another-model"):
        compose.from_imports(found, "x", "X", FASTER)
    data, _ = compose.from_imports(found, "x", "X", FASTER, allow_mismatch=True)
    assert data.verdict is not None
    assert any("--allow-mismatch" in c for c in data.verdict.caveats)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"a": 1}', "not a `vllm bench serve --save-result` file"),
    ],
    ids=["not-json", "not-object", "other-json"],
)
def test_wrong_files_are_clear_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=message):
        imports.vllm_bench(path, "baseline")


def test_pairs_must_name_their_variant(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["record", "--from", "vllm-bench", str(BASE), str(NGRAM), "--records", str(tmp_path)]
    )
    assert result.exit_code == 2 and "VARIANT=FILE" in result.stderr


GL_BASE = FIXTURES / "guidellm-baseline.json"
GL_NGRAM = FIXTURES / "guidellm-ngram.json"


def test_guidellm_report_becomes_first_and_last_token_samples() -> None:
    raw = json.loads(GL_BASE.read_text())
    bench = raw["benchmarks"][0]
    found = imports.guidellm(GL_BASE, "baseline")
    assert found.model == "tiny" and len(found.samples) == 12 and all(s.ok for s in found.samples)
    ttft_ms = [s.metrics()["ttft_ms"] for s in found.samples]
    expected = bench["metrics"]["time_to_first_token_ms"]["successful"]["mean"]
    assert sum(ttft_ms) / len(ttft_ms) == pytest.approx(expected, rel=1e-6)
    # GuideLLM's ITL is (last - first) / (N - 1): our TPOT, token-weighted in its aggregate
    first = bench["requests"]["successful"][0]
    assert found.samples[0].metrics()["tpot_ms"] == pytest.approx(
        first["inter_token_latency_ms"], rel=1e-6
    )
    assert "itl_ms" not in found.samples[0].metrics()  # no per-chunk times: no distribution
    assert "chunk_gap_ms" not in found.samples[0].metrics()


def test_guidellm_import_record(tmp_path: Path) -> None:
    found = [imports.guidellm(GL_BASE, "baseline"), imports.guidellm(GL_NGRAM, "ngram")]
    data, evidence = compose.from_imports(found, "x", "X", FASTER)
    assert evidence is not None and data.verdict is not None
    assert data.verdict.method == "bootstrap"
    assert set(data.measurements["ngram"]["all"]) == {
        "decode_tok_s",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
    }
    assert data.spec_decode == {}  # GuideLLM has no speculative-decoding counters
    assert data.provenance is not None
    assert any("first and last token times only" in n for n in data.provenance.notes)


def test_not_a_guidellm_report(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"benchmarks": []}')
    with pytest.raises(InvalidInput, match="not a GuideLLM report"):
        imports.guidellm(path, "baseline")
