"""The line of a key path in JSON text, as the json module parses it."""

from __future__ import annotations

import json

import pytest

from kbgen.record.importers.positions import Loc, lines_of

CASES = [
    ('{\n "a": 1,\n "b": 2\n}', ("b",), 3),
    ('{"a": [\n 1,\n 2\n]}', ("a", 1), 3),
    ('[\n {"x": 1},\n {\n  "x": 2\n }\n]', (1, "x"), 4),
    ('{\n "a": {\n  "b": 1\n }\n}', ("a", "c"), 2),  # a missing key: where it belongs
    ('{\n "a": {\n  "b": 1\n }\n}', ("a", "b", "str"), 3),  # a union member's name
    ('{"a": [\n 1\n]}', ("a", 7), 1),  # an item past the end: the list's line
    ("\n\n{\n}", (), 3),
    ('{\n "a": 1,\n "a": 2\n}', ("a",), 3),  # given twice: json.loads keeps the last
    ('{"s": "\\"a\\": [{",\n "a": 1}', ("a",), 2),  # a string that looks like a key
    ('{"t": "\\ud83d\\ude00",\n "a": 1}', ("a",), 2),  # a surrogate pair (YAML refuses it)
    ('{"' + "k" * 2000 + '": 1,\n "a": 1}', ("a",), 2),  # a key YAML cannot take
    ('{\n\t"a":\t[\r\n\t1,\r\n\t2]}', ("a", 1), 4),  # tabs and CRLF
    ('{\n "a\\"b": 1}', ('a"b',), 2),
    ('{\n "a": [1, 2', ("a", 5), 2),  # not JSON (changed since it was read): no error
]


@pytest.mark.parametrize(("text", "loc", "line"), CASES)
def test_the_line_of_a_key_path(text: str, loc: Loc, line: int) -> None:
    assert lines_of(text, [loc]) == {loc: line}


def test_many_paths_in_one_pass() -> None:
    n = 5000
    data = {"ttfts": [f"t{i}" for i in range(n)], "itls": [[f"{i}a", f"{i}b"] for i in range(n)]}
    text = json.dumps(data, indent=1)
    line_with = {line.strip(' ",'): i for i, line in enumerate(text.splitlines(), 1)}
    locs = [*(("ttfts", i) for i in range(n)), *(("itls", i, 1) for i in range(n)), ("itls",)]
    lines = lines_of(text, locs)
    assert [lines["ttfts", i] for i in range(n)] == [line_with[f"t{i}"] for i in range(n)]
    assert [lines["itls", i, 1] for i in range(n)] == [line_with[f"{i}b"] for i in range(n)]
    assert lines["itls",] == text.splitlines().index(' "itls": [') + 1
