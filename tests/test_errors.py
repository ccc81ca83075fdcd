"""The error tree's problems: one line each, whatever the file they come from holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgen.errors import InvalidInput, Problem


@pytest.mark.parametrize(
    "text", ["a\nb", "a\rb", "a\x1eb", "a\x85b", "a\u2028b", "a\x0bb", "a\x00b", "a\x1b[31mb"]
)
def test_a_problem_is_one_line_whatever_its_field_and_message_hold(text: str) -> None:
    problem = Problem(Path("records/x.yaml"), 3, f"config.{text}", f"unknown {text}")
    shown = str(problem)
    assert shown.splitlines() == [shown] and shown.isprintable()
    assert shown.startswith("records/x.yaml:3: config.a")
    assert str(InvalidInput([problem, problem])).splitlines() == [shown, shown]
