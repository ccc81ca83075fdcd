"""A sweep's steps as load levels: what varies is the load, a step whose arms differ its step."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput
from kbgen.kb.models import Load
from kbgen.record.importers import levels
from kbgen.record.importers.imported import Imported, sample


def _part(variant: str, step: int | None, said: dict[str, Any], **more: Any) -> Imported:
    """One variant's results at one step of a sweep: two requests."""
    out = Imported(variant, "tool", "m", source=Path(f"{variant}.json"), said=dict(said), **more)
    out.step = step
    out.samples = [sample(variant, i, 0.01, [0.01], 2, None) for i in range(2)]
    return out


SYNC = {"concurrency": 1, "request_rate": "inf", "api": "chat"}
BUSY = {"concurrency": 4, "request_rate": "inf", "api": "chat"}


@pytest.mark.parametrize(
    ("said", "loads", "notes"),
    [
        ({"baseline": [SYNC], "ngram": [SYNC]}, [{}], []),
        (
            {"baseline": [SYNC, BUSY], "ngram": [SYNC, BUSY]},
            [{"concurrency": 1}, {"concurrency": 4}],
            [],
        ),
        (
            {
                "baseline": [SYNC, {"request_rate": 14.29}],
                "ngram": [SYNC, {"request_rate": 9.8}],
            },
            [{"concurrency": 1, "request_rate": "inf"}, {"sweep_step": 1}],
            [
                "sweep step 1: the arms were sent different loads (baseline request rate 14.29; "
                "ngram request rate 9.8): its cells compare no arms"
            ],
        ),
        (
            {"baseline": [SYNC, {"request_rate": 2.0}], "ngram": [SYNC, {"request_rate": 2.0}]},
            [{"concurrency": 1, "request_rate": "inf"}, {"request_rate": 2.0}],
            [],
        ),
    ],
    ids=["one-step", "concurrency", "rates-differ", "rates-agree"],
)
def test_the_steps_become_load_levels(
    said: dict[str, list[dict[str, Any]]], loads: list[Load], notes: list[str]
) -> None:
    found = [
        _part(variant, step if len(steps) > 1 else None, s)
        for variant, steps in said.items()
        for step, s in enumerate(steps)
    ]
    made, told = levels.load_levels(found)
    assert made == loads and told == notes
    several = len(loads) > 1
    assert [s.level for i in found for s in i.samples] == [
        i.step if several else None for i in found for _ in i.samples
    ]
    # what varies by level is stated as the first level's; what does not stays as it was
    assert all(i.said["api"] == "chat" for i in found if "api" in i.said)
    assert all(i.said["concurrency"] == 1 for i in found)


def test_one_run_is_no_round_and_several_are() -> None:
    one = [_part("baseline", None, SYNC, round=0), _part("ngram", None, SYNC, round=0)]
    levels.load_levels(one)
    assert {s.round for i in one for s in i.samples} == {None}
    two = [_part(v, None, SYNC, round=r) for v in ("baseline", "ngram") for r in (0, 1)]
    levels.load_levels(two)
    assert [s.round for i in two for s in i.samples] == [0, 0, 1, 1, 0, 0, 1, 1]


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        (
            [
                ("baseline", 0, SYNC, "synchronous"),
                ("baseline", 1, BUSY, "throughput"),
                ("ngram", 0, SYNC, "synchronous"),
            ],
            "ngram.json: ngram: no results at sweep step 1, where another arm has some",
        ),
        (
            [
                ("baseline", 0, SYNC, "synchronous"),
                ("baseline", 1, BUSY, "throughput"),
                ("ngram", None, SYNC, "synchronous"),
            ],
            "ngram: results of one load, where the other arms ran a sweep of 2 steps",
        ),
        (
            [
                ("baseline", 0, SYNC, "synchronous"),
                ("baseline", 1, BUSY, "throughput"),
                ("ngram", 0, SYNC, "synchronous"),
                ("ngram", 1, BUSY, "constant"),
            ],
            "ngram: sweep step 1 is constant, but baseline's is throughput",
        ),
        (
            [
                ("baseline", 0, SYNC, None),
                ("baseline", 1, SYNC, None),
                ("baseline", 2, BUSY, None),
                ("ngram", 0, SYNC, None),
                ("ngram", 1, SYNC, None),
                ("ngram", 2, BUSY, None),
            ],
            "sweep step 0: the same load as another step (concurrency 1)",
        ),
    ],
    ids=["a-step-missing", "one-load-and-a-sweep", "kinds-differ", "two-steps-one-load"],
)
def test_arms_that_ran_different_sweeps_are_refused(
    parts: list[tuple[str, int | None, dict[str, Any], str | None]], message: str
) -> None:
    found = [_part(v, step, said, step_kind=kind) for v, step, said, kind in parts]
    with pytest.raises(InvalidInput, match=re.escape(message)):
        levels.load_levels(found)
