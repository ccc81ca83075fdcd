"""The tests' golden-file helper: a match passes, a difference fails with its diff, and
KBGEN_UPDATE_GOLDEN=1 rewrites the file (or only its generated part)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.golden import GOLDEN, UPDATE, assert_golden, golden_path

MARKERS = ("<!-- start -->\n", "<!-- end -->")
PAGE = "# Hand-written\n\n<!-- start -->\nold\n<!-- end -->\n\nmore prose\n"


@pytest.fixture(autouse=True)
def not_updating(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UPDATE, raising=False)


def test_a_page_s_golden_file_is_named_by_its_path() -> None:
    assert golden_path("records/index.md") == GOLDEN / "records__index.md"
    assert golden_path("records/index.md", "example__") == GOLDEN / "example__records__index.md"


def test_the_same_text_passes(tmp_path: Path) -> None:
    (tmp_path / "g.md").write_text("a\nb\n")
    assert_golden("a\nb\n", tmp_path / "g.md")


@pytest.mark.parametrize(
    ("made", "shown"),
    [
        ("a\nc\n", "-b\n+c\n"),
        ("a\nb", "-b\n+b\n\\ No newline at end of file\n"),  # a lost last newline shows
    ],
)
def test_a_difference_fails_with_its_diff_and_the_way_to_update(
    tmp_path: Path, made: str, shown: str
) -> None:
    (tmp_path / "g.md").write_text("a\nb\n")
    with pytest.raises(AssertionError, match=f"run with {UPDATE}=1") as info:
        assert_golden(made, tmp_path / "g.md")
    assert str(info.value).endswith(shown)
    assert (tmp_path / "g.md").read_text() == "a\nb\n"  # never rewritten unless asked


def test_a_long_difference_is_cut(tmp_path: Path) -> None:
    (tmp_path / "g.md").write_text("".join(f"{i}\n" for i in range(200)))
    with pytest.raises(AssertionError, match=r"\.\.\. \d+ more diff lines"):
        assert_golden("", tmp_path / "g.md")


def test_a_missing_golden_file_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=f"no golden file .*g.md: run with {UPDATE}=1"):
        assert_golden("a\n", tmp_path / "g.md")


def test_updating_writes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPDATE, "1")
    assert_golden("new\n", tmp_path / "g.md")
    assert (tmp_path / "g.md").read_text() == "new\n"


def test_a_part_between_markers_is_compared_and_updated_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert_golden("old\n", page, between=MARKERS)
    with pytest.raises(AssertionError, match=r"-old\n\+new"):
        assert_golden("new\n", page, between=MARKERS)
    monkeypatch.setenv(UPDATE, "1")
    assert_golden("new\n", page, between=MARKERS)
    assert page.read_text() == PAGE.replace("\nold\n", "\nnew\n")


def test_a_page_without_its_markers_fails(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# no markers\n")
    with pytest.raises(AssertionError, match="has no part between"):
        assert_golden("x\n", tmp_path / "page.md", between=MARKERS)
