"""Which records tick a plan's task, and which stand beside the one that does
(`kb.cards.task_states`)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kbgen.kb.cards import MAX_LISTED, Card, task_states
from kbgen.kb.models import Plan, Record
from tests.conftest import PLAN, RECORD

TASK = "next-steps#test-ngram"


def card(rid: str, created: str, **fields: Any) -> Card:
    data = yaml.safe_load(RECORD) | {"id": rid, "created": created, "concluded": created}
    return Card.of(Record.model_validate(data | fields))


def states(*cards: Card) -> dict[str, tuple[str | None, list[str], str | None]]:
    """Each task's (record, others, superseded_by) ids."""
    found = task_states(cards, Plan.model_validate(yaml.safe_load(PLAN)))
    return {
        task: (
            s.record.id if s.record else None,
            [c.id for c in s.others],
            s.superseded_by.id if s.superseded_by else None,
        )
        for task, s in found.items()
    }


@pytest.mark.parametrize(
    ("cards", "expected"),
    [
        ([], (None, [], None)),
        ([card("a", "2026-12-01")], ("a", [], None)),
        # the newest ticks it, the rest newest first, whatever order they come in
        (
            [card("b", "2026-12-02"), card("c", "2026-12-03"), card("a", "2026-12-01")],
            ("c", ["b", "a"], None),
        ),
        # one day: by id
        ([card("y", "2026-12-02"), card("x", "2026-12-02")], ("y", ["x"], None)),
        # a superseded one is no evidence beside the newest
        (
            [card("a", "2026-12-01"), card("b", "2026-12-02", supersedes=["a"])],
            ("b", [], None),
        ),
        (
            [card("a", "2026-12-01"), card("b", "2026-12-02", status="superseded")],
            ("a", [], None),
        ),
        # a record not concluded yet resolves nothing
        ([card("a", "2026-12-01"), card("p", "2026-12-05", status="planned")], ("a", [], None)),
        # its only record superseded: not done, and nothing beside it
        (
            [card("a", "2026-12-01"), card("z", "2026-12-02", supersedes=["a"], resolves=[])],
            ("a", [], "z"),
        ),
        # a task named twice by one record: that record once
        ([card("a", "2026-12-01", resolves=[TASK, TASK])], ("a", [], None)),
    ],
)
def test_the_newest_concluded_record_ticks_a_task_and_the_others_stand_beside_it(
    cards: list[Card], expected: tuple[str | None, list[str], str | None]
) -> None:
    got = states(*cards)
    assert got["test-ngram"] == expected
    assert got["train-draft"] == (None, [], None)  # no record resolves it


def test_the_records_beside_it_are_listed_as_a_record_s_replications_are_at_most() -> None:
    # one concluded record per day: the newest ticks it, the next MAX_LISTED are listed, the
    # rest counted (kb_scale's knowledge bases copy each record thousands of times)
    cards = [card(f"r{day:02}", f"2026-11-{day:02}") for day in range(1, MAX_LISTED + 4)]
    found = task_states(cards, Plan.model_validate(yaml.safe_load(PLAN)))["test-ngram"]
    newest_first = [c.id for c in reversed(cards)]
    assert found.record is not None and found.record.id == newest_first[0]
    assert [c.id for c in found.others] == newest_first[1 : MAX_LISTED + 1]
    assert found.more == 2
