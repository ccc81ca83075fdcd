"""A changed record's other values: each leaf that differs, by its dotted path, in a line.

Those the review shows elsewhere (status, verdict and metric rows, caveats, a sweep's cells)
are left out; a value is redacted and cut short where two long texts first differ.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any

from kbgen import redact


@dataclass(frozen=True)
class ValueChange:
    """A setting or value that differs, by its dotted path, as it reads on each side (None:
    absent there)."""

    path: str
    old: str | None
    new: str | None


# Shown elsewhere in a record's change (its status line, verdict rows, metric rows, caveats):
# dotted paths and what lies below them, `*` a key (a class's name)
SHOWN_APART = (
    "status",
    "measurements",
    "verdict.outcome",
    "verdict.caveats",
    "verdict.reasons",
    *(f"verdict.per_class.*.{name}" for name in ("outcome", "effect", "ci_low", "ci_high")),
    "verdict.per_class.*.per_unit",  # each prompt's effect: the class's effect says it
    "verdict.cells",  # a sweep's: its cell rows
    "verdict.best",  # and its best configurations
)
MAX_VALUE_CHARS = 100


def value_changes(before: dict[str, Any], after: dict[str, Any]) -> list[ValueChange]:
    """Every leaf value that differs, by its dotted path, but those shown apart (`SHOWN_APART`);
    a list is one value."""
    old, new = _leaves(redact.data(before)), _leaves(redact.data(after))  # a comment is public
    return [
        ValueChange(path, *_shown(old.get(path), new.get(path)))
        for path in sorted(old.keys() | new.keys())
        if old.get(path) != new.get(path) and not _apart(path)
    ]


def _apart(path: str) -> bool:
    return any(
        fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, f"{pattern}.*")
        for pattern in SHOWN_APART
    )


def _leaves(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{path}."))
        else:
            out[path] = value
    return out


def _shown(old: Any, new: Any) -> tuple[str | None, str | None]:
    """Two values as short lines (None: absent), each cut to `MAX_VALUE_CHARS` at the same
    place, a little before where they first differ: two long texts that differ late do not
    read the same."""
    a, b = _line(old), _line(new)
    start = 0
    if max(len(a or ""), len(b or "")) > MAX_VALUE_CHARS and a is not None and b is not None:
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
        start = max(0, min(same, len(b)) - 20)
    return _cut(a, start), _cut(b, start)


def _line(value: Any) -> str | None:
    """A value as one line: text as it is, a list of plain values comma-separated, anything
    else as JSON."""
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(x, str | int | float | bool) for x in value):
        text = ", ".join(_plain(x) for x in value) if value else "(none)"
    else:
        text = _plain(value)
    return " ".join(text.split())


def _cut(text: str | None, start: int) -> str | None:
    if text is None:
        return None
    text = "…" + text[start:] if start else text
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
