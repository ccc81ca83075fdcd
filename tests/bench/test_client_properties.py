"""Property: whatever a server answers, kbgen takes it, or fails the request with its reason, or
raises its own error — never a traceback, never a bad sample counted as good.

Answers are mutated from real vLLM captures (tests/fixtures/vllm): `/v1/models` and `/version`
bodies (JSON trees, or any text), `/metrics` expositions (values replaced by NaN, negative,
huge or non-numbers; lines dropped, doubled or garbled), and SSE streams (events' JSON mutated,
events cut, garbage between them). All through the ReplayTransport, each example under a
deadline.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from kbgen.bench import metrics
from kbgen.bench.client import Api, Client, ReplayTransport
from kbgen.errors import MetricsError, ServerError
from kbgen.run.counters import Counters
from kbgen.run.models import VariantRun
from kbgen.run.samples import Sample
from tests.support.properties import (
    SETTINGS,
    VALUES,
    Mutated,
    deadline,
    mutated,
    paths_of,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm"
MODELS = json.loads((FIXTURES / "ngram-models.json").read_text())
VERSION = {"version": "0.32.0"}


def _answers(tree: Any) -> st.SearchStrategy[str]:
    """A body: the real one mutated, any JSON value, or any text at all."""
    return st.one_of(
        mutated(tree, paths_of(tree)).map(lambda m: json.dumps(m.tree)),
        VALUES.map(json.dumps),
        st.text(max_size=40),
    )


@SETTINGS
@given(
    models=_answers(MODELS),
    version=_answers(VERSION),
    status=st.sampled_from([200, 200, 200, 404, 500]),
)
def test_served_model_and_version_are_usable_or_a_server_error(
    models: str, version: str, status: int
) -> None:
    pages = {"/v1/models": (status, models), "/version": (200, version)}

    async def ask() -> VariantRun:
        async with Client("http://vllm", transport=ReplayTransport(pages=pages)) as client:
            served = await client.served_model()
            return VariantRun(  # what the driver records of them must validate
                url="http://vllm",
                command=[],
                env={},
                reused_server=False,
                engine_version=await client.engine_version(),
                model=served.id,
                max_model_len=served.max_model_len,
                windows=[],
            )

    with deadline(10):
        try:
            run = asyncio.run(ask())
        except ServerError as exc:
            assert str(exc).startswith("http://vllm/") and "\n" not in str(exc)
            event("server error")
            return
    event("usable")
    assert run.model and (run.max_model_len is None or run.max_model_len >= 1)


# --- /metrics ------------------------------------------------------------------------------

BEFORE = (FIXTURES / "ngram-metrics-before.txt").read_text().splitlines()
AFTER = (FIXTURES / "ngram-metrics-after.txt").read_text().splitlines()
READ = (metrics.GENERATION, metrics.PROMPT, metrics.SUCCESS, metrics.PREEMPTIONS, "spec_decode")
COUNTER_LINES = [i for i, line in enumerate(AFTER) if any(name in line for name in READ)]
TOKENS = st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "-0.0", "1e400", "abc", "", "1e308", "0x1"])


@st.composite
def exposition(draw: st.DrawFn, lines: list[str]) -> str:
    out = list(lines)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.sampled_from(COUNTER_LINES) | st.integers(0, len(out) - 1))
        if i >= len(out):
            continue
        change = draw(st.sampled_from(["value", "value", "drop", "double", "garble"]))
        name, _, _ = out[i].rpartition(" ")
        if change == "value" and name:
            out[i] = f"{name} {draw(TOKENS | st.floats().map(repr))}"
        elif change == "drop":
            del out[i]
        elif change == "double":
            out.insert(i, out[i])
        else:
            out[i] = draw(st.text(max_size=30))
    return "\n".join(out) + "\n"


@SETTINGS
@given(before=exposition(BEFORE), after=exposition(AFTER))
def test_metrics_give_finite_counters_or_a_metrics_error(before: str, after: str) -> None:
    with deadline(10):
        try:
            counted = metrics.window(metrics.parse(before), metrics.parse(after))
        except MetricsError as exc:
            assert "\n" not in str(exc)
            event("metrics error")
            return
    event("counted")
    dumped = counted.model_dump_json()  # JSON without NaN: summary.json can hold it
    again = Counters.model_validate_json(dumped)
    assert again == counted
    numbers = [v for v in json.loads(dumped).values() if isinstance(v, int | float)]
    assert all(math.isfinite(v) and v >= 0 for v in numbers if not isinstance(v, bool))


# --- SSE streams ---------------------------------------------------------------------------


def _events(name: str) -> list[Any]:
    body = (FIXTURES / name).read_text()
    return [json.loads(e[6:]) for e in body.split("\n\n") if e.startswith("data: {")]


CAPTURES = {name: _events(name) for name in ("ngram-completion.sse", "ngram-chat.sse")}


@st.composite
def stream(draw: st.DrawFn) -> tuple[str, Mutated, list[bytes]]:
    name = draw(st.sampled_from(sorted(CAPTURES)))
    events = CAPTURES[name]
    mutation = draw(mutated(events, paths_of(events), most=4))
    body = b"".join(
        b"data: " + json.dumps(event).encode() + b"\n\n" for event in mutation.tree
    ) + draw(st.sampled_from([b"data: [DONE]\n\n", b"", b"data: [DONE]"]))
    if draw(st.booleans()):  # garbage somewhere
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.binary(max_size=20)) + body[at:]
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    return name, mutation, [p for p in pieces if p]


@SETTINGS
@given(replay=stream())
def test_a_stream_gives_a_sound_sample_or_a_failed_one(
    replay: tuple[str, Mutated, list[bytes]],
) -> None:
    name, _, pieces = replay
    api: Api = "chat" if "chat" in name else "completions"

    async def send() -> Sample:
        blank = Sample(
            variant="v", prompt_class="c", prompt_index=0, repeat=0, scheduled_ns=0, sent_ns=0
        )
        async with Client("http://vllm", transport=ReplayTransport(pieces)) as client:
            return await client.stream(api, {"prompt": "x"}, blank, 0)

    with deadline(10):
        sample = asyncio.run(send())
    again = Sample.model_validate_json(sample.model_dump_json())  # a samples.jsonl line
    assert again == sample
    event("ok" if sample.ok else "failed")
    if not sample.ok:
        assert sample.error and sample.output_hash is None
        return
    assert sample.chunk_ns == sorted(sample.chunk_ns) and sample.chunk_ns
    assert all(type(t) is int and t > 0 for t in sample.chunk_tokens)
    assert sample.output_tokens is None or (
        type(sample.output_tokens) is int and sample.output_tokens >= 0
    )
    assert sample.prompt_tokens is None or sample.prompt_tokens >= 0
    figures = sample.metrics()
    assert all(
        math.isfinite(v) and v >= 0
        for v in figures.values()
        if isinstance(v, float)  # latencies and rates
    )
