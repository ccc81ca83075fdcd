"""GuideLLM reports, as the tool wrote them against the local vLLM (tiny model) and changed as
each case needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput
from kbgen.kb.models import Load, Outcome
from kbgen.record import compose, rule
from kbgen.record.importers import guidellm
from tests.support.imports import (
    FASTER,
    GL_BASE,
    GL_NGRAM,
    changed,
    set_at,
    unpacked,
)


def test_guidellm_report_becomes_first_and_last_token_samples() -> None:
    raw = json.loads(GL_BASE.read_text())
    bench = raw["benchmarks"][0]
    found = guidellm.read(GL_BASE, "baseline")
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
    found = [guidellm.read(GL_BASE, "baseline"), guidellm.read(GL_NGRAM, "ngram")]
    data, evidence = compose.from_imports(found, "x", "X", FASTER)
    assert evidence is not None and data.verdict is not None
    assert data.verdict.method == "samples"
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
        guidellm.read(path, "baseline")


def test_guidellm_errored_requests_are_failures_and_counts_must_agree(tmp_path: Path) -> None:
    def one_errored(data: dict[str, Any]) -> None:
        bench = data["benchmarks"][0]
        failed = bench["requests"]["successful"].pop(2)
        failed["info"]["error"] = "HTTP 500"
        bench["requests"]["errored"] = [failed]
        totals = bench["metrics"]["request_totals"]
        totals["successful"], totals["errored"] = 11, 1

    found = guidellm.read(changed(GL_BASE, tmp_path / "g.json", one_errored), "baseline")
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
        guidellm.read(changed(GL_BASE, tmp_path / "m.json", miscounted), "baseline")


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            set_at("benchmarks.0.requests.successful.0.info.timings.first_token_iteration", 0.0),
            "benchmarks[0].requests.successful[0].info.timings.first_token_iteration",
            "is not after request_start",
        ),
        (
            set_at("benchmarks.0.requests.successful.1.info.timings.last_token_iteration", 1.0e9),
            "benchmarks[0].requests.successful[1].info.timings.last_token_iteration",
            "is before first_token_iteration",
        ),
        (
            set_at("benchmarks.0.requests.successful.2.output_tokens", -3),
            "benchmarks[0].requests.successful[2].output_tokens",
            "greater than or equal to 0",
        ),
        (
            set_at("benchmarks.0.requests.successful.2.info.timings.request_start", "now"),
            "benchmarks[0].requests.successful[2].info.timings.request_start",
            "valid number",
        ),
        (
            set_at("benchmarks.0.metrics.request_totals.successful", False),
            "benchmarks[0].metrics.request_totals.successful",
            "valid integer",
        ),
        (set_at("benchmarks", {"0": {}}), "", "not a GuideLLM report"),
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
    path = changed(GL_BASE, tmp_path / "g.json", change)
    with pytest.raises(InvalidInput) as info:
        guidellm.read(path, "baseline")
    [problem] = [p for p in info.value.problems if p.field == field]
    assert problem.line == 1 and message in problem.message, info.value.problems


def test_a_zero_ttft_guidellm_request_equal_to_its_start(tmp_path: Path) -> None:
    """First token at the instant the request started: no timing to compare TTFT on."""

    def instant(data: dict[str, Any]) -> None:
        timings = data["benchmarks"][0]["requests"]["successful"][4]["info"]["timings"]
        timings["first_token_iteration"] = timings["request_start"]

    path = changed(GL_BASE, tmp_path / "g.json", instant)
    with pytest.raises(InvalidInput, match=r"successful\[4\].*is not after request_start"):
        guidellm.read(path, "baseline")


def test_the_tools_own_figures_and_metric_mapping_are_on_the_record() -> None:
    gl, _ = compose.from_imports(
        [guidellm.read(GL_BASE, "baseline"), guidellm.read(GL_NGRAM, "ngram")],
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


def test_what_a_guidellm_report_says_of_its_setup() -> None:
    """Its version, its strategy's concurrency and rate, the endpoint, and what every request's
    body asked for; its data in words; per request the tokens. The fixture's requests sent no
    temperature: the server's default, which the report does not say."""
    found = guidellm.read(GL_BASE, "baseline")
    assert found.version == "0.8.1"
    assert found.said == {
        "concurrency": 1,
        "request_rate": "inf",
        "api": "completions",
        "max_tokens": 32,
        "ignore_eos": True,
        "temperature": None,
        "usage": "continuous",
    }
    assert found.dataset == (
        "GuideLLM synthetic_text (output_tokens=32, prompt_tokens=32, turns=1), seed 42"
    )
    assert (found.tokens["input_tokens"].n, found.tokens["input_tokens"].mean) == (12, 32)
    record, _ = compose.from_imports([found, guidellm.read(GL_NGRAM, "ngram")], "x", "X", FASTER)
    assert record.provenance is not None and record.provenance.reference == "guidellm 0.8.1"
    assert record.workload is not None and record.workload.prompt_suite == found.dataset


