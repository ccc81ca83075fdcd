"""metrics: parsing real vLLM /metrics scrapes, counter deltas and spec-decode figures.

Expected values are computed here from the raw fixture text (a regex over the sample lines) and
from the captured SSE streams, never by calling the code under test a second time.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import pytest

from kbgen.bench import metrics
from kbgen.errors import InvalidInput, KbgenError, MetricsError
from kbgen.run.counters import Counters
from kbgen.run.folder import RunFolder
from tests.run.test_folder import SPEC_TEXT, a_meta

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm"
ARMS = ["baseline", "ngram"]

# `name{labels} value` — enough for vLLM's exposition (no escaped quotes in its label values).
SAMPLE_LINE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')
T = TypeVar("T")


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _every(values: Iterable[T | None]) -> list[T]:
    """`values`, none of them missing."""
    listed = list(values)
    assert None not in listed, listed
    return [value for value in listed if value is not None]


def _raw_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE_LINE.match(line)
        assert match, f"unexpected line in fixture: {line!r}"
        labels = frozenset(LABEL.findall(match["labels"] or ""))
        out[(match["name"], labels)] = float(match["value"])
    return out


def _raw_total(text: str, name: str, **labels: str) -> float:
    """Sum of every sample of `name` whose labels include `labels` (over engines, models)."""
    wanted = set(labels.items())
    return sum(
        value
        for (sample, key), value in _raw_samples(text).items()
        if sample == name and wanted <= key
    )


def _raw_delta(arm: str, name: str, **labels: str) -> float:
    after = _raw_total(_text(f"{arm}-metrics-after.txt"), name, **labels)
    before = _raw_total(_text(f"{arm}-metrics-before.txt"), name, **labels)
    return after - before


def _final_usage(sse_name: str) -> dict[str, int]:
    """The last `usage` object of a captured stream (the server's own count of the request)."""
    usages: list[dict[str, int]] = [
        json.loads(payload)["usage"]
        for payload in re.findall(r"^data: (\{.*\})$", _text(sse_name), re.M)
        if json.loads(payload).get("usage")
    ]
    return usages[-1]


def _finish_reasons(sse_name: str) -> list[str]:
    return [
        choice["finish_reason"]
        for payload in re.findall(r"^data: (\{.*\})$", _text(sse_name), re.M)
        for choice in json.loads(payload).get("choices", [])
        if choice.get("finish_reason")
    ]


def _window(arm: str, model: str | None = None) -> Counters:
    before = metrics.parse(_text(f"{arm}-metrics-before.txt"))
    after = metrics.parse(_text(f"{arm}-metrics-after.txt"))
    return metrics.window(before, after, model=model)


# bench/vllm/smoke.py scrapes "before" after its warm-up request, then sends exactly one streaming
# completion and one streaming chat request, then scrapes "after" (see fixtures/vllm/README.md).
STREAMS_IN_WINDOW = ["completion", "chat"]


# --- parse --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [f"{arm}-metrics-{when}.txt" for arm in ARMS for when in ("before", "after")],
)
def test_parse_keeps_every_sample_of_a_real_scrape(name: str) -> None:
    text = _text(name)
    expected = _raw_samples(text)
    snapshot = metrics.parse(text)
    got = {
        (sample, key): value for sample, series in snapshot.items() for key, value in series.items()
    }
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == value or (math.isnan(value) and math.isnan(got[key])), key


def test_parse_keys_counters_by_exported_name_and_label_set() -> None:
    snapshot = metrics.parse(_text("ngram-metrics-after.txt"))
    series = snapshot["vllm:spec_decode_num_accepted_tokens_per_pos_total"]
    assert {dict(key)["position"] for key in series} == {"0", "1", "2", "3", "4"}
    assert all(dict(key)["engine"] == "0" for key in series)


# --- window: real captures ------------------------------------------------------------------


