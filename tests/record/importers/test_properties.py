"""Property: a result file of `vllm bench serve` or GuideLLM mutated at random either imports
and makes a valid record, or is located lines in that file, exit 1.

The mutations start from the real files of tests/fixtures/imports (written by the tools), and
go mostly where kbgen reads (the fields of the format models): values replaced by hostile ones
(NaN and Infinity as JSON writes them, negative or huge numbers, strings, deep lists), keys
removed or added, lists grown. A file that imports is compared with the tool's unchanged
baseline file on a primary metric drawn at random (a zero TTFT must not break a TTFT verdict).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest
from click.testing import CliRunner
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kbgen.cli import cli
from kbgen.errors import KbgenError
from kbgen.kb.models import Hypothesis, MetricName, Record
from kbgen.record import compose
from kbgen.record.importers import guidellm, reading, vllm_bench
from kbgen.record.importers.imported import Imported
from tests.support.imports import FIXTURES, SPEC
from tests.support.properties import (
    SETTINGS,
    Mutated,
    assert_cli_outcome,
    assert_located_error,
    deadline,
    deep_text,
    examples,
    mutated,
    paths_of,
)

FORMATS: dict[str, tuple[Callable[[Path, str], Imported], str]] = {
    "vllm-bench": (vllm_bench.read, "vllm-bench"),
    "guidellm": (guidellm.read, "guidellm"),
}
READ = {  # the keys kbgen reads, from the format models themselves
    name
    for tool in (vllm_bench, guidellm)
    for model in vars(tool).values()
    if isinstance(model, type) and issubclass(model, reading.Format)
    for name in model.model_fields
}


def _tree(tool: str) -> Any:
    return json.loads((FIXTURES / f"{tool}-ngram.json").read_text())


def _read_paths(tree: Any) -> list[tuple[str | int, ...]]:
    """Paths to what kbgen reads: a read key, or an item of a list under one."""
    return [
        p
        for p in paths_of(tree)
        if p[-1] in READ or (isinstance(p[-1], int) and len(p) > 1 and p[-2] in READ)
    ]


TREES = {tool: _tree(tool) for tool in FORMATS}
PATHS = {tool: _read_paths(tree) for tool, tree in TREES.items()}
METRICS = list(get_args(MetricName))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("imports")


def _imports_or_is_located(
    folder: Path, tool: str, mutation: Mutated, metric: str, allow: bool
) -> None:
    importer, option = FORMATS[tool]
    path = folder / f"{tool}.json"
    path.write_text(deep_text(json.dumps(mutation.tree)))  # NaN, Infinity as json writes them
    with deadline(30):
        try:
            found = importer(path, "ngram")
        except Exception as exc:  # the property is about which exceptions come out
            assert_located_error(exc, path)
            result = CliRunner().invoke(
                cli,
                [
                    "record",
                    "--from",
                    option,
                    f"baseline={FIXTURES / f'{tool}-baseline.json'}",
                    f"ngram={path}",
                    "--spec",
                    str(SPEC),
                    "--records",
                    str(folder / "records"),
                ],
            )
            assert_cli_outcome(result, path)
            assert result.exit_code == 1
            return
        baseline = importer(FIXTURES / f"{tool}-baseline.json", "baseline")
        hypothesis = Hypothesis(
            statement="s", primary_metric=metric, direction="increase", minimum_effect=0.05
        )
        try:
            record, _ = compose.from_imports([baseline, found], "x", "X", hypothesis, allow, allow)
        except KbgenError:  # a mismatch the user may allow: not a crash
            event("refused")
            return
    event("recorded")
    Record.model_validate(record.model_dump())


@settings(SETTINGS, max_examples=examples(200))
@given(
    mutation=mutated(TREES["vllm-bench"], PATHS["vllm-bench"]),
    metric=st.sampled_from(METRICS),
    allow=st.booleans(),
)
def test_a_mutated_vllm_bench_file_imports_or_is_located(
    folder: Path, mutation: Mutated, metric: str, allow: bool
) -> None:
    _imports_or_is_located(folder, "vllm-bench", mutation, metric, allow)


@settings(SETTINGS, max_examples=examples(150))  # a large report: each example copies it
@given(
    mutation=mutated(TREES["guidellm"], PATHS["guidellm"]),
    metric=st.sampled_from(METRICS),
    allow=st.booleans(),
)
def test_a_mutated_guidellm_report_imports_or_is_located(
    folder: Path, mutation: Mutated, metric: str, allow: bool
) -> None:
    _imports_or_is_located(folder, "guidellm", mutation, metric, allow)


# Valid-looking extremes: per-request lists whose every value the format accepts, chosen where
# statistics break (zeros, the smallest and largest floats, one-token outputs).
NON_NEGATIVE = st.one_of(
    st.sampled_from([0.0, 5e-324, 1e-9, 1e-3, 604800.0]),  # 604800 s: the longest allowed
    st.floats(min_value=0, max_value=10, allow_nan=False),
)


@st.composite
def extreme_requests(draw: st.DrawFn) -> Mutated:
    tree = json.loads(json.dumps(TREES["vllm-bench"]))
    n = len(tree["ttfts"])
    tree["ttfts"] = draw(st.lists(NON_NEGATIVE, min_size=n, max_size=n))
    tree["itls"] = draw(st.lists(st.lists(NON_NEGATIVE, max_size=4), min_size=n, max_size=n))
    tree["output_lens"] = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    tree["errors"] = [""] * n
    ok = sum(1 for ttft in tree["ttfts"] if ttft)  # vllm bench counts a zero TTFT as failed
    tree["completed"], tree["failed"] = ok, n - ok
    return Mutated(
        tree, [f"ttfts={tree['ttfts']}", f"itls={tree['itls']}", f"{tree['output_lens']}"]
    )


@settings(SETTINGS, max_examples=examples(150))
@given(mutation=extreme_requests(), metric=st.sampled_from(METRICS), allow=st.booleans())
def test_extreme_vllm_bench_requests_import_or_are_located(
    folder: Path, mutation: Mutated, metric: str, allow: bool
) -> None:
    _imports_or_is_located(folder, "vllm-bench", mutation, metric, allow)


SUMMARY_ONLY = {k: v for k, v in TREES["vllm-bench"].items() if k not in vllm_bench.LISTS}
SUMMARIES = [k for k in SUMMARY_ONLY if k.endswith("_ms")]


@st.composite
def extreme_summaries(draw: st.DrawFn) -> Mutated:
    tree = dict(SUMMARY_ONLY)
    for key in draw(st.lists(st.sampled_from(SUMMARIES), min_size=1, unique=True)):
        tree[key] = draw(NON_NEGATIVE | st.just(1e-310) | st.none())
    changed = {k: v for k, v in tree.items() if v != SUMMARY_ONLY[k]}
    return Mutated(tree, [f"{changed}"])


@settings(SETTINGS, max_examples=examples(150))
@given(mutation=extreme_summaries(), metric=st.sampled_from(METRICS), allow=st.booleans())
def test_extreme_summaries_import_or_are_located(
    folder: Path, mutation: Mutated, metric: str, allow: bool
) -> None:
    """A file without per-request lists: the verdict compares the reported means."""
    _imports_or_is_located(folder, "vllm-bench", mutation, metric, allow)
