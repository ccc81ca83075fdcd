"""Importers, on result files written by the real tools against the local vLLM (tiny model).

How the fixtures were made: tests/fixtures/imports/README.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.errors import InvalidInput, Mismatch
from kbgen.kb import loading as kb
from kbgen.kb.models import Hypothesis
from kbgen.record import compose
from kbgen.record import importers as imports
from tests.support import special

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"
BASE, NGRAM = FIXTURES / "vllm-bench-baseline.json", FIXTURES / "vllm-bench-ngram.json"
CHAT_BASE = FIXTURES / "vllm-bench-chat-baseline.json"
CHAT_NGRAM = FIXTURES / "vllm-bench-chat-ngram.json"
PROMPTS = FIXTURES / "prompts.jsonl"  # the prompt file the chat runs sent
API = ["completions", "chat"]
# Real `vllm bench serve --dataset-name custom --disable-shuffle` pairs (baseline, n-gram) and
# the prompt file they sent, one row per machine: another pair of result files is one more row
# (tests/fixtures/imports/README.md says how each was made).
BY_POSITION = [
    pytest.param(CHAT_BASE, CHAT_NGRAM, PROMPTS, id="cpu-tiny-chat"),
    pytest.param(
        FIXTURES / "h200-vllm-bench-chat-baseline.json",
        FIXTURES / "h200-vllm-bench-chat-ngram.json",
        FIXTURES / "h200-prompts.jsonl",
        id="h200-smollm2-chat",
    ),
]
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
    path = Path(result.stdout.strip())  # stdout: the path alone; the classes go to stderr
    assert result.stderr.startswith("all: ")
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


# --- honest imports: each case built from a real file, changed as the case needs -------------


def _changed(source: Path, into: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = json.loads(source.read_text())
    change(data)
    into.write_text(json.dumps(data))
    return into


def _fail_request(index: int, error: str, recount: bool = True) -> Callable[[dict[str, Any]], None]:
    """What vllm bench writes for a request that failed (endpoint_request_func.py: the HTTP
    reason as the error, possibly empty; serve.py: output length 0; ttft, itl, latency unset)."""

    def change(data: dict[str, Any]) -> None:
        data["total_output_tokens"] -= data["output_lens"][index]  # a sum of output_lens
        data["ttfts"][index], data["output_lens"][index], data["itls"][index] = 0.0, 0, []
        data["latencies"][index], data["generated_texts"][index] = 0.0, ""
        data["errors"][index] = error
        if recount:
            data["completed"], data["failed"] = data["completed"] - 1, data["failed"] + 1

    return change


@pytest.mark.parametrize(
    ("error", "reason"),
    [("", "failed with an empty error text"), ("Bad Request", "Bad Request")],
    ids=["empty-http-reason", "http-reason"],
)
def test_a_failed_vllm_bench_request_is_a_failure(tmp_path: Path, error: str, reason: str) -> None:
    path = _changed(BASE, tmp_path / "b.json", _fail_request(3, error))
    found = imports.vllm_bench(path, "baseline")
    failed = [s for s in found.samples if not s.ok]
    assert [s.prompt_index for s in failed] == [3] and reason in (failed[0].error or "")
    assert failed[0].metrics() == {}  # never a 0 ms success
    assert sum(s.ok for s in found.samples) == 11
    assert any("1 of 12 requests failed" in n for n in found.notes)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            _fail_request(3, "", recount=False),
            "completed: says 12, but its per-request lists hold 11",
        ),
        (lambda d: d.update(failed=2), "failed: says 2, but its per-request lists hold 0"),
        (lambda d: d["errors"].pop(), "errors: holds 11 entries, ttfts 12"),
    ],
    ids=["failure-counted-as-completed", "failures-not-listed", "ragged-lists"],
)
def test_a_vllm_bench_file_that_disagrees_with_itself_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    path = _changed(BASE, tmp_path / "b.json", change)
    with pytest.raises(InvalidInput, match=rf"b.json:1: {re.escape(message)}"):
        imports.vllm_bench(path, "baseline")


def _two_tokens_in_one_chunk(data: dict[str, Any]) -> None:
    """Request 5's last two gaps as one: a chunk carrying two tokens, the way vllm bench
    records it under speculative decoding (one gap per chunk, the token count unsaid)."""
    gaps = data["itls"][5]
    data["itls"][5] = [*gaps[:-2], gaps[-2] + gaps[-1]]


@pytest.mark.parametrize(("base", "ngram"), [(BASE, NGRAM), (CHAT_BASE, CHAT_NGRAM)], ids=API)
def test_per_token_itl_only_when_every_request_qualifies(
    tmp_path: Path, base: Path, ngram: Path
) -> None:
    whole = imports.vllm_bench(base, "baseline")
    assert all(s.chunk_tokens for s in whole.samples)  # every chunk one token: ITL known
    path = _changed(base, tmp_path / "b.json", _two_tokens_in_one_chunk)
    found = imports.vllm_bench(path, "baseline")
    # the other requests still qualify, but a per-token ITL of them alone would be biased
    assert not any(s.chunk_tokens for s in found.samples)
    n = len(found.samples)
    assert f"baseline: in 1 of {n} requests the chunks did not hold one token each" in "".join(
        found.notes
    )
    data, _ = compose.from_imports([found, imports.vllm_bench(ngram, "ngram")], "x", "X", FASTER)
    assert "itl_ms" not in data.measurements["baseline"]["all"]
    assert "chunk_gap_ms" in data.measurements["baseline"]["all"]


def test_the_tools_own_figures_and_metric_mapping_are_on_the_record() -> None:
    raw = {
        name: json.loads(path.read_text()) for name, path in (("baseline", BASE), ("ngram", NGRAM))
    }
    data, _ = compose.from_imports(
        [imports.vllm_bench(BASE, "baseline"), imports.vllm_bench(NGRAM, "ngram")], "x", "X", FASTER
    )
    assert data.provenance is not None
    notes = data.provenance.notes
    for name, file in raw.items():
        expected = (
            f"{name}: vllm bench serve's own figures: output throughput "
            f"{file['output_throughput']:.6g} tok/s, request throughput "
            f"{file['request_throughput']:.6g} req/s, duration {file['duration']:.6g} s "
            f"({file['completed']} completed, {file['failed']} failed)"
        )
        assert expected in notes
    assert sum("its ITL is the gap between stream chunks" in n for n in notes) == 1
    gl, _ = compose.from_imports(
        [imports.guidellm(GL_BASE, "baseline"), imports.guidellm(GL_NGRAM, "ngram")],
        "x",
        "X",
        FASTER,
    )
    assert gl.provenance is not None
    rps = json.loads(GL_BASE.read_text())["benchmarks"][0]["metrics"]["requests_per_second"]
    assert any(
        f"requests_per_second (successful, mean) {rps['successful']['mean']:.6g} req/s" in n
        for n in gl.provenance.notes
    )
    assert any(
        "time_per_output_token_ms" in n and "includes TTFT" in n for n in gl.provenance.notes
    )


def test_tokens_per_engine_step_of_an_import_from_the_tools_token_total() -> None:
    raw = json.loads(NGRAM.read_text())
    data, _ = compose.from_imports(
        [imports.vllm_bench(BASE, "baseline"), imports.vllm_bench(NGRAM, "ngram")], "x", "X", FASTER
    )
    steps = raw["total_output_tokens"] - raw["spec_decode_accepted_tokens"]
    stats = data.spec_decode["ngram"]
    assert stats.tokens_per_engine_step == pytest.approx(raw["total_output_tokens"] / steps, 1e-5)
    assert stats.drafted_step_share == pytest.approx(raw["spec_decode_num_drafts"] / steps, 1e-5)


def _indices(found: imports.Imported) -> list[int]:
    return [s.prompt_index for s in found.samples]


def test_vllm_bench_requests_paired_by_position_only_when_input_lengths_agree(
    tmp_path: Path,
) -> None:
    found = [imports.vllm_bench(BASE, "baseline"), imports.vllm_bench(NGRAM, "ngram")]
    paired, note = imports.pair_prompts(found)
    assert paired and _indices(found[0]) == _indices(found[1]) == list(range(12))
    assert "paired by position" in note and "same input length" in note

    def longer(data: dict[str, Any]) -> None:
        data["input_lens"][4] += 1

    other = imports.vllm_bench(_changed(NGRAM, tmp_path / "n.json", longer), "ngram")
    found = [imports.vllm_bench(BASE, "baseline"), other]
    paired, note = imports.pair_prompts(found)
    assert not paired and not set(_indices(found[0])) & set(_indices(found[1]))  # nothing paired
    assert "not paired by prompt (the input length differs between the files)" in note
    data, _ = compose.from_imports(found, "x", "X", FASTER, allow_mismatch=True)
    assert data.provenance is not None and note in data.provenance.notes
    # unpaired, the verdict compares requests: it is still judged, on the unit it says it used
    assert data.verdict is not None and data.verdict.unit == "request"
    assert data.verdict.per_class["all"].n_baseline == 12


def test_guidellm_requests_paired_by_prompt_text(tmp_path: Path) -> None:
    texts = {}

    def reorder_and_change_one(data: dict[str, Any]) -> None:
        requests = data["benchmarks"][0]["requests"]
        requests["successful"].reverse()  # completion order need not be the prompts' order
        args = json.loads(requests["successful"][0]["request_args"])
        args["body"]["prompt"] += " and something else"
        requests["successful"][0]["request_args"] = json.dumps(args)

    def prompts(found: imports.Imported, path: Path) -> None:
        for sample, req in zip(
            found.samples,
            json.loads(path.read_text())["benchmarks"][0]["requests"]["successful"],
            strict=True,
        ):
            texts.setdefault(json.loads(req["request_args"])["body"]["prompt"], set()).add(
                (found.variant, sample.prompt_index)
            )

    ngram_path = _changed(GL_NGRAM, tmp_path / "n.json", reorder_and_change_one)
    found = [imports.guidellm(GL_BASE, "baseline"), imports.guidellm(ngram_path, "ngram")]
    paired, note = imports.pair_prompts(found)
    assert paired
    prompts(found[0], GL_BASE)
    prompts(found[1], ngram_path)
    # one index per text, the same in both variants; the changed text has an index of its own
    indices = {text: {i for _, i in seen} for text, seen in texts.items()}
    assert all(len(i) == 1 for i in indices.values())
    assert len(set().union(*indices.values())) == 13
    assert sum(len(seen) == 2 for seen in texts.values()) == 11
    assert note == "requests paired by prompt text: 11 prompt(s) sent to every variant, of 13"


def test_guidellm_errored_requests_are_failures_and_counts_must_agree(tmp_path: Path) -> None:
    def one_errored(data: dict[str, Any]) -> None:
        bench = data["benchmarks"][0]
        failed = bench["requests"]["successful"].pop(2)
        failed["info"]["error"] = "HTTP 500"
        bench["requests"]["errored"] = [failed]
        totals = bench["metrics"]["request_totals"]
        totals["successful"], totals["errored"] = 11, 1

    found = imports.guidellm(_changed(GL_BASE, tmp_path / "g.json", one_errored), "baseline")
    assert [s.error for s in found.samples if not s.ok] == ["HTTP 500"]
    assert any("1 of 12 requests errored" in n for n in found.notes)

    def miscounted(data: dict[str, Any]) -> None:
        data["benchmarks"][0]["metrics"]["request_totals"]["successful"] = 13

    with pytest.raises(
        InvalidInput,
        match=re.escape(
            "m.json:1: benchmarks[0].metrics.request_totals.successful: says 13, but the report "
            "lists 12 successful"
        ),
    ):
        imports.guidellm(_changed(GL_BASE, tmp_path / "m.json", miscounted), "baseline")


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
@pytest.mark.parametrize("tool", sorted(imports.IMPORTERS))
def test_a_special_result_file_is_one_located_line(tmp_path: Path, tool: str, kind: str) -> None:
    path = tmp_path / "results" / "base.json"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        imports.IMPORTERS[tool](path, "baseline")
    assert str(info.value).startswith(f"{path}: {message}")


# --- hostile import files: every one a located error, never a traceback ---------------------


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target, *path = key.split(".")
        node: Any = data
        for part in [target, *path][:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = [target, *path][-1]
        node[int(last) if isinstance(node, list) else last] = value

    return change


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (_set("ttfts.3", "fast"), "ttfts[3]", "valid number"),
        (_set("ttfts.3", float("nan")), "ttfts[3]", "finite number"),
        (_set("ttfts.3", -0.5), "ttfts[3]", "greater than or equal to 0"),
        (_set("itls.2.0", float("inf")), "itls[2][0]", "finite number"),
        (_set("itls.2.0", -1e-3), "itls[2][0]", "greater than or equal to 0"),
        (_set("itls.2.0", 1e300), "itls[2][0]", "less than or equal to 604800"),
        (_set("output_lens.0", True), "output_lens[0]", "valid integer"),
        (_set("output_lens.0", 31.5), "output_lens[0]", "valid integer"),
        (_set("completed", "12"), "completed", "valid integer"),
        (_set("mean_ttft_ms", float("-inf")), "mean_ttft_ms", "finite number"),
        (_set("model_id", 7), "model_id", "valid string"),
        (lambda d: d["itls"].pop(), "itls", "holds 11 entries, ttfts 12"),
        (lambda d: d["latencies"].append(1.0), "latencies", "holds 13 entries, ttfts 12"),
        (_set("latencies.2", -1.0), "latencies[2]", "greater than or equal to 0"),
        (_set("output_lens.0", 2**40), "total_output_tokens", "output_lens add up to"),
        (
            _set("spec_decode_accepted_tokens", 10**6),
            "spec_decode_accepted_tokens",
            "exceeds the",
        ),
        (
            _set("spec_decode_per_position_acceptance_rates", [1.5]),
            "spec_decode_per_position_acceptance_rates[0]",
            "less than or equal to 1",
        ),
    ],
    ids=[
        "ttft-string",
        "ttft-nan",
        "ttft-negative",
        "itl-inf",
        "itl-negative",
        "itl-past-a-week",
        "length-bool",
        "length-float",
        "count-string",
        "mean-minus-inf",
        "model-number",
        "ragged-itls",
        "ragged-latencies",
        "latency-negative",
        "lengths-past-the-total",
        "accepted-past-drafted",
        "rate-above-one",
    ],
)
def test_a_bad_vllm_bench_value_is_located(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    source = NGRAM if "spec_decode" in field else BASE
    path = _changed(source, tmp_path / "b.json", change)
    with pytest.raises(InvalidInput) as info:
        imports.vllm_bench(path, "baseline")
    [problem] = [p for p in info.value.problems if p.field == field]
    assert problem.line == 1 and message in problem.message, info.value.problems


def test_json_nan_and_infinity_are_refused_where_read(tmp_path: Path) -> None:
    text = BASE.read_text().replace('"duration": ', '"duration": NaN, "x": ', 1)
    (tmp_path / "b.json").write_text(text)
    with pytest.raises(InvalidInput, match=r"b\.json:1: duration: Input should be a finite"):
        imports.vllm_bench(tmp_path / "b.json", "baseline")


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            _set("benchmarks.0.requests.successful.0.info.timings.first_token_iteration", 0.0),
            "benchmarks[0].requests.successful[0].info.timings.first_token_iteration",
            "is not after request_start",
        ),
        (
            _set("benchmarks.0.requests.successful.1.info.timings.last_token_iteration", 1.0e9),
            "benchmarks[0].requests.successful[1].info.timings.last_token_iteration",
            "is before first_token_iteration",
        ),
        (
            _set("benchmarks.0.requests.successful.2.output_tokens", -3),
            "benchmarks[0].requests.successful[2].output_tokens",
            "greater than or equal to 0",
        ),
        (
            _set("benchmarks.0.requests.successful.2.info.timings.request_start", "now"),
            "benchmarks[0].requests.successful[2].info.timings.request_start",
            "valid number",
        ),
        (
            _set("benchmarks.0.metrics.request_totals.successful", False),
            "benchmarks[0].metrics.request_totals.successful",
            "valid integer",
        ),
        (_set("benchmarks", {"0": {}}), "", "not a GuideLLM report"),
    ],
    ids=[
        "zero-ttft",
        "last-before-first",
        "negative-tokens",
        "timing-string",
        "total-bool",
        "benchmarks-object",
    ],
)
def test_a_bad_guidellm_value_is_located(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    path = _changed(GL_BASE, tmp_path / "g.json", change)
    with pytest.raises(InvalidInput) as info:
        imports.guidellm(path, "baseline")
    [problem] = [p for p in info.value.problems if p.field == field]
    assert problem.line == 1 and message in problem.message, info.value.problems


def test_a_zero_ttft_guidellm_request_equal_to_its_start(tmp_path: Path) -> None:
    """First token at the instant the request started: no timing to compare TTFT on."""

    def instant(data: dict[str, Any]) -> None:
        timings = data["benchmarks"][0]["requests"]["successful"][4]["info"]["timings"]
        timings["first_token_iteration"] = timings["request_start"]

    path = _changed(GL_BASE, tmp_path / "g.json", instant)
    with pytest.raises(InvalidInput, match=r"successful\[4\].*is not after request_start"):
        imports.guidellm(path, "baseline")


def test_deep_nesting_and_huge_files_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InvalidInput, match=r"deep\.json: not JSON: nested too deeply"):
        imports.guidellm(deep, "baseline")
    nested = tmp_path / "nested.json"
    nested.write_text('{"benchmarks": ' + "[" * 500 + "]" * 500 + "}")
    with pytest.raises(InvalidInput, match=r"nested\.json: JSON nesting is deeper than"):
        imports.guidellm(nested, "baseline")
    monkeypatch.setattr(imports, "MAX_BYTES", BASE.stat().st_size - 1)
    with pytest.raises(InvalidInput, match=r"too large \([\d,]+ bytes; the limit is"):
        imports.vllm_bench(BASE, "baseline")


def test_too_many_requests_are_refused_before_any_is_built(tmp_path: Path) -> None:
    n = imports.MAX_REQUESTS + 1

    def too_many(data: dict[str, Any]) -> None:
        for key in imports.VLLM_BENCH_LISTS:
            data[key] = data[key][:1] * n
        data["itls"] = [[]] * n
        data["completed"] = n

    path = _changed(BASE, tmp_path / "b.json", too_many)
    with pytest.raises(InvalidInput) as info:
        imports.vllm_bench(path, "baseline")
    assert {p.field for p in info.value.problems} == set(imports.VLLM_BENCH_LISTS)
    assert all(f"at most {imports.MAX_REQUESTS}" in p.message for p in info.value.problems)


def test_a_variant_named_twice_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--from",
            "vllm-bench",
            f"baseline={BASE}",
            f"baseline={NGRAM}",
            "--spec",
            str(Path(__file__).parents[2] / "bench/experiments/ngram-vs-baseline.yaml"),
            "--records",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 2
    assert result.stderr == "error: variant 'baseline' given more than once\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../x", "Baseline", "a b", "x-", "x_", "_x", "a.b"])
def test_a_variant_name_that_is_not_a_slug_is_a_usage_error(tmp_path: Path, name: str) -> None:
    spec = Path(__file__).parents[2] / "bench/experiments/ngram-vs-baseline.yaml"
    args = ["record", "--from", "vllm-bench", f"{name}={BASE}", f"ngram={NGRAM}"]
    result = CliRunner().invoke(cli, [*args, "--spec", str(spec), "--records", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {name!r}: a variant name is lower-case letters, digits and inner hyphens "
        "or underscores\n"
    )
    assert list(tmp_path.iterdir()) == []


# --- what a chunk carries, and classes from the prompt file --------------------------------


@pytest.mark.parametrize("path", [BASE, CHAT_BASE, *(p.values[0] for p in BY_POSITION)])
def test_one_token_per_chunk_gives_a_per_token_itl(path: Path) -> None:
    """Completions: N tokens in N chunks, N - 1 ITLs. Chat: vLLM's role-only chunk first, so
    N ITLs; the first token, and kbgen's TTFT, is one gap after the tool's TTFT."""
    raw = json.loads(path.read_text())
    found = imports.vllm_bench(path, "baseline")
    leading = 1 if raw["backend"] == "openai-chat" else 0
    assert [len(gaps) for gaps in raw["itls"]] == [n - 1 + leading for n in raw["output_lens"]]
    for sample, ttft, gaps, n in zip(
        found.samples, raw["ttfts"], raw["itls"], raw["output_lens"], strict=True
    ):
        assert sample.chunk_tokens == [1] * n == [1] * len(sample.chunk_ns)
        first = ttft + sum(gaps[:leading])
        assert sample.metrics()["ttft_ms"] == pytest.approx(first * 1000, abs=1e-3)
        assert sample.metrics()["e2e_ms"] == pytest.approx((ttft + sum(gaps)) * 1000, abs=0.01)
    assert not any("did not hold one token each" in n for n in found.notes)
    assert (imports.VLLM_BENCH_CHAT in found.notes) == bool(leading)


@pytest.mark.parametrize(("base", "ngram", "prompts"), BY_POSITION)
def test_a_chat_import_with_its_prompt_file(
    tmp_path: Path, base: Path, ngram: Path, prompts: Path
) -> None:
    """The issue's case: per-token ITL for the baseline, no false multi-token note, and the
    prompt file's classes, matched by position."""
    records = tmp_path / "records"
    spec = Path(__file__).parents[2] / "bench/experiments/ngram-vs-baseline.yaml"
    args = ["record", "--from", "vllm-bench", f"baseline={base}", f"ngram={ngram}"]
    result = CliRunner().invoke(
        cli, [*args, "--spec", str(spec), "--records", str(records), "--prompts", str(prompts)]
    )
    assert result.exit_code == 0, result.output
    suite = [json.loads(line) for line in prompts.read_text().splitlines()]
    classes = list(dict.fromkeys(p["class"] for p in suite))
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == classes
    saved = kb.load_file(Path(result.stdout.strip()))
    assert saved.workload.classes == classes
    assert saved.workload.prompt_suite_sha256 == hashlib.sha256(prompts.read_bytes()).hexdigest()
    assert saved.verdict is not None and list(saved.verdict.per_class) == classes
    for cls in classes:
        assert "itl_ms" in saved.measurements["baseline"][cls]
        assert "itl_ms" not in saved.measurements["ngram"][cls]  # n-gram: several a chunk
    assert saved.provenance is not None
    notes = saved.provenance.notes
    assert not any(n.startswith("baseline: in ") for n in notes)  # no multi-token note
    assert any(n.startswith("ngram: in ") and "one token each" in n for n in notes)
    for variant in ("baseline", "ngram"):
        assert f"{variant}: classes from {prompts.name}, matched by position" in "\n".join(notes)
        assert imports.no_split(variant) not in notes
    assert CliRunner().invoke(cli, ["record", "--check", result.stdout.strip()]).exit_code == 0


