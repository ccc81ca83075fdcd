"""Golden files: text a test made, compared with the copy kept in the repository, which
`KBGEN_UPDATE_GOLDEN=1` rewrites instead (then the change is reviewed in `git diff`)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

UPDATE = "KBGEN_UPDATE_GOLDEN"
GOLDEN = Path(__file__).parents[1] / "golden"
DIFF_LINES = 60  # enough to see what changed; the whole of it is one `git diff` away


def golden_path(name: str, prefix: str = "") -> Path:
    """The file under tests/golden/ for a page's path: `records/index.md` → `records__index.md`."""
    return GOLDEN / f"{prefix}{name.replace('/', '__')}"


def assert_golden(made: str, golden: Path, *, between: tuple[str, str] | None = None) -> None:
    """`made` is the text of `golden`, or with `between` the text between those two markers in
    it (a generated part of a hand-written page). Under KBGEN_UPDATE_GOLDEN=1 it is written
    there first."""
    if os.environ.get(UPDATE):
        kept = golden.read_text() if between else ""
        golden.write_text(_spliced(kept, made, between, golden))
    if not golden.exists():
        raise AssertionError(f"no golden file {golden}: run with {UPDATE}=1 to write it")
    expected = _part(golden.read_text(), between, golden)
    if made != expected:
        lines = [
            line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"
            for line in difflib.unified_diff(
                expected.splitlines(keepends=True),
                made.splitlines(keepends=True),
                fromfile=str(golden),
                tofile="made by the test",
            )
        ]
        if len(lines) > DIFF_LINES:
            lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more diff lines\n"]
        raise AssertionError(
            f"{golden} differs from what the test made (run with {UPDATE}=1 to rewrite it):\n"
            + "".join(lines)
        )


def _bounds(text: str, between: tuple[str, str], golden: Path) -> tuple[int, int]:
    start, end = between
    first = text.find(start)
    last = text.find(end, first + len(start)) if first >= 0 else -1
    if last < 0:
        raise AssertionError(f"{golden} has no part between {start!r} and {end!r}")
    return first + len(start), last


def _part(text: str, between: tuple[str, str] | None, golden: Path) -> str:
    if between is None:
        return text
    first, last = _bounds(text, between, golden)
    return text[first:last]


def _spliced(text: str, made: str, between: tuple[str, str] | None, golden: Path) -> str:
    if between is None:
        return made
    first, last = _bounds(text, between, golden)
    return text[:first] + made + text[last:]
