"""`vllm bench serve` result files, as the tool wrote them against the local vLLM (tiny model)
and changed as each case needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput, Mismatch
from kbgen.kb.models import Arrivals
from kbgen.record import compose
from kbgen.record.importers import reading, vllm_bench
from tests.support.imports import (
    BASE,
    BY_POSITION,
    CHAT_BASE,
    CHAT_NGRAM,
    FASTER,
    NGRAM,
    changed,
    set_at,
    summary_only,
)

API = ["completions", "chat"]


def test_vllm_bench_detailed_becomes_samples() -> None:
    raw = json.loads(BASE.read_text())
    base = vllm_bench.read(BASE, "baseline")
    assert base.model == "tiny" and len(base.samples) == raw["completed"] == 12
    first = base.samples[0]
    assert first.ok and first.output_tokens == raw["output_lens"][0]
    assert first.metrics()["ttft_ms"] == pytest.approx(raw["ttfts"][0] * 1000, abs=1e-3)
    assert first.metrics()["e2e_ms"] == pytest.approx(raw["latencies"][0] * 1000, abs=0.01)
    assert first.chunk_tokens == [1] * raw["output_lens"][0]  # one token per chunk: ITL known


def test_vllm_bench_multi_token_chunks_keep_no_per_token_itl() -> None:
    ngram = vllm_bench.read(NGRAM, "ngram")
    assert any(s.ok and not s.chunk_tokens for s in ngram.samples)
    assert any("no per-token ITL" in note for note in ngram.notes)
    raw = json.loads(NGRAM.read_text())
    assert ngram.spec_decode is not None
    assert ngram.spec_decode["drafts"] == raw["spec_decode_num_drafts"]
    assert ngram.spec_decode["accepted_tokens"] == raw["spec_decode_accepted_tokens"]


def test_summary_only_is_inconclusive_unless_allowed(tmp_path: Path) -> None:
    found = [
        vllm_bench.read(summary_only(BASE, tmp_path / "b.json"), "baseline"),
        vllm_bench.read(summary_only(NGRAM, tmp_path / "n.json"), "ngram"),
    ]
    assert not found[0].samples and "decode_tok_s" in found[0].stats
    data, evidence = compose.from_imports(found, "x", "X", FASTER)
    assert evidence is None and data.raw_samples is None
    assert data.verdict is not None
    assert data.verdict.outcome == "inconclusive" and data.verdict.method == "summary"
    assert any("no confidence interval" in c for c in data.verdict.caveats)
    assert "was not allowed (--allow-summary-only)" in data.verdict.rule
    assert "allowed explicitly" not in data.verdict.rule
    allowed, _ = compose.from_imports(found, "x", "X", FASTER, allow_summary_only=True)
    assert allowed.verdict is not None
    assert "allowed explicitly with --allow-summary-only" in allowed.verdict.rule
    tpot = {
        name: json.loads(path.read_text())["mean_tpot_ms"]
        for name, path in (("baseline", BASE), ("ngram", NGRAM))
    }
    assert allowed.verdict is not None
    effect = allowed.verdict.per_class["all"].effect  # decode rate = 1000 / TPOT
    assert effect == pytest.approx(tpot["baseline"] / tpot["ngram"] - 1, rel=1e-5)
    assert allowed.verdict.outcome != "inconclusive"


def test_a_summary_keeps_its_percentiles_and_token_totals(tmp_path: Path) -> None:
    """`--metric-percentiles 90,99` adds p90_* keys; without per-request lists the token counts
    per request are the totals over the completed requests (no fewest, no most)."""
    path = changed(
        summary_only(BASE, tmp_path / "s.json"), tmp_path / "p.json", set_at("p90_ttft_ms", 41.5)
    )
    found = vllm_bench.read(path, "baseline")
    assert found.stats["ttft_ms"]["p90"] == 41.5
    raw = json.loads(BASE.read_text())
    tokens = found.tokens["input_tokens"]
    assert (tokens.n, tokens.min, tokens.max) == (raw["completed"], None, None)
    assert tokens.mean == pytest.approx(raw["total_input_tokens"] / raw["completed"])


def test_the_file_s_setup_is_said() -> None:
    """What a `vllm bench serve` file states of the workload: its concurrency, request rate,
    endpoint (from the backend) and how it asked for usage; and per request the tokens."""
    raw = json.loads(CHAT_BASE.read_text())
    found = vllm_bench.read(CHAT_BASE, "baseline")
    assert found.said == {"concurrency": 1, "request_rate": "inf", "api": "chat", "usage": "final"}
    assert found.tokens["input_tokens"].n == raw["completed"]
    assert found.tokens["input_tokens"].max == max(raw["input_lens"])
    assert found.tokens["output_tokens"].mean == raw["total_output_tokens"] / raw["completed"]
    assert vllm_bench.read(BASE, "baseline").said["api"] == "completions"


def test_a_rate_with_a_burstiness_is_a_gamma_process(tmp_path: Path) -> None:
    def bursty(data: dict[str, Any]) -> None:
        data.update(request_rate=4.0, burstiness=0.5)

    found = vllm_bench.read(changed(BASE, tmp_path / "b.json", bursty), "baseline")
    assert found.said["arrivals"] == {"process": "gamma", "burstiness": 0.5}
    assert "arrivals" not in vllm_bench.read(BASE, "baseline").said  # as fast as it could
    other = changed(NGRAM, tmp_path / "n.json", bursty)
    found_both = [found, vllm_bench.read(other, "ngram")]
    record, _ = compose.from_imports(found_both, "x", "X", FASTER)
    assert record.workload is not None and record.workload.request_rate == 4.0
    assert record.workload.arrivals == Arrivals(process="gamma", burstiness=0.5)
    assert record.provenance is not None
    assert any("its seed they do not keep" in n for n in record.provenance.notes)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("max_concurrency", None, {"concurrency": None}),  # no --max-concurrency: unbounded
        ("request_rate", 8.0, {"request_rate": 8.0, "arrivals": {"process": "poisson"}}),
        ("backend", "tgi", {}),  # neither an endpoint nor a usage mode known
    ],
)
def test_what_a_file_says_of_its_schedule(
    tmp_path: Path, key: str, value: Any, said: dict[str, Any]
) -> None:
    found = vllm_bench.read(changed(BASE, tmp_path / "b.json", set_at(key, value)), "baseline")
    for name, expected in said.items():
        assert found.said[name] == expected
    if key == "backend":
        assert "api" not in found.said and "usage" not in found.said
    if key == "max_concurrency":
        assert any("without --max-concurrency" in n for n in found.notes)


def test_different_models_are_refused(tmp_path: Path) -> None:
    other = json.loads(NGRAM.read_text())
    other["model_id"] = "another-model"
    (tmp_path / "n.json").write_text(json.dumps(other))
    found = [vllm_bench.read(BASE, "baseline"), vllm_bench.read(tmp_path / "n.json", "n")]
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
        vllm_bench.read(path, "baseline")


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
    path = changed(BASE, tmp_path / "b.json", _fail_request(3, error))
    found = vllm_bench.read(path, "baseline")
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
    path = changed(BASE, tmp_path / "b.json", change)
    with pytest.raises(InvalidInput, match=rf"b.json:1: {re.escape(message)}"):
        vllm_bench.read(path, "baseline")


def _two_tokens_in_one_chunk(data: dict[str, Any]) -> None:
    """Request 5's last two gaps as one: a chunk carrying two tokens, the way vllm bench
    records it under speculative decoding (one gap per chunk, the token count unsaid)."""
    gaps = data["itls"][5]
    data["itls"][5] = [*gaps[:-2], gaps[-2] + gaps[-1]]


@pytest.mark.parametrize(("base", "ngram"), [(BASE, NGRAM), (CHAT_BASE, CHAT_NGRAM)], ids=API)
def test_per_token_itl_only_when_every_request_qualifies(
    tmp_path: Path, base: Path, ngram: Path
) -> None:
    whole = vllm_bench.read(base, "baseline")
    assert all(s.chunk_tokens for s in whole.samples)  # every chunk one token: ITL known
    path = changed(base, tmp_path / "b.json", _two_tokens_in_one_chunk)
    found = vllm_bench.read(path, "baseline")
    # the other requests still qualify, but a per-token ITL of them alone would be biased
    assert not any(s.chunk_tokens for s in found.samples)
    n = len(found.samples)
    assert f"baseline: in 1 of {n} requests the chunks did not hold one token each" in "".join(
        found.notes
    )
    data, _ = compose.from_imports([found, vllm_bench.read(ngram, "ngram")], "x", "X", FASTER)
    assert "itl_ms" not in data.measurements["baseline"]["all"]
    assert "chunk_gap_ms" in data.measurements["baseline"]["all"]


def test_the_tools_own_figures_and_metric_mapping_are_on_the_record() -> None:
    raw = {
        name: json.loads(path.read_text()) for name, path in (("baseline", BASE), ("ngram", NGRAM))
    }
    data, _ = compose.from_imports(
        [vllm_bench.read(BASE, "baseline"), vllm_bench.read(NGRAM, "ngram")], "x", "X", FASTER
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


def test_tokens_per_engine_step_of_an_import_from_the_tools_token_total() -> None:
    raw = json.loads(NGRAM.read_text())
    data, _ = compose.from_imports(
        [vllm_bench.read(BASE, "baseline"), vllm_bench.read(NGRAM, "ngram")], "x", "X", FASTER
    )
    steps = raw["total_output_tokens"] - raw["spec_decode_accepted_tokens"]
    stats = data.spec_decode["ngram"]
    assert stats.tokens_per_engine_step == pytest.approx(raw["total_output_tokens"] / steps, 1e-5)
    assert stats.drafted_step_share == pytest.approx(raw["spec_decode_num_drafts"] / steps, 1e-5)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (set_at("ttfts.3", "fast"), "ttfts[3]", "valid number"),
        (set_at("ttfts.3", float("nan")), "ttfts[3]", "finite number"),
        (set_at("ttfts.3", -0.5), "ttfts[3]", "greater than or equal to 0"),
        (set_at("itls.2.0", float("inf")), "itls[2][0]", "finite number"),
        (set_at("itls.2.0", -1e-3), "itls[2][0]", "greater than or equal to 0"),
        (set_at("itls.2.0", 1e300), "itls[2][0]", "less than or equal to 604800"),
        (set_at("output_lens.0", True), "output_lens[0]", "valid integer"),
        (set_at("output_lens.0", 31.5), "output_lens[0]", "valid integer"),
        (set_at("completed", "12"), "completed", "valid integer"),
        (set_at("mean_ttft_ms", float("-inf")), "mean_ttft_ms", "finite number"),
        (set_at("model_id", 7), "model_id", "valid string"),
        (lambda d: d["itls"].pop(), "itls", "holds 11 entries, ttfts 12"),
        (lambda d: d["latencies"].append(1.0), "latencies", "holds 13 entries, ttfts 12"),
        (set_at("latencies.2", -1.0), "latencies[2]", "greater than or equal to 0"),
        (set_at("output_lens.0", 2**40), "total_output_tokens", "output_lens add up to"),
        (
            set_at("spec_decode_accepted_tokens", 10**6),
            "spec_decode_accepted_tokens",
            "exceeds the",
        ),
        (
            set_at("spec_decode_per_position_acceptance_rates", [1.5]),
            "spec_decode_per_position_acceptance_rates[0]",
            "less than or equal to 1",
        ),
        (set_at("max_concurrency", 0), "max_concurrency", "greater than or equal to 1"),
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
        "no-concurrency",
    ],
)
def test_a_bad_vllm_bench_value_is_located(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    source = NGRAM if "spec_decode" in field else BASE
    path = changed(source, tmp_path / "b.json", change)
    with pytest.raises(InvalidInput) as info:
        vllm_bench.read(path, "baseline")
    [problem] = [p for p in info.value.problems if p.field == field]
    assert problem.line == 1 and message in problem.message, info.value.problems


def test_json_nan_and_infinity_are_refused_where_read(tmp_path: Path) -> None:
    text = BASE.read_text().replace('"duration": ', '"duration": NaN, "x": ', 1)
    (tmp_path / "b.json").write_text(text)
    with pytest.raises(InvalidInput, match=r"b\.json:1: duration: Input should be a finite"):
        vllm_bench.read(tmp_path / "b.json", "baseline")


def test_too_many_requests_are_refused_before_any_is_built(tmp_path: Path) -> None:
    n = reading.MAX_REQUESTS + 1

    def too_many(data: dict[str, Any]) -> None:
        for key in vllm_bench.LISTS:
            data[key] = data[key][:1] * n
        data["itls"] = [[]] * n
        data["completed"] = n

    path = changed(BASE, tmp_path / "b.json", too_many)
    with pytest.raises(InvalidInput) as info:
        vllm_bench.read(path, "baseline")
    assert {p.field for p in info.value.problems} == set(vllm_bench.LISTS)
    assert all(f"at most {reading.MAX_REQUESTS}" in p.message for p in info.value.problems)


@pytest.mark.parametrize("path", [BASE, CHAT_BASE, *(p.values[0] for p in BY_POSITION)])
def test_one_token_per_chunk_gives_a_per_token_itl(path: Path) -> None:
    """Completions: N tokens in N chunks, N - 1 ITLs. Chat: vLLM's role-only chunk first, so
    N ITLs; the first token, and kbgen's TTFT, is one gap after the tool's TTFT."""
    raw = json.loads(path.read_text())
    found = vllm_bench.read(path, "baseline")
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
    assert (vllm_bench.CHAT in found.notes) == bool(leading)


def test_an_unknown_backend_claims_no_per_token_itl(tmp_path: Path) -> None:
    path = changed(CHAT_BASE, tmp_path / "b.json", set_at("backend", "sglang"))
    found = vllm_bench.read(path, "baseline")
    assert found.samples and not any(s.chunk_tokens for s in found.samples)
    assert any(
        "backend 'sglang': which of its chunks carry tokens is not known" in n for n in found.notes
    )


def test_a_chat_stream_of_the_role_chunk_alone_counts_no_token(tmp_path: Path) -> None:
    """One chunk and one token said: the chunk is the role-only one, so no chunk is known to
    have held the token, and the variant keeps no per-token ITL."""

    def role_chunk_only(data: dict[str, Any]) -> None:
        data["total_output_tokens"] -= data["output_lens"][4] - 1
        data["output_lens"][4], data["itls"][4] = 1, []

    found = vllm_bench.read(changed(CHAT_BASE, tmp_path / "b.json", role_chunk_only), "b")
    assert found.samples[4].ok and not any(s.chunk_tokens for s in found.samples)
    assert any(
        "in 1 of 16 requests the chunks did not hold one token each" in n for n in found.notes
    )