@pytest.mark.parametrize(("base", "ngram", "prompts"), BY_POSITION)
def test_classes_by_position(base: Path, ngram: Path, prompts: Path) -> None:
    found = [imports.vllm_bench(base, "baseline"), imports.vllm_bench(ngram, "ngram")]
    suite = imports.classify(found, prompts)
    lines = [json.loads(line)["class"] for line in prompts.read_text().splitlines()]
    for imported in found:
        assert [s.prompt_class for s in imported.samples] == lines
    assert suite.classes == list(dict.fromkeys(lines))


def test_without_prompts_an_import_has_one_class() -> None:
    found = [imports.vllm_bench(CHAT_BASE, "baseline"), imports.vllm_bench(CHAT_NGRAM, "ngram")]
    data, _ = compose.from_imports(found, "x", "X", FASTER)
    assert data.workload.classes == ["all"] and data.workload.prompt_suite_sha256 is None
    assert data.provenance is not None and imports.no_split("ngram") in data.provenance.notes


def _guidellm_sent(texts: list[str]) -> Callable[[dict[str, Any]], None]:
    """The real report's requests as if they had sent `texts`, one each (chat messages for
    every other request: GuideLLM sends either body)."""

    def change(data: dict[str, Any]) -> None:
        for i, (request, text) in enumerate(
            zip(data["benchmarks"][0]["requests"]["successful"], texts, strict=True)
        ):
            args = json.loads(request["request_args"])
            body = args["body"]
            body.pop("prompt")
            if i % 2:
                body["messages"] = [{"role": "user", "content": [{"type": "text", "text": text}]}]
            else:
                body["prompt"] = text
            request["request_args"] = json.dumps(args)

    return change


