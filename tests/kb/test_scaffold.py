"""`kbgen new`: slugs and collision-free ids."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from kbgen.errors import UsageError
from kbgen.kb import loading as kb
from kbgen.kb import scaffold


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("n-gram vs baseline", "n-gram-vs-baseline"),
        ("  EAGLE-3 on Kimi-K2.5!  ", "eagle-3-on-kimi-k2-5"),
        ("Café über naïve", "cafe-uber-naive"),
        ("../../etc/passwd", "etc-passwd"),
        ("日本語", "record"),
        ("x" * 100, "x" * 60),
    ],
)
def test_slugify(title: str, slug: str) -> None:
    assert scaffold.slugify(title) == slug


def test_new_record_id_is_dated_and_unique(tmp_path: Path) -> None:
    day = dt.date(2026, 11, 29)
    first = scaffold.new_record('Title with "quotes": and colons', tmp_path, today=day)
    second = scaffold.new_record('Title with "quotes": and colons', tmp_path, today=day)
    assert first.name == "2026-11-29-title-with-quotes-and-colons.yaml"
    assert second != first and second.name.startswith(first.stem + "-")
    base = kb.load([tmp_path])
    assert base.problems == []
    assert base.records[first.stem].title == 'Title with "quotes": and colons'
    assert base.records[first.stem].status == "planned"


def test_a_title_that_makes_no_record_is_refused_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"-record\.yaml:5: title: String should have at least"):
        scaffold.new_record("", tmp_path, today=dt.date(2026, 11, 29))
