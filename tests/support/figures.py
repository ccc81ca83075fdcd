"""The figures of a record as pages show them, read back and compared with the record's YAML."""

from __future__ import annotations

import re
from typing import Any

# one part of a headline: `` `metric`: `` before the first (its backticks gone in a browser), a
# class's change and its interval
PART = re.compile(
    r"(?:`?(?P<metric>[^`:\s]+)`?: )?(?P<cls>\S+) (?P<effect>[+-]\d+\.\d)%"
    r"(?: \[(?P<low>[+-]\d+\.\d)% … (?P<high>[+-]\d+\.\d)%\])?"
)
ACCEPTANCE = re.compile(r"acceptance (?P<low>\d+)(?:–(?P<high>\d+))?%")
LINK = re.compile(r"\]\((?:\.\./records/)?(?P<id>[^)/]+)\.md\)")  # to a record's page


def linked(row: str) -> str:
    """The id of the first record `row` links to (from a plan's page, a record's or the index)."""
    found = LINK.search(row)
    assert found, row
    return found["id"]


def index_rows(page: str) -> list[dict[str, str]]:
    """The rows of the records index's table, in the page's order, each cell by its column's
    heading (as the Markdown writes it: a record's link is `[title](id.md)`)."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Date | Record |"))
    heads = lines[start].strip("| ").split(" | ")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        cells = line.removeprefix("| ").removesuffix(" |").split(" | ")
        assert len(cells) == len(heads), line
        rows.append(dict(zip(heads, cells, strict=True)))
    return rows


def headline(text: str) -> tuple[str | None, list[tuple[str, float, Any]], Any]:
    """(metric, [(class, effect, (low, high) or None)], acceptance (low, high) or None) of a
    headline as the page shows it, in percent."""
    metric, results, acceptance = None, [], None
    for part in text.strip().split(" · "):
        if found := ACCEPTANCE.fullmatch(part):
            low = float(found["low"])
            acceptance = (low, float(found["high"]) if found["high"] else low)
            continue
        found = PART.fullmatch(part)
        assert found, f"not a headline's part: {part!r}"
        metric = metric or found["metric"]
        bounds = (float(found["low"]), float(found["high"])) if found["low"] else None
        results.append((found["cls"], float(found["effect"]), bounds))
    return metric, results, acceptance


def close(shown: float, value: float, precision: float = 0.1) -> bool:
    """Whether `shown` (in percent, to `precision`) is `value` (a fraction)."""
    return abs(shown - 100 * value) <= precision / 2 + 1e-9


def as_recorded(text: str, record: dict[str, Any]) -> None:
    """The figures of headline `text` are those of `record`'s verdict and spec_decode, to the
    precision shown (0.1 point for changes, 1 point for acceptance)."""
    verdict = record["verdict"]
    metric, results, acceptance = headline(text)
    assert metric == record["hypothesis"]["primary_metric"]
    assert [cls for cls, _, _ in results] == list(verdict["per_class"])
    for cls, effect, bounds in results:
        v = verdict["per_class"][cls]
        assert close(effect, v["effect"]), (cls, effect, v)
        if v.get("ci_low") is None:
            assert bounds is None
        else:
            assert bounds is not None
            assert close(bounds[0], v["ci_low"]) and close(bounds[1], v["ci_high"])
    rate = ((record.get("spec_decode") or {}).get(verdict["variant"]) or {}).get("acceptance_rate")
    if rate is None:
        assert acceptance is None
    else:
        low, high = (rate["low"], rate["high"]) if isinstance(rate, dict) else (rate, rate)
        assert acceptance is not None
        assert close(acceptance[0], low, 1) and close(acceptance[1], high, 1)