def test_guidellm_classes_by_prompt_text(tmp_path: Path) -> None:
    suite = [json.loads(line) for line in PROMPTS.read_text().splitlines()]
    sent = [p["prompt"] for p in reversed(suite[:12])]  # not the file's order: matched by text
    path = _changed(GL_BASE, tmp_path / "g.json", _guidellm_sent(sent))
    found = [imports.guidellm(path, "baseline"), imports.guidellm(path, "ngram")]
    classified = imports.classify(found, PROMPTS)
    expected = [p["class"] for p in reversed(suite[:12])]
    assert [s.prompt_class for s in found[0].samples] == expected
    assert classified.classes == ["coding", "explanatory"]
    assert f"baseline: classes from {PROMPTS.name}, matched by prompt text" in "\n".join(
        found[0].notes
    )
    data, _ = compose.from_imports(found, "x", "X", FASTER, suite=classified)
    assert data.workload.classes == ["coding", "explanatory"]
    assert data.verdict is not None and list(data.verdict.per_class) == ["coding", "explanatory"]


def _suite(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _chat_lines() -> list[str]:
    return PROMPTS.read_text().splitlines()


@pytest.mark.parametrize(
    ("files", "suite", "message"),
    [
        (
            (CHAT_BASE, CHAT_NGRAM),
            lambda: _chat_lines()[:-1],
            r"vllm-bench-chat-baseline\.json: 16 requests, but \S+p\.jsonl holds 15 prompts: "
            r"matching by position needs one request per prompt, in the file's order",
        ),
        (
            (GL_BASE, GL_NGRAM),
            _chat_lines,
            r"guidellm-baseline\.json: the prompt of request 0 is not in \S+p\.jsonl "
            r"\(12 of 12 requests' prompts are not\)",
        ),
        (
            (CHAT_BASE, CHAT_NGRAM),
            lambda: [*_chat_lines()[:-1], '{"class": "Coding!", "prompt": "x"}'],
            r"p\.jsonl:16: class: 'Coding!' is no class name",
        ),
        ((CHAT_BASE, CHAT_NGRAM), list, r"p\.jsonl: no prompts"),
        (
            (CHAT_BASE, CHAT_NGRAM),
            lambda: [*_chat_lines()[:-1], "{oops"],
            r"p\.jsonl:16: not JSON",
        ),
    ],
    ids=["count-differs", "text-not-found", "class-not-a-slug", "empty", "not-json"],
)
def test_a_prompt_file_that_does_not_match_is_one_line(
    tmp_path: Path, files: tuple[Path, Path], suite: Callable[[], list[str]], message: str
) -> None:
    importer = imports.guidellm if files[0] == GL_BASE else imports.vllm_bench
    found = [importer(files[0], "baseline"), importer(files[1], "ngram")]
    with pytest.raises(InvalidInput, match=message) as info:
        imports.classify(found, _suite(tmp_path, suite()))
    assert len(info.value.problems) == 1 and "\n" not in str(info.value)


def test_a_text_under_two_classes_cannot_be_matched_by_text(tmp_path: Path) -> None:
    suite = [json.loads(line) for line in _chat_lines()]
    sent = [p["prompt"] for p in suite[:12]]
    path = _changed(GL_BASE, tmp_path / "g.json", _guidellm_sent(sent))
    twice = [*_chat_lines(), json.dumps({"class": "other", "prompt": sent[3]})]
    found = [imports.guidellm(path, "baseline")]
    with pytest.raises(InvalidInput, match=r"the prompt of request 3 is in \S+ under 2 classes"):
        imports.classify(found, _suite(tmp_path, twice))
    # by position the same file is fine: each line has its own class
    chat = [imports.vllm_bench(CHAT_BASE, "baseline")]
    assert imports.classify(chat, _suite(tmp_path, [*_chat_lines()[:-1], twice[-1]])).classes


def test_a_summary_only_import_cannot_take_classes(tmp_path: Path) -> None:
    found = [imports.vllm_bench(_summary_only(CHAT_BASE, tmp_path / "b.json"), "baseline")]
    with pytest.raises(InvalidInput, match=r"b\.json: no per-request results in the order sent"):
        imports.classify(found, PROMPTS)


def test_an_unknown_backend_claims_no_per_token_itl(tmp_path: Path) -> None:
    path = _changed(CHAT_BASE, tmp_path / "b.json", _set("backend", "sglang"))
    found = imports.vllm_bench(path, "baseline")
    assert found.samples and not any(s.chunk_tokens for s in found.samples)
    assert any(
        "backend 'sglang': which of its chunks carry tokens is not known" in n for n in found.notes
    )


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ([], 1, "vllm-bench-chat-baseline.json: 16 requests, but"),
        (["--check"], 2, "--prompts goes with --from"),
    ],
    ids=["mismatch-exits-1", "without-from-exits-2"],
)
def test_prompts_on_the_command_line(
    tmp_path: Path, extra: list[str], code: int, message: str
) -> None:
    suite = _suite(tmp_path, _chat_lines()[:8])
    spec = Path(__file__).parents[2] / "bench/experiments/ngram-vs-baseline.yaml"
    pairs = [f"baseline={CHAT_BASE}", f"ngram={CHAT_NGRAM}"]
    args = ["--from", "vllm-bench", *pairs] if not extra else [str(tmp_path / "r.yaml")]
    options = ["--prompts", str(suite), "--spec", str(spec), "--records", str(tmp_path / "records")]
    result = CliRunner().invoke(cli, ["record", *args, *extra, *options])
    assert result.exit_code == code, result.output
    first, *rest = result.stderr.splitlines()  # the problem on one line, then their count
    assert message in first and rest == (["1 problem in 1 file(s)"] if code == 1 else [])
    assert "Traceback" not in result.output and not (tmp_path / "records").exists()


