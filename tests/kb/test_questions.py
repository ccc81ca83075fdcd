"""The question rule as data: its parts name real fields, and its key is stable."""

from __future__ import annotations

import pytest

from kbgen.kb import questions
from kbgen.kb.documents import load_model
from kbgen.kb.models import Record
from tests.conftest import REPO


@pytest.mark.parametrize("part", questions.ASKED, ids=lambda part: part.key)
def test_every_field_a_part_names_is_a_field_of_its_model(part: questions.Part) -> None:
    """`model_dump(include=...)` ignores a name that is no field: the rule would state it."""
    assert set(part.fields) <= set(part.of.model_fields)


def test_what_is_not_asked_is_the_rest_of_the_workload() -> None:
    [workload] = [part for part in questions.ASKED if part.key == "workload"]
    assert {*workload.fields, *questions.NOT_ASKED} == set(workload.of.model_fields)
    assert not set(workload.fields) & set(questions.NOT_ASKED)


@pytest.mark.parametrize(
    ("record", "key"),
    [
        ("2026-11-29-ngram-spec-decode-kimi-k2-5", "dbfb6e793ac1b177"),
        ("2026-11-29-ngram-vs-baseline", "7b43dce291c80bc5"),
        ("2026-12-01-ngram-vs-baseline-h200-c1-pinned", "1c809dc25c163a0e"),
    ],
)
def test_the_key_changes_only_with_the_rule_s_number(record: str, key: str) -> None:
    """Cached cards are keyed by `RULE`: a change to what is hashed must bump it (and these)."""
    found = questions.question_of(load_model(REPO / "records" / f"{record}.yaml", Record))
    assert found is not None and (questions.RULE, found[0]) == (3, key)