def _bodies(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A change to the body every successful request of the report sent."""

    def each(data: dict[str, Any]) -> None:
        for request in data["benchmarks"][0]["requests"]["successful"]:
            args = json.loads(request["request_args"])
            change(args["body"])
            request["request_args"] = json.dumps(args)

    return each


def _first_body(data: dict[str, Any]) -> None:
    request = data["benchmarks"][0]["requests"]["successful"][0]
    args = json.loads(request["request_args"])
    args["body"]["max_tokens"] = 16
    request["request_args"] = json.dumps(args)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_bodies(lambda body: body.update(temperature=0)), {"temperature": 0}),
        (_bodies(lambda body: body.pop("ignore_eos")), {"ignore_eos": False}),  # the default
        (_bodies(lambda body: body.update(max_tokens="32")), {}),  # no integer: not said
        (_first_body, {"max_tokens": None}),  # the requests differ: no one value
        (
            _bodies(lambda body: body["stream_options"].pop("continuous_usage_stats")),
            {"usage": "final"},
        ),
        (
            set_at("benchmarks.0.config.strategy", {"type_": "concurrent", "streams": 8}),
            {"concurrency": 8, "request_rate": "inf"},
        ),
        (
            set_at("benchmarks.0.config.strategy", {"type_": "constant", "rate": 4.0}),
            {"concurrency": None, "request_rate": 4.0, "arrivals": {"process": "constant"}},
        ),
        (
            set_at("benchmarks.0.config.strategy", {"type_": "throughput"}),
            {"concurrency": None, "request_rate": "inf"},
        ),
    ],
    ids=[
        "temperature",
        "no-ignore-eos",
        "max-tokens-text",
        "max-tokens-differ",
        "usage-final",
        "concurrent",
        "constant",
        "throughput",
    ],
)
def test_what_a_guidellm_report_says_follows_its_requests(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], said: dict[str, Any]
) -> None:
    found = guidellm.read(changed(GL_BASE, tmp_path / "g.json", change), "baseline")
    for name, value in said.items():
        assert found.said[name] == value
    if not said:
        assert "max_tokens" not in found.said


def test_guidellm_s_data_file_is_named_without_the_machine_s_path(tmp_path: Path) -> None:
    data = [{"kind": "json_file", "path": "/home/someone/prompts.jsonl", "load_kwargs": {}}]
    path = changed(GL_BASE, tmp_path / "g.json", set_at("config.spec.data", data))
    found = guidellm.read(path, "baseline")
    assert found.dataset == 'GuideLLM json_file (path="prompts.jsonl"), seed 42'


@pytest.mark.parametrize("rate", [0.0, -2.0])
def test_a_rate_that_is_no_rate_is_not_said(tmp_path: Path, rate: float) -> None:
    strategy = {"type_": "poisson", "rate": rate}
    path = changed(GL_BASE, tmp_path / "g.json", set_at("benchmarks.0.config.strategy", strategy))
    assert "request_rate" not in guidellm.read(path, "baseline").said


def test_a_guidellm_sweep_is_a_step_per_benchmark(tmp_path: Path) -> None:
    """GuideLLM's sweep profile: synchronous, throughput (at most 4 in flight), then constant
    rates it derives from those two, each benchmark a step of the sweep by its run_index."""
    found = guidellm.read_all(unpacked(tmp_path)["baseline"], "baseline")
    assert [(i.step, i.step_kind, len(i.samples)) for i in found] == [
        (0, "synchronous", 4),
        (1, "throughput", 4),
        (2, "constant", 4),
        (3, "constant", 4),
    ]
    assert [i.said["concurrency"] for i in found] == [1, 4, None, None]
    assert [i.said["request_rate"] for i in found[2:]] == pytest.approx([14.2949, 19.0153], 1e-5)
    assert guidellm.SWEEP in found[0].notes
    assert "baseline at constant@14.29: GuideLLM's own figures" in "\n".join(found[2].notes)


def test_a_guidellm_sweep_is_one_record_whose_unequal_steps_compare_nothing(
    tmp_path: Path,
) -> None:
    files = unpacked(tmp_path)
    found = [i for arm, path in files.items() for i in guidellm.read_all(path, arm)]
    record, evidence = compose.from_imports(found, "x", "X", FASTER)
    loads: list[Load] = [
        {"concurrency": 1, "request_rate": "inf"},
        {"concurrency": 4, "request_rate": "inf"},
        {"sweep_step": 2},
        {"sweep_step": 3},
    ]
    assert evidence is not None and evidence.loads == loads and evidence.paired
    assert record.workload is not None and record.workload.loads == loads
    assert [m.load for m in record.by_load] == loads
    assert record.provenance is not None
    notes = record.provenance.notes
    assert (
        "sweep step 2: the arms were sent different loads (baseline request rate 14.2949; "
        "ngram request rate 9.7998): its cells compare no arms" in notes
    )
    assert "requests paired by prompt text: 16 prompt(s) sent to every variant, of 16" in notes
    verdict = record.verdict
    assert verdict is not None
    cells = {json.dumps(c.load): c for c in verdict.cells if c.variant == "ngram"}
    assert list(cells) == [json.dumps(load) for load in loads]
    for load in loads[2:]:
        cell = cells[json.dumps(load)]
        assert cell.outcome == Outcome.INCONCLUSIVE and rule.UNEQUAL_LOADS in (cell.reason or "")
    assert [b.load for b in verdict.best] == loads[:2]  # no best where no one load was sent


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            set_at("benchmarks.2.metrics.request_totals.successful", 5),
            "benchmarks[2].metrics.request_totals.successful",
            "says 5, but the report lists 4 successful requests",
        ),
        (set_at("benchmarks.3.config.run_index", 2), "benchmarks[3].config.run_index", "2 is"),
    ],
    ids=["a-later-benchmark-miscounted", "run-index-twice"],
)
def test_a_bad_sweep_benchmark_is_located(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    path = changed(unpacked(tmp_path)["baseline"], tmp_path / "g.json", change)
    with pytest.raises(InvalidInput) as info:
        guidellm.read_all(path, "baseline")
    [problem] = info.value.problems
    assert (problem.field, problem.line) == (field, 1) and message in problem.message


def test_a_sweep_against_one_benchmark_is_refused(tmp_path: Path) -> None:
    found = [
        *guidellm.read_all(GL_BASE, "baseline"),
        *guidellm.read_all(unpacked(tmp_path)["ngram"], "ngram"),
    ]
    with pytest.raises(InvalidInput, match="baseline: results of one load, where the other"):
        compose.from_imports(found, "x", "X", FASTER)
