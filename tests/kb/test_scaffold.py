"""`kbgen new`: slugs and collision-free ids."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from kbgen.errors import Conflict, UsageError
from kbgen.kb import files, scaffold
from kbgen.kb import loading as kb
from kbgen.kb.models import Plan


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


def test_new_record_id_is_dated_and_a_taken_one_refused(tmp_path: Path) -> None:
    day = dt.date(2026, 11, 29)
    first = scaffold.new_record('Title with "quotes": and colons', tmp_path, today=day)
    assert first.name == "2026-11-29-title-with-quotes-and-colons.yaml"
    text = first.read_text()
    with pytest.raises(UsageError, match="already exists; not overwritten"):
        scaffold.new_record('Title with "quotes": and colons', tmp_path, today=day)
    assert list(tmp_path.iterdir()) == [first] and first.read_text() == text
    base = kb.load([tmp_path])
    assert base.problems == []
    assert base.records[first.stem].title == 'Title with "quotes": and colons'
    assert base.records[first.stem].status == "planned"


def test_a_title_that_makes_no_record_is_refused_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"-record\.yaml:6: title: String should have at least"):
        scaffold.new_record("", tmp_path, today=dt.date(2026, 11, 29))


def test_a_record_takes_the_id_given_whatever_its_title(tmp_path: Path) -> None:
    path = scaffold.new_record("Any title", tmp_path, dt.date(2026, 11, 29), "my-id")
    assert path == tmp_path / "my-id.yaml"
    assert kb.load([tmp_path]).records["my-id"].title == "Any title"


def test_a_plan_is_named_by_its_title_or_its_id_and_is_valid(tmp_path: Path) -> None:
    named = scaffold.new_plan("Next steps: EAGLE-3!", tmp_path)
    chosen = scaffold.new_plan("Next steps", tmp_path, "eagle")
    assert [named, chosen] == [
        tmp_path / "plans" / f"{n}.yaml" for n in ("next-steps-eagle-3", "eagle")
    ]
    base = kb.load([tmp_path])
    assert base.problems == []
    assert isinstance(base.plans["eagle"], Plan) and base.plans["eagle"].title == "Next steps"
    assert [t.id for t in base.plans["eagle"].tasks] == ["first-step"]


@pytest.mark.parametrize("doc_id", ["Upper", "a_b", "-a", "a.yaml", "../a", "x" * 81, ""])
def test_an_id_that_is_none_is_refused_before_anything_is_written(
    tmp_path: Path, doc_id: str
) -> None:
    with pytest.raises(UsageError, match=r"is no id: lower-case letters, digits and inner"):
        scaffold.new_record("t", tmp_path, record_id=doc_id)
    with pytest.raises(UsageError, match=r"is no id"):
        scaffold.new_plan("t", tmp_path, doc_id)
    assert list(tmp_path.iterdir()) == []


def test_a_plan_title_that_makes_no_plan_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot make a plan of that title: .*title: String"):
        scaffold.new_plan("x" * 300, tmp_path, "p")
    assert not (tmp_path / "plans" / "p.yaml").exists()


@pytest.mark.parametrize("make", ["record", "plan"])
def test_a_file_made_meanwhile_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: str
) -> None:
    """Free when looked at, taken when written: the write is exclusive, and loses (Conflict)."""
    path = tmp_path / ("taken.yaml" if make == "record" else "plans/taken.yaml")
    path.parent.mkdir(exist_ok=True)
    path.write_text("someone else's\n")
    monkeypatch.setattr(os.path, "lexists", lambda _: False)  # not there when looked for
    monkeypatch.setattr(files, "iter_yaml_files", lambda _: [])
    with pytest.raises(Conflict, match="already exists; not overwriting"):
        if make == "record":
            scaffold.new_record("t", tmp_path, record_id="taken")
        else:
            scaffold.new_plan("t", tmp_path, "taken")
    assert path.read_text() == "someone else's\n"
    assert sorted(p.name for p in path.parent.iterdir() if p.is_file()) == ["taken.yaml"]


def test_an_id_another_file_of_the_knowledge_base_has_is_refused(tmp_path: Path) -> None:
    """Records may sit in subfolders: a record of that id anywhere is a collision."""
    day = dt.date(2026, 12, 2)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "2026-12-02-foo-bar.yaml").write_text("kept\n")
    with pytest.raises(UsageError, match=r"old/2026-12-02-foo-bar\.yaml: already has the id"):
        scaffold.new_record("Foo bar", tmp_path, today=day)
    assert sorted(p.name for p in tmp_path.rglob("*.yaml")) == ["2026-12-02-foo-bar.yaml"]
    made = scaffold.new_plan("Foo bar", tmp_path)  # a plan of that id is another kind: allowed
    assert made == tmp_path / "plans" / "foo-bar.yaml"
