"""Synthetic lengths and trace replay: the readers on real trace slices, the slice, the times, the
drawn lengths' distributions, and prompts built to the token with equal blocks read alike."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kbgen.errors import InvalidInput
from kbgen.kb.models import Lengths, Synthetic, Trace
from kbgen.run import prefixes, traffic
from kbgen.run.models import Traffic
from kbgen.run.spec import ExperimentSpec, WorkloadSpec
from kbgen.run.traffic import Request
from tests.support.specs import small_spec

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"
MOONCAKE = TRACES / "mooncake-conversation-head.jsonl"
AZURE = TRACES / "azure-conv-2023-head.csv"
# word -> tokens, as a tokenizer would say: one- and two-token words
COUNTS = {" the": 1, " of": 1, " and": 1, " question": 2, " answer": 2, " system": 3}
BUILT = Traffic(word_tokens=COUNTS, requests=1)


def test_the_mooncake_reader_reads_the_real_conversation_trace() -> None:
    found = traffic.read(MOONCAKE, Trace(path=MOONCAKE.name))
    assert len(found) == 60
    assert found[0] == Request(0.0, 6758, 500, tuple(range(14)))
    assert [r.offset_s for r in found[9:11]] == [0.0, 3.0]  # timestamps in ms, in seconds
    assert found[-1].offset_s == 15.0 and all(r.blocks[0] == 0 for r in found)


def test_the_azure_reader_reads_the_real_conversation_csv() -> None:
    found = traffic.read(AZURE, Trace(path=AZURE.name))
    assert len(found) == 200
    assert (found[0].input_tokens, found[0].output_tokens, found[0].blocks) == (374, 44, ())
    assert found[1].offset_s == pytest.approx(50.9951690 - 46.6805900)
    assert traffic.own_rate(found) == pytest.approx(199 / found[-1].offset_s)  # type: ignore[operator]


def test_a_slice_keeps_its_window_and_count_and_cuts_long_lengths() -> None:
    trace = Trace(path="t", start_s=3, duration_s=6, limit=20, max_input_tokens=8000)
    found = traffic.read(MOONCAKE, trace)
    assert found[0].offset_s == 0.0 and found[0].input_tokens == 8000  # 13544 cut
    assert len(found) == 19 and max(r.offset_s or 0 for r in found) == pytest.approx(2.999)
    assert max(r.input_tokens for r in found) == 8000
    assert len(traffic.read(MOONCAKE, trace.model_copy(update={"limit": 5}))) == 5


def test_a_trace_is_played_faster_or_at_a_rate() -> None:
    found = traffic.read(AZURE, Trace(path="t", limit=50))
    own = traffic.own_rate(found)
    assert own is not None
    at_own = traffic.offsets(found, Trace(path="t"), None)
    assert traffic.offsets(found, Trace(path="t", speedup=4), None) == pytest.approx(
        [t / 4 for t in at_own]
    )
    at_rate = traffic.offsets(found, Trace(path="t"), 2 * own)
    assert 49 / at_rate[-1] == pytest.approx(2 * own)


def test_a_trace_s_repeats_follow_each_other_and_a_resume_starts_at_once() -> None:
    requests = [Request(0.0, 8, 4), Request(1.0, 8, 4), Request(3.0, 8, 4)]
    w = WorkloadSpec(trace=Trace(path="t"), concurrency=4)
    lap = 3.0 * 3 / 2  # the span and one mean gap
    sent = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert traffic.due(w, requests, sent) == [0.0, 1.0, 3.0, lap, lap + 1, lap + 3]
    assert traffic.due(w, requests, [(2, 0), (0, 1)]) == [0.0, lap - 3]  # the rest of a window
    rated = WorkloadSpec(synthetic=_synthetic(), request_rate=4.0, concurrency=4)
    assert len(traffic.due(rated, None, sent, 0, 0) or []) == 6
    assert traffic.due(WorkloadSpec(synthetic=_synthetic()), None, sent) is None


def _line(timestamp: Any = 0, tokens_in: Any = 3, tokens_out: Any = 2, more: str = "") -> str:
    row = {"timestamp": timestamp, "input_length": tokens_in, "output_length": tokens_out}
    return json.dumps(row)[:-1] + more + "}\n"


AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZURE_ROW = "2023-11-16 18:15:46.6,3,1\n"


@pytest.mark.parametrize(
    ("name", "text", "line", "field"),
    [
        ("t.jsonl", _line() + '{"timestamp": 1}\n', 2, "input_length"),
        ("t.jsonl", _line(tokens_in=0), 1, "input_length"),
        ("t.jsonl", _line(timestamp=-1), 1, "timestamp"),
        ("t.jsonl", _line(more=', "hash_ids": "x"'), 1, "hash_ids"),
        ("t.jsonl", _line(tokens_out=True), 1, "output_length"),
        ("t.jsonl", "[1, 2]\n", 1, ""),
        ("t.jsonl", "{not json\n", 1, ""),
        ("t.jsonl", _line() + "\udcff\n", 2, ""),
        ("t.jsonl", _line(timestamp=5) + _line(timestamp=4), 2, "timestamp"),
        ("t.jsonl", _line(timestamp=10**400), 1, "timestamp"),
        ("t.jsonl", _line(tokens_in=10**12), 1, "input_length"),
        ("t.csv", AZURE_HEAD + AZURE_ROW + "x" * 140_000 + ",3,1\n", 3, ""),  # past csv's limit
        ("t.csv", AZURE_HEAD + AZURE_ROW + "2023-11-16 18:15:47+00:00,3,1\n", 3, "TIMESTAMP"),
        ("t.csv", "TIMESTAMP,ContextTokens\n" + AZURE_ROW, 1, "GeneratedTokens"),
        ("t.csv", AZURE_HEAD + AZURE_ROW + "now,3,1\n", 3, "TIMESTAMP"),
        ("t.csv", AZURE_HEAD + "2023-11-16 18:15:46.6,3.5,1\n", 2, "ContextTokens"),
        ("t.csv", AZURE_HEAD + "2023-11-16 18:15:46.6,3,0\n", 2, "GeneratedTokens"),
        ("t.csv", AZURE_HEAD + AZURE_ROW + "\udcff\n", 3, ""),
    ],
)
def test_a_line_that_is_no_request_is_named(
    tmp_path: Path, name: str, text: str, line: int, field: str
) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(InvalidInput) as caught:
        traffic.read(path, Trace(path=name))
    problem = caught.value.problems[0]
    assert (problem.path, problem.line, problem.field) == (path, line, field)


def test_a_missing_trace_or_an_empty_slice_is_said(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such trace file"):
        traffic.read(tmp_path / "gone.jsonl", Trace(path="gone.jsonl"))
    with pytest.raises(InvalidInput, match="no request in the trace's slice"):
        traffic.read(MOONCAKE, Trace(path="t", start_s=60))


def _synthetic(**lengths: Any) -> Synthetic:
    return Synthetic(
        count=20_000,
        input_tokens=Lengths(**(lengths or {"mean": 64})),
        output_tokens=Lengths(mean=8),
    )


@pytest.mark.parametrize(
    "lengths",
    [
        {"distribution": "normal", "mean": 500, "stdev": 50},
        {"distribution": "lognormal", "mean": 500, "stdev": 400},
        {"distribution": "uniform", "mean": 500, "min": 100, "max": 900},
    ],
)
def test_drawn_lengths_have_their_distribution_s_mean_and_spread(lengths: dict[str, Any]) -> None:
    drawn = [r.input_tokens for r in traffic.synthetic(_synthetic(**lengths))]
    assert statistics.fmean(drawn) == pytest.approx(500, rel=0.02)
    spread = lengths.get("stdev", 800 / 12**0.5)  # a uniform's over [100, 900]
    assert statistics.stdev(drawn) == pytest.approx(spread, rel=0.08)
    assert drawn == [r.input_tokens for r in traffic.synthetic(_synthetic(**lengths))]


def test_drawn_lengths_are_clipped_to_their_bounds() -> None:
    lengths = {"distribution": "lognormal", "mean": 200, "stdev": 400, "min": 50, "max": 400}
    drawn = [r.input_tokens for r in traffic.synthetic(_synthetic(**lengths))]
    assert min(drawn) == 50 and max(drawn) == 400
    assert {r.input_tokens for r in traffic.synthetic(_synthetic(mean=7))} == {7}


@pytest.mark.parametrize(
    ("lengths", "field"),
    [
        ({"distribution": "uniform", "mean": 5}, "max"),
        ({"distribution": "normal", "mean": 5}, "stdev"),
        ({"mean": 5, "min": 6, "max": 9}, "mean"),
        ({"mean": 5, "min": 6}, "mean"),
        ({"distribution": "uniform", "mean": 100, "min": 64, "max": 448}, "middle of"),
    ],
)
def test_lengths_that_cannot_be_drawn_are_refused(lengths: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Lengths.model_validate(lengths)


def _tokens(text: str) -> int:
    return sum(COUNTS[f" {w}"] for w in text.split())


@given(
    st.lists(
        st.tuples(st.integers(1, 300), st.lists(st.integers(0, 5), max_size=6)),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 64),
)
def test_a_prompt_has_its_tokens_exactly_and_equal_blocks_read_alike(
    rows: list[tuple[int, list[int]]], block: int
) -> None:
    requests = [Request(None, n, 1, tuple(blocks)) for n, blocks in rows]
    built = traffic.texts(requests, BUILT, block, seed=1)
    assert [_tokens(t) for t in built] == [n for n, _ in rows]
    for r, text in zip(requests, built, strict=True):
        for other, more in zip(requests, built, strict=True):
            shared = prefixes.shared(list(r.blocks), list(other.blocks))
            tokens = shared * block
            if shared and min(r.input_tokens, other.input_tokens) >= tokens:
                assert text.split()[: _words(text, tokens)] == more.split()[: _words(more, tokens)]


def _words(text: str, tokens: int) -> int:
    """How many words of `text` make its first `tokens` tokens."""
    count = 0
    for i, word in enumerate(text.split()):
        if count >= tokens:
            return i
        count += COUNTS[f" {word}"]
    return len(text.split())


def test_a_prompt_leaves_room_for_the_tokens_a_request_adds() -> None:
    requests = [Request(None, 40, 1), Request(None, 1, 1)]
    added = Traffic(word_tokens=COUNTS, added_tokens=3, requests=2)
    assert [_tokens(t) for t in traffic.texts(requests, added, 16, seed=0)] == [37, 1]


def test_texts_are_the_same_for_the_same_seed_and_differ_by_request() -> None:
    requests = [Request(None, 50, 1), Request(None, 50, 1)]
    one, two = traffic.texts(requests, BUILT, 16, seed=0)
    assert one != two and traffic.texts(requests, BUILT, 16, seed=0) == [one, two]
    with pytest.raises(ValueError, match="one token"):
        traffic.texts(requests, Traffic(word_tokens={" question": 2}, requests=2), 16, seed=0)


def test_a_spec_takes_its_requests_from_one_source(tmp_path: Path) -> None:
    trace = {"path": str(MOONCAKE)}
    spec = small_spec(tmp_path, prompts=None, classes=[], trace=trace, concurrency=8)
    assert spec.workload.classes == ["trace"] and spec.open_loop
    assert traffic.suite(spec) == {"trace": [""] * 60}
    with pytest.raises(ValidationError, match="one source"):
        small_spec(tmp_path, trace=trace, concurrency=8)
    with pytest.raises(ValidationError, match="name a prompt suite"):
        small_spec(tmp_path, prompts=None, classes=[])
    with pytest.raises(ValidationError, match="one class, 'trace'"):
        small_spec(tmp_path, prompts=None, trace=trace, concurrency=8)
    with pytest.raises(ValidationError, match="own times"):
        small_spec(
            tmp_path,
            prompts=None,
            classes=[],
            trace=trace,
            concurrency=8,
            arrivals={"process": "poisson"},
        )
    with pytest.raises(ValidationError, match="give one of them"):
        small_spec(
            tmp_path,
            prompts=None,
            classes=[],
            trace={**trace, "speedup": 2},
            concurrency=8,
            request_rate=3.0,
        )


def test_sessions_are_chats_of_prompts_not_of_a_trace(tmp_path: Path) -> None:
    spec = small_spec(tmp_path, api="chat", sessions={"turns": 3})
    assert spec.workload.sessions is not None and spec.workload.sessions.think_s == 0
    with pytest.raises(ValidationError, match="need `api: chat`"):
        small_spec(tmp_path, sessions={"turns": 3})
    with pytest.raises(ValidationError, match="a trace's requests are its own"):
        trace = {"path": str(MOONCAKE)}
        small_spec(tmp_path, prompts=None, classes=[], trace=trace, concurrency=8, api="chat",
                   sessions={"turns": 2})  # fmt: skip
    with pytest.raises(ValidationError, match="greater than or equal to 2"):
        small_spec(tmp_path, api="chat", sessions={"turns": 1})


def test_a_trace_or_a_draw_refuses_what_a_prompt_suite_alone_has(tmp_path: Path) -> None:
    trace = {"path": str(MOONCAKE)}
    base: dict[str, Any] = {"prompts": None, "classes": [], "concurrency": 8}
    extras: list[tuple[dict[str, Any], str]] = [
        ({"trace": trace, "max_tokens": 64}, "each request asks for its own"),
        ({"trace": trace, "per_class": 4}, "a prompt suite's"),
        ({"trace": trace, "prefixes": {"count": 2, "tokens": 8}}, "blocks say which"),
        ({"synthetic": _synthetic().model_dump(), "per_class": 4}, "a prompt suite's"),
    ]
    for extra, match in extras:
        with pytest.raises(ValidationError, match=match):
            small_spec(tmp_path, **base, **extra)
    with pytest.raises(ValidationError, match="their own output length"):
        ExperimentSpec.model_validate(
            {**small_spec(tmp_path, **base, trace=trace).model_dump(exclude_unset=True),
             "sweep": {"workload.max_tokens": [8, 16]}}
        )  # fmt: skip


def test_a_trace_without_gaps_cannot_be_scaled_to_a_rate(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(_line() + _line())  # both at 0 ms
    spec = small_spec(tmp_path, prompts=None, classes=[], concurrency=8,
                      trace={"path": str(one)}, request_rate=2.0)  # fmt: skip
    with pytest.raises(InvalidInput, match="no gaps to scale"):
        traffic.suite(spec)
    played = small_spec(tmp_path, prompts=None, classes=[], concurrency=8, trace={"path": str(one)})
    assert traffic.suite(played) == {"trace": ["", ""]}  # at its own times: both at once
