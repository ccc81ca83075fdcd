"""Property: a valid record with numbers anywhere in their types' ranges renders, charts and all.

Each numeric field of the fixture record gets a finite float or a 64-bit integer as its type
says (1.8e308, 5e-324, -0.0, 2**63 - 1 …); the record either is invalid with located lines (a
bound of the schema) or `kbgen render` writes its page. Each example runs under a deadline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgen.cli import cli
from tests.conftest import PLAN, RECORD
from tests.support.properties import SETTINGS, assert_cli_outcome, deadline, examples, paths_of

TREE = yaml.safe_load(RECORD)


def _at(tree: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        tree = tree[part]
    return tree


NUMERIC = [p for p in paths_of(TREE) if type(_at(TREE, p)) in (int, float)]
FINITE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 0.0, -0.0]),
)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kb")
    (root / "records" / "plans").mkdir(parents=True)
    (root / "records" / "plans" / "next-steps.yaml").write_text(PLAN)
    return root


@settings(SETTINGS, max_examples=examples(200))
@given(st.data())
def test_a_record_with_extreme_numbers_renders_or_is_located(kb: Path, data: st.DataObject) -> None:
    tree = yaml.safe_load(RECORD)
    for at in data.draw(st.lists(st.sampled_from(NUMERIC), min_size=1, max_size=4)):
        parent = _at(tree, at[:-1])
        parent[at[-1]] = data.draw(INT64 if type(parent[at[-1]]) is int else FINITE)
    path = kb / "records" / "ngram-test.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    with deadline(30):
        result = CliRunner().invoke(
            cli, ["render", "--records", str(kb / "records"), "--docs", str(kb / "docs")]
        )
    assert_cli_outcome(result, path)
    if result.exit_code == 0:
        assert "<svg" in (kb / "docs" / "records" / "ngram-test.md").read_text()
