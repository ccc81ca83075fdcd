"""A tool's result file read as JSON and validated as a Pydantic model of its format.

Numbers typed and finite, within the limits below; every problem located in the file as
`file:line: dotted.path: message`. The file is parsed fast by `json`; only a file with a problem
is read again, for the lines of its problems (`positions`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from kbgen.errors import InvalidInput, Problem
from kbgen.kb.files import read_json, read_regular
from kbgen.kb.problems import dotted, problems_of
from kbgen.record.importers.positions import Loc, lines_of

# Limits of an import file. Unpaired requests are compared by a BCa bootstrap, whose jackknife
# costs n² (20,000 requests: about ten seconds); the file is read whole, as the tools write it.
MAX_REQUESTS = 20_000
MAX_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 100  # nesting of JSON arrays and objects; the tools write a dozen levels


class Format(BaseModel):
    """A part of another tool's file: what kbgen reads is typed, everything else is ignored."""

    model_config = ConfigDict(extra="ignore")


F = TypeVar("F", bound=Format)


def read_format(path: Path, model: type[F]) -> F:
    """`path` read as JSON and validated as `model`; InvalidInput located in the file otherwise.

    The size is checked before reading and the nesting before validating, so a huge file or a
    deeply nested one is a clear error, not a memory or a recursion error.
    """
    data = read_json(path, MAX_BYTES)
    if _deeper_than(data, MAX_DEPTH):
        raise InvalidInput([Problem(path, None, "", f"JSON nesting is deeper than {MAX_DEPTH}")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        locs = {dotted(e["loc"]): tuple(e["loc"]) for e in exc.errors(include_url=False)}
        where = {p: locs.get(p.field, ()) for p in problems_of(path, exc)}
        text = read_regular(path, MAX_BYTES).decode("utf-8", errors="replace")
        lines = lines_of(text, set(where.values()))
        raise InvalidInput([replace(p, line=lines[loc]) for p, loc in where.items()]) from exc


def problem_at(path: Path, loc: Loc, message: str) -> Problem:
    """A problem with the value at the key path `loc` of the JSON file at `path`, at its line
    (one the file's model cannot see: a disagreement with another file)."""
    text = read_regular(path, MAX_BYTES).decode("utf-8", errors="replace")
    return Problem(path, lines_of(text, {loc})[loc], dotted(loc), message)


def _deeper_than(data: Any, limit: int) -> bool:
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    return False