def test_a_chat_stream_of_the_role_chunk_alone_counts_no_token(tmp_path: Path) -> None:
    """One chunk and one token said: the chunk is the role-only one, so no chunk is known to
    have held the token, and the variant keeps no per-token ITL."""

    def role_chunk_only(data: dict[str, Any]) -> None:
        data["total_output_tokens"] -= data["output_lens"][4] - 1
        data["output_lens"][4], data["itls"][4] = 1, []

    found = imports.vllm_bench(_changed(CHAT_BASE, tmp_path / "b.json", role_chunk_only), "b")
    assert found.samples[4].ok and not any(s.chunk_tokens for s in found.samples)
    assert any(
        "in 1 of 16 requests the chunks did not hold one token each" in n for n in found.notes
    )


def test_a_guidellm_request_without_its_prompt_text_cannot_be_matched(tmp_path: Path) -> None:
    suite = [json.loads(line) for line in _chat_lines()]
    changed = _guidellm_sent([p["prompt"] for p in suite[:12]])

    def one_without(data: dict[str, Any]) -> None:
        changed(data)
        data["benchmarks"][0]["requests"]["successful"][2]["request_args"] = "{not json"

    found = [imports.guidellm(_changed(GL_BASE, tmp_path / "g.json", one_without), "baseline")]
    with pytest.raises(InvalidInput, match=r"g\.json: request 2 kept no prompt text to find in"):
        imports.classify(found, PROMPTS)
