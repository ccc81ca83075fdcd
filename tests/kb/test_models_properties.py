"""Property: a record mutated at random either validates and renders, or is located lines, exit 1.

The mutations start from the valid record of the test fixtures: values replaced by hostile ones
(NaN, ±inf, booleans, huge or 64-bit-edge integers, strings, deep lists), keys removed or added,
lists grown; and, in the YAML text itself, number literals rewritten (`.nan`, `1e400`, `0x…`).
`kbgen validate` and `kbgen render` run in-process, each example under a deadline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgen.cli import cli
from tests.conftest import PLAN, RECORD
from tests.support.properties import (
    SETTINGS,
    Mutated,
    assert_cli_outcome,
    deadline,
    deep_text,
    examples,
    mutated,
    paths_of,
)

TREE = yaml.safe_load(RECORD)
PATHS = paths_of(TREE)
# a number after `key: ` or in a flow list: where a hand edit puts a hostile literal
NUMBERS = [m.span() for m in re.finditer(r"(?<=[:\[,] )-?\d+(?:\.\d+)?(?=[,\]}\n])", RECORD)]
LITERALS = [
    ".nan",
    ".inf",
    "-.inf",
    "+.inf",
    "NaN",
    "1e400",
    "-1e400",
    "9" * 30,
    "0x7fffffffffffffffff",
    "0o17",
    "1_000",
    "true",
    "no",
    "'5'",
    "~",
    "[1, 2]",
    "{a: 1}",
    "2026-11-01",
    "9" * 5000,
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kb")
    (root / "records" / "plans").mkdir(parents=True)
    (root / "records" / "plans" / "next-steps.yaml").write_text(PLAN)
    return root


def _validate_and_render(kb: Path, text: str) -> None:
    path = kb / "records" / "ngram-test.yaml"
    path.write_text(text)
    runner = CliRunner()
    with deadline(30):
        validated = runner.invoke(cli, ["validate", str(kb / "records")])
        assert_cli_outcome(validated, path)
        if validated.exit_code:  # render reports the same problems: validate's are checked
            return
        rendered = runner.invoke(
            cli, ["render", "--records", str(kb / "records"), "--docs", str(kb / "docs")]
        )
    assert rendered.exit_code == 0, rendered.output


def test_the_unmutated_record_validates_and_renders(kb: Path) -> None:
    _validate_and_render(kb, RECORD)
    assert (kb / "docs" / "records" / "ngram-test.md").is_file()
    broken = RECORD.replace("mean: 62.6", "mean: .nan")
    _validate_and_render(kb, broken)  # an invalid one passes the check with its located line
    result = CliRunner().invoke(cli, ["render", "--records", str(kb / "records"), "--docs", "d"])
    assert_cli_outcome(result, kb / "records" / "ngram-test.yaml")
    assert result.exit_code == 1 and "mean: Input should be a finite number" in result.stderr


@settings(SETTINGS, max_examples=examples(200))
@given(record=mutated(TREE, PATHS))
def test_a_mutated_record_is_valid_or_located(kb: Path, record: Mutated) -> None:
    _validate_and_render(
        kb, deep_text(yaml.safe_dump(record.tree, allow_unicode=True, sort_keys=False))
    )


@settings(SETTINGS, max_examples=examples(150))
@given(
    spans=st.lists(st.sampled_from(NUMBERS), min_size=1, max_size=3, unique=True),
    literals=st.lists(st.sampled_from(LITERALS), min_size=3, max_size=3),
)
def test_a_record_with_hostile_number_literals_is_valid_or_located(
    kb: Path, spans: list[tuple[int, int]], literals: list[str]
) -> None:
    text = RECORD
    for (start, end), literal in sorted(zip(spans, literals, strict=False), reverse=True):
        text = text[:start] + literal + text[end:]
    _validate_and_render(kb, text)
