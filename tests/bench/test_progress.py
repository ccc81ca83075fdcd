"""The terminal view of `kbgen bench`: the rich event sink and the totals table, as text."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from kbgen.bench import progress
from kbgen.bench.launch import Launched
from kbgen.bench.progress import RichEvents, totals_table
from kbgen.run.models import RunTotals
from kbgen.run.samples import Sample


def console() -> Console:
    return Console(file=io.StringIO(), width=120, color_system=None, record=True)


def text_of(renderable: Any) -> str:
    out = console()
    out.print(renderable)
    return out.export_text()


def printed(events: RichEvents) -> str:
    file = events.console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


class Clock:
    """Stands in for the `time` module in bench.progress: the seconds the test sets."""

    now = 100.0

    @classmethod
    def monotonic(cls) -> float:
        return cls.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> type[Clock]:
    Clock.now = 100.0
    monkeypatch.setattr(progress, "time", Clock)
    return Clock


def sample(tokens: int | None = 10, error: str | None = None, variant: str = "ngram") -> Sample:
    return Sample(
        variant=variant,
        prompt_class="coding",
        prompt_index=0,
        repeat=0,
        scheduled_ns=0,
        sent_ns=0,
        output_tokens=tokens,
        error=error,
    )


def test_the_wait_for_a_server_shows_the_variant_and_the_seconds() -> None:
    with RichEvents(console()) as events:
        events.waiting("ngram", 3.4)
        events.waiting("ngram", 61.0)
        live = text_of(events.progress.get_renderable())
    assert "starting server for ngram" in live
    assert "waiting for /health (61 s)" in live
    assert live.count("starting server") == 1  # one row, updated


@pytest.mark.parametrize(("reused", "how"), [(False, "ready"), (True, "reused")])
def test_a_started_variant_replaces_the_wait_with_its_bar(reused: bool, how: str) -> None:
    with RichEvents(console()) as events:
        events.waiting("ngram", 1.0)
        events.variant_started("ngram", 4, Launched(url="http://127.0.0.1:8000", reused=reused))
        live = text_of(events.progress.get_renderable())
    assert f"server for ngram {how} at http://127.0.0.1:8000" in printed(events)
    assert "starting server" not in live
    assert "0/4" in live


def test_finished_samples_advance_the_bar_with_the_rate_and_the_failures(
    clock: type[Clock],
) -> None:
    with RichEvents(console()) as events:
        events.variant_started("ngram", 4, Launched(url="http://x"))
        clock.now += 2.0
        events.sample_done(sample(tokens=10))
        events.sample_done(sample(tokens=30))
        ok_only = text_of(events.progress.get_renderable())
        events.sample_done(sample(tokens=None, error="stalled"))
        live = text_of(events.progress.get_renderable())
    assert "2/4" in ok_only and "20.0 tok/s" in ok_only and "failed" not in ok_only
    assert "3/4" in live and "20.0 tok/s  1 failed" in live  # a failure adds no tokens
    assert "3/4" in printed(events)  # the last state stays on the terminal


def test_each_variant_has_its_own_bar_and_rate(clock: type[Clock]) -> None:
    with RichEvents(console()) as events:
        events.variant_started("baseline", 2, Launched(url="http://x"))
        clock.now += 1.0
        events.sample_done(sample(tokens=8, variant="baseline"))
        events.variant_started("ngram", 3, Launched(url="http://x", reused=True))
        clock.now += 4.0
        events.sample_done(sample(tokens=8, variant="ngram"))
        live = text_of(events.progress.get_renderable()).splitlines()
    [baseline] = [line for line in live if line.startswith("baseline")]
    [ngram] = [line for line in live if line.startswith("ngram")]
    assert "1/2" in baseline and "8.0 tok/s" in baseline
    assert "1/3" in ngram and "2.0 tok/s" in ngram


def totals(**variants: dict[str, Any]) -> RunTotals:
    """A run's totals as bench.totals.totals makes them."""
    return RunTotals.model_validate({"spec_id": "ngram-vs-baseline", "variants": variants})


def variant(
    ok: int = 12,
    failed: int = 0,
    tok_s: float | None = 41.25,
    match: bool | None = True,
    spec_decode: dict[str, Any] | None = None,
) -> dict[str, Any]:
    window: dict[str, Any] = {"generation_tokens": 576, "client_output_tokens": 576}
    if spec_decode is not None:
        window["spec_decode"] = {
            "drafts": 120.0,
            "draft_tokens": 600.0,
            "accepted_tokens": 274.0,
            "accepted_per_position": [100.0, 80.0, 50.0, 30.0, 14.0],
            **spec_decode,
        }
    return {
        "engine_version": "0.32.0",
        "model": "m",
        "requests_ok": ok,
        "requests_failed": failed,
        "output_tokens": 576,
        "window_s": 576 / tok_s if tok_s else 0.0,
        "output_tok_s": tok_s,
        "tokens_match": match,
        "windows": [window],
    }


def rows(table_text: str) -> dict[str, list[str]]:
    """The table's body rows by their first cell, split into cells."""
    out = {}
    for line in table_text.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if len(cells) == 7 and cells[0] not in ("", "variant"):
            out[cells[0]] = cells[1:]
    return out


def test_the_totals_table_has_a_row_per_variant() -> None:
    spec = {"acceptance_rate": 0.4567, "mean_acceptance_length": 2.8333}
    text = text_of(
        totals_table(totals(baseline=variant(), ngram=variant(ok=11, failed=1, spec_decode=spec)))
    )
    assert "run summary: ngram-vs-baseline" in text
    assert rows(text) == {
        "baseline": ["12", "0", "41.2", "yes", "-", "-"],
        "ngram": ["11", "1", "41.2", "yes", "0.46", "2.83"],
    }


@pytest.mark.parametrize(
    ("row", "cells"),
    [
        (variant(match=False), ["12", "0", "41.2", "NO", "-", "-"]),
        (variant(ok=0, failed=12, tok_s=None, match=None), ["0", "12", "-", "-", "-", "-"]),
        (
            variant(spec_decode={"acceptance_rate": None, "mean_acceptance_length": None}),
            ["12", "0", "41.2", "yes", "-", "-"],
        ),
    ],
    ids=["tokens-differ", "nothing-measured", "no-drafts"],
)
def test_the_totals_table_marks_what_is_missing_or_wrong(
    row: dict[str, Any], cells: list[str]
) -> None:
    assert rows(text_of(totals_table(totals(v=row)))) == {"v": cells}


def test_show_prints_the_table_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    progress.show(totals_table(totals(baseline=variant())))
    captured = capsys.readouterr()
    assert captured.out == "" and "run summary: ngram-vs-baseline" in captured.err


def test_an_interleaved_run_shows_the_round_of_each_bar(clock: type[Clock]) -> None:
    with RichEvents(console()) as events:
        events.variant_started("baseline", 2, Launched(url="http://x"))  # before any round
        events.round_started(1, 4)
        events.variant_started("ngram", 2, Launched(url="http://x"))
        events.round_started(2, 4)
        events.variant_started("ngram", 2, Launched(url="http://x", reused=True))
        live = text_of(events.progress.get_renderable()).splitlines()
    assert [line.split("  ")[0] for line in live] == [
        "baseline",
        "round 2/4 · ngram",
        "round 3/4 · ngram",
    ]