@pytest.mark.parametrize("arm", ARMS)
def test_generation_tokens_equal_the_streams_sent_between_the_scrapes(arm: str) -> None:
    out = _window(arm)
    usages = [_final_usage(f"{arm}-{kind}.sse") for kind in STREAMS_IN_WINDOW]
    assert out.generation_tokens == sum(u["completion_tokens"] for u in usages) == 128
    assert out.prompt_tokens == sum(u["prompt_tokens"] for u in usages)
    assert out.generation_tokens == _raw_delta(arm, "vllm:generation_tokens_total")
    assert out.preemptions == 0


@pytest.mark.parametrize("arm", ARMS)
def test_streams_match_their_request_sidecars(arm: str) -> None:
    # ignore_eos with max_tokens N: each captured stream must have produced exactly N tokens.
    for kind in STREAMS_IN_WINDOW:
        request = json.loads(_text(f"{arm}-{kind}.request.json"))
        assert request["ignore_eos"] is True
        assert _final_usage(f"{arm}-{kind}.sse")["completion_tokens"] == request["max_tokens"]


@pytest.mark.parametrize("arm", ARMS)
def test_requests_finished_by_reason(arm: str) -> None:
    out = _window(arm)
    reasons = [r for kind in STREAMS_IN_WINDOW for r in _finish_reasons(f"{arm}-{kind}.sse")]
    assert reasons == ["length", "length"]
    finished = out.requests_finished
    assert finished["length"] == 2
    assert sum(_every(finished.values())) == len(reasons)
    assert set(finished) == {"stop", "length", "abort", "error", "repetition"}


def test_baseline_window_has_no_spec_decode() -> None:
    out = _window("baseline")
    assert out.spec_decode is None
    # as summary.json and a samples file keep it: its keys, in their order, and no spec_decode
    assert list(out.model_dump(exclude_unset=True)) == [
        "generation_tokens",
        "prompt_tokens",
        "preemptions",
        "requests_finished",
        "prefix_cache_queries",
        "prefix_cache_hits",
    ]


def test_ngram_window_keeps_its_keys_in_order() -> None:
    out = _window("ngram").model_dump(exclude_unset=True)
    assert list(out) == [
        "generation_tokens",
        "prompt_tokens",
        "preemptions",
        "requests_finished",
        "prefix_cache_queries",
        "prefix_cache_hits",
        "spec_decode",
    ]
    assert list(out["spec_decode"]) == [
        "drafts",
        "draft_tokens",
        "accepted_tokens",
        "accepted_per_position",
        "acceptance_rate",
        "mean_acceptance_length",
        "per_position_acceptance",
    ]


def test_the_prefix_cache_counts_are_the_raw_counters_deltas() -> None:
    out = _window("baseline")
    assert out.prefix_cache_queries == _raw_delta("baseline", "vllm:prefix_cache_queries_total")
    assert out.prefix_cache_hits == _raw_delta("baseline", "vllm:prefix_cache_hits_total")
    assert out.prefix_cache_queries and out.prefix_cache_hits is not None
    bare = metrics.parse("vllm:generation_tokens_total 5.0\n")
    assert "prefix_cache_hits" not in metrics.window(bare, bare).model_dump(exclude_unset=True)


