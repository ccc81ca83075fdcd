"""Result files read and validated: special files, limits, and every problem at its line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput
from kbgen.record.importers import IMPORTERS, aiperf, guidellm, reading, vllm_bench
from tests.support import special
from tests.support.imports import BASE, GL_BASE, set_at


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
@pytest.mark.parametrize("tool", sorted(IMPORTERS))
def test_a_special_result_file_is_one_located_line(tmp_path: Path, tool: str, kind: str) -> None:
    path = tmp_path / "results" / "base.json"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        IMPORTERS[tool](path, "baseline")
    if (tool, kind) == ("aiperf", "folder"):  # its input is a folder: one of its own it is not
        message = aiperf.NOT_ARTIFACTS
    assert str(info.value).startswith(f"{path}: {message}")


def test_deep_nesting_and_huge_files_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InvalidInput, match=r"deep\.json: not JSON: nested too deeply"):
        guidellm.read(deep, "baseline")
    nested = tmp_path / "nested.json"
    nested.write_text('{"benchmarks": ' + "[" * 500 + "]" * 500 + "}")
    with pytest.raises(InvalidInput, match=r"nested\.json: JSON nesting is deeper than"):
        guidellm.read(nested, "baseline")
    monkeypatch.setattr(reading, "MAX_BYTES", BASE.stat().st_size - 1)
    with pytest.raises(InvalidInput, match=r"too large \([\d,]+ bytes; the limit is"):
        vllm_bench.read(BASE, "baseline")


def _line_with(text: str, marker: str) -> int:
    [line] = [i for i, line in enumerate(text.splitlines(), 1) if marker in line]
    return line


@pytest.mark.parametrize(
    ("source", "read", "key", "field"),
    [
        (BASE, vllm_bench.read, "ttfts.3", "ttfts[3]"),
        (BASE, vllm_bench.read, "itls.2.5", "itls[2][5]"),
        (BASE, vllm_bench.read, "completed", "completed"),
        (
            GL_BASE,
            guidellm.read,
            "benchmarks.0.requests.successful.7.output_tokens",
            "benchmarks[0].requests.successful[7].output_tokens",
        ),
        (
            GL_BASE,
            guidellm.read,
            "benchmarks.0.requests.successful.5.info.timings.first_token_iteration",
            "benchmarks[0].requests.successful[5].info.timings.first_token_iteration",
        ),
    ],
    ids=["list-item", "item-of-an-item", "key", "key-of-an-item", "deep-key-of-an-item"],
)
def test_a_problem_in_an_indented_file_is_at_its_own_line(
    tmp_path: Path, source: Path, read: Callable[[Path, str], Any], key: str, field: str
) -> None:
    """A file written with indents (by hand, or `jq .`): each problem at the line of its value,
    an item of a list too (the tools write one line, where every problem is at line 1)."""
    data = json.loads(source.read_text())
    set_at(key, "marker")(data)
    path = tmp_path / "indented.json"
    path.write_text(json.dumps(data, indent=2))
    with pytest.raises(InvalidInput) as info:
        read(path, "baseline")
    [problem] = [p for p in info.value.problems if p.field == field]
    assert problem.line == _line_with(path.read_text(), '"marker"')


@pytest.mark.parametrize(
    ("source", "read", "change", "marker"),
    [
        (BASE, vllm_bench.read, set_at("failed", 2), '"failed": 2,'),
        (
            GL_BASE,
            guidellm.read,
            set_at("benchmarks.0.metrics.request_totals.successful", 13),
            '"successful": 13',
        ),
    ],
    ids=["vllm-bench", "guidellm"],
)
def test_a_count_that_disagrees_with_the_lists_is_at_its_line(
    tmp_path: Path,
    source: Path,
    read: Callable[[Path, str], Any],
    change: Callable[[dict[str, Any]], None],
    marker: str,
) -> None:
    data = json.loads(source.read_text())
    change(data)
    path = tmp_path / "indented.json"
    path.write_text(json.dumps(data, indent=2))
    with pytest.raises(InvalidInput, match="says") as info:
        read(path, "baseline")
    [problem] = info.value.problems
    assert problem.line == _line_with(path.read_text(), marker)


def test_every_bad_item_of_a_long_list_is_at_its_own_line(tmp_path: Path) -> None:
    n = 5000  # one pass over the text, however many problems: seconds for MAX_REQUESTS too
    data = json.loads(BASE.read_text())
    for key in vllm_bench.LISTS:
        data[key] = [data[key][i % 12] for i in range(n)]
    data["ttfts"], data["completed"] = [f"t{i}" for i in range(n)], n
    path = tmp_path / "indented.json"
    path.write_text(json.dumps(data, indent=1))
    with special.deadline(10), pytest.raises(InvalidInput) as info:
        vllm_bench.read(path, "baseline")
    first = _line_with(path.read_text(), '"t0"')
    assert [p.line for p in info.value.problems] == list(range(first, first + n))
