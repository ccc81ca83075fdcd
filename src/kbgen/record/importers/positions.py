"""The lines of key paths in JSON text, found by the `json` module's own scanner.

The parser that read the file, stepped through it member by member in one pass: exact for every
text `json.loads` accepts, and about as fast, since whatever holds no path sought is skipped by
the C decoder. (A YAML parser with positions misreads some JSON — surrogate pairs, keys over
1,024 characters, a key given twice — and takes seconds a megabyte.)
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Collection, Iterator

Loc = tuple[str | int, ...]

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def lines_of(text: str, locs: Collection[Loc]) -> dict[Loc, int]:
    """The 1-based line of each key path in the JSON `text`: its last key's line, or its last
    list item's; where a part is not there (a missing key, a union member's name), the line of
    the deepest part that is."""
    wanted: dict[Loc, set[str | int]] = {}  # a path -> the keys and indices sought under it
    for loc in locs:
        for i, part in enumerate(loc):
            wanted.setdefault(loc[:i], set()).add(part)
    starts: dict[Loc, int] = {(): _skip(text, 0)}
    # the file changed since it was parsed (read again for this): the lines found so far
    with contextlib.suppress(ValueError, RecursionError):
        _walk(text, starts[()], (), wanted, starts)
    nearest = {
        loc: starts[next(loc[:i] for i in range(len(loc), -1, -1) if loc[:i] in starts)]
        for loc in locs
    }
    lines: dict[int, int] = {}
    line, counted = 1, 0
    for offset in sorted(set(nearest.values())):  # one count over the text, however many paths
        line += text.count("\n", counted, offset)
        lines[offset], counted = line, offset
    return {loc: lines[offset] for loc, offset in nearest.items()}


def _walk(
    text: str, at: int, path: Loc, wanted: dict[Loc, set[str | int]], starts: dict[Loc, int]
) -> None:
    """Record where each wanted member under the value at `at` starts, descending only into
    those; a list is left after its last item sought. A key given twice is the last one, the
    value `json.loads` keeps."""
    sought = wanted.get(path, set())
    last = max((part for part in sought if isinstance(part, int)), default=-1)
    for key, start, value in _members(text, at):
        if isinstance(key, int) and key > last:
            return
        if key in sought:
            starts[(*path, key)] = start
            _walk(text, value, (*path, key), wanted, starts)


def _members(text: str, at: int) -> Iterator[tuple[str | int, int, int]]:
    """(key or index, where the member starts, where its value starts) for each member of the
    object or array at `at`; nothing for a scalar."""
    opening = text[at : at + 1]
    if opening not in ("{", "["):
        return
    at = _skip(text, at + 1)
    index = 0
    while text[at : at + 1] not in ("}", "]", ""):
        start = at
        key: str | int = index
        if opening == "{":
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, _skip(text, at) + 1)  # past the colon
        yield key, start, at
        at = _skip(text, _DECODER.raw_decode(text, at)[1])
        if text.startswith(",", at):
            at = _skip(text, at + 1)
        index += 1


def _skip(text: str, at: int) -> int:
    """The first position at or after `at` that is not JSON whitespace."""
    space = _SPACE.match(text, at)
    return space.end() if space else at
