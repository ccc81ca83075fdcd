"""The error tree's problems: one line each, whatever the file they come from holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgen.errors import Conflict, InvalidInput, KbgenError, Problem, UsageError


@pytest.mark.parametrize(
    "text", ["a\nb", "a\rb", "a\x1eb", "a\x85b", "a\u2028b", "a\x0bb", "a\x00b", "a\x1b[31mb"]
)
def test_a_problem_is_one_line_whatever_its_field_and_message_hold(text: str) -> None:
    problem = Problem(Path("records/x.yaml"), 3, f"config.{text}", f"unknown {text}")
    shown = str(problem)
    assert shown.splitlines() == [shown] and shown.isprintable()
    assert shown.startswith("records/x.yaml:3: config.a")
    assert str(InvalidInput([problem, problem])).splitlines() == [shown, shown]


def _shout(text: str) -> str:
    return text.upper()


@pytest.mark.parametrize(
    ("error", "lines"),
    [
        (KbgenError("records: no such folder"), ["error: records: no such folder"]),
        (UsageError("one\ntwo"), ["error: one", "error: two"]),
        (Conflict(""), ["error: Conflict"]),
        (
            InvalidInput(
                [Problem(Path("b.yaml"), 2, "id", "bad"), Problem(Path("a.yaml"), None, "", "x")]
            ),
            ["a.yaml: x", "b.yaml:2: id: bad", "2 problems in 2 file(s)"],
        ),
        (
            InvalidInput([Problem(Path("a.yaml"), 1, "", "x")]),
            ["a.yaml:1: x", "1 problem in 1 file(s)"],
        ),
    ],
    ids=["error", "two-lines", "no-message", "problems", "a-problem"],
)
def test_each_kind_of_error_is_shown_in_its_one_format(error: KbgenError, lines: list[str]) -> None:
    assert error.lines() == lines


def test_a_problem_s_parts_are_masked_each_alone() -> None:
    """The mask sees the file, the field and the message apart: the line number stays."""
    problem = Problem(Path("plans/auth.yaml"), 7, "auth", "token x")
    assert InvalidInput([problem]).lines(_shout)[0] == "PLANS/AUTH.YAML:7: AUTH: TOKEN X"
    assert KbgenError("token x").lines(_shout) == ["error: TOKEN X"]