def test_ngram_spec_decode_deltas_match_the_raw_counters() -> None:
    spec = _window("ngram").spec_decode
    assert spec is not None
    drafts = _raw_delta("ngram", "vllm:spec_decode_num_drafts_total")
    draft_tokens = _raw_delta("ngram", "vllm:spec_decode_num_draft_tokens_total")
    accepted = _raw_delta("ngram", "vllm:spec_decode_num_accepted_tokens_total")
    positions = sorted(
        {
            dict(key)["position"]
            for (name, key) in _raw_samples(_text("ngram-metrics-after.txt"))
            if name == "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        },
        key=int,
    )
    per_pos = [
        _raw_delta("ngram", "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=p)
        for p in positions
    ]
    assert drafts > 0 and draft_tokens > 0 and accepted > 0
    assert spec.drafts == drafts
    assert spec.draft_tokens == draft_tokens
    assert spec.accepted_tokens == accepted
    assert spec.accepted_per_position == per_pos
    assert spec.acceptance_rate == pytest.approx(accepted / draft_tokens)
    assert spec.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
    assert spec.per_position_acceptance == pytest.approx([a / drafts for a in per_pos])


def test_ngram_spec_decode_figures_are_consistent() -> None:
    spec = _window("ngram").spec_decode
    assert spec is not None and spec.per_position_acceptance is not None
    assert spec.acceptance_rate is not None and spec.mean_acceptance_length is not None
    num_speculative_tokens = 5  # positions 0..4 in the scrape
    assert len(spec.per_position_acceptance) == num_speculative_tokens
    assert len(spec.accepted_per_position) == num_speculative_tokens
    # Every accepted token sits at exactly one draft position.
    assert sum(spec.accepted_per_position) == spec.accepted_tokens
    assert all(0 <= rate <= 1 for rate in spec.per_position_acceptance)
    assert 0 <= spec.acceptance_rate <= 1
    assert 1 <= spec.mean_acceptance_length <= 1 + num_speculative_tokens
    for key in ("drafts", "draft_tokens", "accepted_tokens"):
        assert float(getattr(spec, key)).is_integer()


# --- window: model filter, missing counters -------------------------------------------------


@pytest.mark.parametrize("arm", ARMS)
def test_model_filter_with_the_served_model_changes_nothing(arm: str) -> None:
    served = json.loads(_text(f"{arm}-models.json"))["data"][0]["id"]
    assert _window(arm, model=served) == _window(arm)


@pytest.mark.parametrize("arm", ARMS)
def test_model_filter_with_another_model_gives_zero_deltas(arm: str) -> None:
    out = _window(arm, model="some/other-model")
    assert out.generation_tokens == 0
    assert out.prompt_tokens == 0
    assert out.preemptions == 0
    assert set(out.requests_finished.values()) == {0}
    if arm == "ngram":
        spec = out.spec_decode
        assert spec is not None
        assert spec.drafts == spec.draft_tokens == spec.accepted_tokens == 0
        assert spec.accepted_per_position == [0] * 5
        # nothing was drafted: the ratios are undefined, not 0
        assert spec.acceptance_rate is None
        assert spec.mean_acceptance_length is None


def _without(text: str, prefix: str) -> str:
    kept = [line for line in text.splitlines(keepends=True) if prefix not in line]
    assert len(kept) < len(text.splitlines()), f"{prefix} not in the fixture"
    return "".join(kept)


def test_a_counter_absent_before_counts_from_zero() -> None:
    before_text = _without(_text("ngram-metrics-before.txt"), "vllm:generation_tokens_")
    before_text = _without(before_text, "vllm:spec_decode_")
    after_text = _text("ngram-metrics-after.txt")
    out = metrics.window(metrics.parse(before_text), metrics.parse(after_text))
    assert out.generation_tokens == _raw_total(after_text, "vllm:generation_tokens_total")
    spec = out.spec_decode
    assert spec is not None
    assert spec.drafts == _raw_total(after_text, "vllm:spec_decode_num_drafts_total")
    assert spec.accepted_tokens == _raw_total(
        after_text, "vllm:spec_decode_num_accepted_tokens_total"
    )
    # counters present in both still give the window's delta
    assert out.prompt_tokens == _raw_delta("ngram", "vllm:prompt_tokens_total")


def test_an_empty_before_snapshot_gives_the_totals() -> None:
    after_text = _text("baseline-metrics-after.txt")
    out = metrics.window({}, metrics.parse(after_text))
    assert out.generation_tokens == _raw_total(after_text, "vllm:generation_tokens_total")
    assert out.prompt_tokens == _raw_total(after_text, "vllm:prompt_tokens_total")


# --- window: several engines and models (constructed) --------------------------------------

TWO_ENGINES = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="a"} %(a0)s
vllm:generation_tokens_total{engine="1",model_name="a"} %(a1)s
vllm:generation_tokens_total{engine="0",model_name="b"} %(b0)s
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="a"} %(a0)s
vllm:spec_decode_num_drafts_total{engine="1",model_name="a"} %(a1)s
vllm:spec_decode_num_drafts_total{engine="0",model_name="b"} %(b0)s
"""


@pytest.mark.parametrize(
    ("model", "generation", "drafts"),
    [
        pytest.param(None, (10 - 1) + (20 - 2) + (400 - 300), (10 - 1) + (20 - 2) + 100, id="all"),
        pytest.param("a", (10 - 1) + (20 - 2), (10 - 1) + (20 - 2), id="a-over-engines"),
        pytest.param("b", 400 - 300, 400 - 300, id="b"),
        pytest.param("c", 0, 0, id="unknown"),
    ],
)
def test_window_sums_engines_and_filters_models(
    model: str | None, generation: float, drafts: float
) -> None:
    before = metrics.parse(TWO_ENGINES % {"a0": 1, "a1": 2, "b0": 300})
    after = metrics.parse(TWO_ENGINES % {"a0": 10, "a1": 20, "b0": 400})
    out = metrics.window(before, after, model=model)
    assert out.generation_tokens == generation
    spec = out.spec_decode
    assert spec is not None
    assert spec.drafts == drafts


# --- errors ---------------------------------------------------------------------------------


def _cut_mid_label_set() -> str:
    text = _text("baseline-metrics-after.txt")
    start = text.index("vllm:generation_tokens_total{")
    return text[: start + len("vllm:generation_tokens_total{engine=")]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("this is not a metric line", id="prose"),
        pytest.param('vllm:generation_tokens_total{engine="0"} many\n', id="non-numeric-value"),
        pytest.param('vllm:generation_tokens_total{engine="0 1\n', id="unclosed-label"),
        pytest.param("<html><body>502 Bad Gateway</body></html>\n", id="html"),
        pytest.param(_cut_mid_label_set(), id="real-scrape-cut-mid-sample"),
    ],
)
def test_malformed_text_raises_metrics_error(text: str) -> None:
    with pytest.raises(MetricsError, match="not Prometheus text") as info:
        metrics.parse(text)
    assert isinstance(info.value, KbgenError)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    ("value", "shown"),
    [("NaN", "to nan"), ("+Inf", "to inf"), ("1.0", "to 1.0")],
    ids=["nan", "inf", "fell"],  # 1.0 is below the before scrape's count: a restart
)
def test_a_counter_that_is_no_number_or_falls_raises_metrics_error(value: str, shown: str) -> None:
    before = _text("ngram-metrics-before.txt")
    line = re.compile(r"^(vllm:generation_tokens_total\{[^}]*\}) \S+$", re.M)
    assert line.search(before) and _raw_total(before, "vllm:generation_tokens_total") > 1
    after = line.sub(lambda m: f"{m[1]} {value}", _text("ngram-metrics-after.txt"))
    with pytest.raises(MetricsError, match=f"vllm:generation_tokens_total went from .* {shown}"):
        metrics.window(metrics.parse(before), metrics.parse(after))


# --- window: a real H200 --------------------------------------------------------------------

H200_RECORD = Path(__file__).parents[2] / "records" / "2026-12-01-ngram-vs-baseline-h200-c1.yaml"


def test_the_h200_windows_add_up_to_its_record_s_speculative_decoding_counts() -> None:
    """The n-gram arm's two windows on the H200 (vLLM 0.26.0; the `vllm:` families of its
    scrapes kept): their counters are what its record says, and every token is counted."""
    import yaml

    windows = [
        metrics.window(
            metrics.parse(_text(f"h200-ngram-{w}-metrics-before.txt")),
            metrics.parse(_text(f"h200-ngram-{w}-metrics-after.txt")),
        )
        for w in (0, 1)
    ]
    record = yaml.safe_load(H200_RECORD.read_text())
    said = record["spec_decode"]["ngram"]
    requests = len(record["workload"]["order"]) // 2 * 36  # two windows of 36 prompts
    max_tokens = record["workload"]["max_tokens"]
    assert sum(_every(w.generation_tokens for w in windows)) == said["generation_tokens"]
    assert said["generation_tokens"] == requests * max_tokens  # EOS ignored: all of them
    for counter in ("drafts", "draft_tokens", "accepted_tokens"):
        total = sum(getattr(w.spec_decode, counter) for w in windows)
        assert total == said[counter], counter
    specs = _every(w.spec_decode for w in windows)
    accepted = sum(s.accepted_tokens for s in specs)
    drafted = sum(s.draft_tokens for s in specs)
    assert accepted / drafted == pytest.approx(said["acceptance_rate"], abs=1e-5)


def test_a_learned_draft_s_acceptance_falls_by_position_on_a_real_h200() -> None:
    """EAGLE-3 (3 speculative tokens, the draft `run.sh draft` trained) on vLLM 0.26, one H200:
    the scrape of a fresh server after four requests of 128 tokens (EOS ignored), counted from
    its start. Every drafted position is counted, and acceptance falls from the first."""
    fresh = metrics.window(metrics.parse(""), metrics.parse(_text("h200-eagle3-metrics.txt")))
    spec = fresh.spec_decode
    assert spec is not None
    assert spec.draft_tokens == 3 * spec.drafts == 1050
    assert spec.accepted_per_position == [110, 36, 15]
    assert sum(spec.accepted_per_position) == spec.accepted_tokens
    assert spec.per_position_acceptance is not None
    first, second, third = spec.per_position_acceptance
    assert first == pytest.approx(110 / 350) and first > second > third
    assert spec.mean_acceptance_length == pytest.approx(1 + 161 / 350)
    assert fresh.generation_tokens == 4 * 128
    assert fresh.requests_finished["length"] == 4


EAGLE3_RECORD = H200_RECORD.parent / "2026-12-04-eagle3-sweep-h200-pinned.yaml"


def test_a_learned_draft_s_windows_at_5_tokens_add_up_to_its_record_position_by_position() -> None:
    """EAGLE-3 at 5 speculative tokens in the H200 sweep (vLLM 0.26.0, the draft `run.sh
    draft` trained): its three windows, one per load, give the record's counts and its
    acceptance at each of the 5 positions, which falls from the first to almost none."""
    import yaml

    windows = [
        metrics.window(
            metrics.parse(_text(f"h200-eagle3-k5-{w}-metrics-before.txt")),
            metrics.parse(_text(f"h200-eagle3-k5-{w}-metrics-after.txt")),
        )
        for w in (0, 1, 2)
    ]
    said = yaml.safe_load(EAGLE3_RECORD.read_text())["spec_decode"]["eagle3-k5"]
    specs = _every(w.spec_decode for w in windows)
    for counter in ("drafts", "draft_tokens", "accepted_tokens"):
        assert sum(getattr(s, counter) for s in specs) == said[counter], counter
    assert sum(_every(w.generation_tokens for w in windows)) == said["generation_tokens"]
    assert all(s.draft_tokens == 5 * s.drafts for s in specs)
    by_position = [sum(s.accepted_per_position[i] for s in specs) for i in range(5)]
    drafts = sum(s.drafts for s in specs)
    rates = [accepted / drafts for accepted in by_position]
    assert rates == pytest.approx(said["per_position_acceptance"], abs=1e-5)
    assert rates == sorted(rates, reverse=True) and rates[0] > 0.3 and rates[4] < 0.01


@pytest.mark.parametrize(
    ("relative", "message"),
    [
        ("metrics/gone.prom", "metrics/gone.prom: the /metrics snapshot that run.json names is"),
        ("../outside.prom", "../outside.prom: a symlink to a file outside"),
        ("metrics/garbage.prom", "metrics/garbage.prom: /metrics is not Prometheus text"),
    ],
    ids=["missing", "outside-the-folder", "not-prometheus"],
)
def test_a_metrics_snapshot_is_read_inside_the_run_folder(
    tmp_path: Path, relative: str, message: str
) -> None:
    folder = RunFolder.create(tmp_path, "s", SPEC_TEXT, a_meta())
    (tmp_path / "outside.prom").write_text("vllm:x 1\n")
    (folder.path / "metrics" / "garbage.prom").write_text("vllm:x{ 1\n")
    with pytest.raises(InvalidInput) as info:
        metrics.read(folder, relative)
    assert str(info.value).startswith(f"{folder.path}/{message}")
