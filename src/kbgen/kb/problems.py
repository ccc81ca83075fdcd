"""Pydantic's validation errors as located problems: `file:line: dotted.path: message`.

The one translation of a ``ValidationError`` for every file kbgen validates — a record or plan
on disk, a record about to be filled in, a spec, the text of a new record — so each reads the
same and points at the line of the offending key, taken from a round-trip parse of the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kbgen.errors import Problem
from kbgen.kb import store


def dotted(parts: Iterable[str | int]) -> str:
    """`measurements.ngram.math` for a key path; list indexes as `[0]`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field (not in the schema; check its spelling)"
    if error["type"] == "missing":
        return "required field is missing"
    return str(error["msg"])


def problems_of(path: Path, exc: ValidationError, tree: Any = None) -> list[Problem]:
    """Pydantic errors as problems of `path`, at the lines of `tree`, its round-trip parse.

    Without a tree (a record not written yet) the problems have no line numbers.
    """
    # A value that fits no member of a union gets one error per member at the same place:
    # join them into one line.
    messages: dict[tuple[int, str], list[str]] = {}
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        if error["type"] == "union_tag_invalid":  # point at the tag itself, not its mapping
            loc.append(str(error["ctx"]["discriminator"]).strip("'"))
        line, found = store.line_of(tree, loc) if tree is not None else (0, loc)
        said = messages.setdefault((line, dotted(found)), [])
        if _message(error) not in said:
            said.append(_message(error))
    return [
        Problem(path, line or None, field, "; or ".join(said))
        for (line, field), said in sorted(messages.items())
    ]


def located(path: Path, loc: list[str | int], message: str, tree: Any = None) -> Problem:
    """A problem at the line of `loc` in `path` (parsed again for positions unless `tree`)."""
    line, found = store.line_of(tree if tree is not None else store.positions(path), loc)
    return Problem(path, line, dotted(found), message)
