"""The experiment folder of a real `vllm bench sweep serve` (tests/fixtures/imports/sweeps), as
the tool wrote it and changed as each case needs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput, UsageError
from kbgen.record import compose
from kbgen.record import importers as imports
from kbgen.record.importers import vllm_sweep
from tests.support.imports import FASTER, VLLM_SWEEP, rewrite, suite_file, sweep_copy

BASE_1 = "SERVE--baseline-BENCH--max_concurrency=1"
BASE_2 = "SERVE--baseline-BENCH--max_concurrency=2"
NGRAM_1 = "SERVE--ngram-BENCH--max_concurrency=1"
NGRAM_2 = "SERVE--ngram-BENCH--max_concurrency=2"
LOADS = [{"concurrency": 1}, {"concurrency": 2}]


def test_each_serve_combination_is_a_variant_each_bench_combination_a_level_each_run_a_round() -> (
    None
):
    found = vllm_sweep.read(VLLM_SWEEP)
    assert [(i.variant, i.step, i.round, len(i.samples)) for i in found] == [
        (variant, step, run, 6)
        for variant in ("baseline", "ngram")
        for step in (0, 1)
        for run in (0, 1)
    ]
    raw = json.loads((VLLM_SWEEP / NGRAM_2 / "run=1.json").read_text())
    ngram_2 = found[-1]
    assert [s.output_tokens for s in ngram_2.samples] == raw["output_lens"]
    assert ngram_2.spec_decode is not None
    assert ngram_2.spec_decode["drafts"] == raw["spec_decode_num_drafts"]
    notes = found[0].notes
    assert "warm-up runs (warmup.json, run -1) of 4 combination(s) not imported" in notes
    assert "the baseline is baseline: the serve combination without serve parameters" in notes
    assert any(n.startswith('ngram: serve parameters {"speculative_config"') for n in notes)
    assert vllm_sweep.ROUNDS in notes  # the runs are repeats inside one start, not rounds


def test_the_sweep_is_one_record_judged_at_every_load() -> None:
    found = vllm_sweep.read(VLLM_SWEEP)
    record, evidence = compose.from_imports(found, "x", "X", FASTER)
    assert evidence is not None and evidence.loads == LOADS and evidence.paired
    assert record.workload is not None and record.workload.loads == LOADS
    assert record.workload.concurrency == 1  # the first level's, as `measurements` are
    counts = Counter((s.variant, s.level, s.round) for s in evidence.samples)
    assert counts == {
        (v, level, run): 6 for v in ("baseline", "ngram") for level in (0, 1) for run in (0, 1)
    }
    assert [m.load for m in record.by_load] == LOADS
    assert all("itl_ms" not in m.measurements["ngram"]["all"] for m in record.by_load)
    verdict = record.verdict
    assert verdict is not None and verdict.family is not None
    assert verdict.family.comparisons == 2
    assert {(c.variant, c.load["concurrency"], c.prompt_class) for c in verdict.cells} == {
        ("ngram", 1, "all"),
        ("ngram", 2, "all"),
    }
    assert [b.load for b in verdict.best] == LOADS
    assert [(w.level, w.round) for w in evidence.windows["ngram"]] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert record.spec_decode["ngram"].drafts == 4 * 22  # each run's counters, summed


def test_a_prompt_file_classes_every_run_by_position(tmp_path: Path) -> None:
    """Every run sends the same six prompts (--seed 0): a file of six gives each run's requests
    its classes, and the sweep has a cell for every variant, load and class."""
    lines = [json.dumps({"class": "a" if i < 3 else "b", "prompt": f"p{i}"}) for i in range(6)]
    found = vllm_sweep.read(VLLM_SWEEP)
    suite = imports.classify(found, suite_file(tmp_path, lines))
    assert all([s.prompt_class for s in i.samples] == ["a"] * 3 + ["b"] * 3 for i in found)
    record, _ = compose.from_imports(found, "x", "X", FASTER, suite=suite)
    assert record.verdict is not None
    assert {(c.load["concurrency"], c.prompt_class) for c in record.verdict.cells} == {
        (level, cls) for level in (1, 2) for cls in ("a", "b")
    }


def _params(data: dict[str, Any]) -> None:
    data["max_num_seqs"] = 4


@pytest.mark.parametrize(
    ("baseline", "change", "order", "why"),
    [
        (None, None, ["baseline", "ngram"], "the serve combination without serve parameters"),
        ("ngram", None, ["ngram", "baseline"], "the spec's baseline"),
        (None, _params, ["baseline", "ngram"], "the first serve combination (every one has"),
    ],
    ids=["without-parameters", "the-spec-s", "the-first"],
)
def test_the_baseline(
    tmp_path: Path,
    baseline: str | None,
    change: Callable[[dict[str, Any]], None] | None,
    order: list[str],
    why: str,
) -> None:
    folder = sweep_copy(tmp_path)
    if change is not None:
        for path in folder.glob("SERVE--baseline-*/run=*.json"):
            rewrite(path, change)
    found = vllm_sweep.read(folder, baseline)
    assert list(dict.fromkeys(i.variant for i in found)) == order
    assert any(n.startswith(f"the baseline is {order[0]}: {why}") for n in found[0].notes)


def test_a_baseline_that_is_no_serve_combination_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="'fast' is no serve combination of the sweep"):
        vllm_sweep.read(VLLM_SWEEP, "fast")


LIST_FORM = "SERVE--speculative_config={'method': 'ngram', 'num_speculative_tokens': 3}-BENCH--"


@pytest.mark.parametrize(
    ("renamed", "variants"),
    [
        ({}, ["baseline", "ngram"]),
        ({"SERVE--baseline-": "BENCH-", "SERVE--ngram-": "SERVE--fast-"}, ["baseline", "fast"]),
        ({"SERVE--ngram-BENCH--": LIST_FORM}, ["baseline", "serve-1"]),
    ],
    ids=["dict-form", "no-serve-part", "list-form"],
)
def test_a_variant_is_named_by_its_serve_combination(
    tmp_path: Path, renamed: dict[str, str], variants: list[str]
) -> None:
    folder = sweep_copy(tmp_path)
    for path in folder.iterdir():
        for old, new in renamed.items():
            if path.name.startswith(old):
                path.rename(folder / path.name.replace(old, new, 1))
    assert list(dict.fromkeys(i.variant for i in vllm_sweep.read(folder))) == variants


def _remove(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


def _write(name: str, text: str) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        (folder / name).write_text(text)

    return change


def _set(name: str, key: str, value: Any) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        for path in folder.glob(name):
            rewrite(path, lambda data: data.update({key: value}))

    return change


def _no_folder(name: str) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        for path in (folder / name).iterdir():
            path.unlink()
        (folder / name).rmdir()

    return change


K5 = {
    "method": "ngram",
    "num_speculative_tokens": 5,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}


@pytest.mark.parametrize(
    ("change", "where", "field", "located", "message"),
    [
        (
            _remove(f"{NGRAM_2}/run=1.json"),
            f"{NGRAM_2}/run=1.json",
            "",
            False,
            "missing: summary.json lists run 1",
        ),
        (_remove(f"{BASE_1}/summary.json"), f"{BASE_1}/summary.json", "", False, "did not finish"),
        (
            _write(f"{NGRAM_1}/run=0.json", '{"completed": 6,'),
            f"{NGRAM_1}/run=0.json",
            "",
            True,
            "not JSON",
        ),
        (
            _write(f"{BASE_2}/summary.json", "{}"),
            f"{BASE_2}/summary.json",
            "",
            True,
            "not a list of the",
        ),
        (
            _set(f"{BASE_2}/run=1.json", "run_number", 0),
            f"{BASE_2}/run=1.json",
            "run_number",
            True,
            "is 0, but summary.json lists this file as run 1",
        ),
        (
            _set(f"{NGRAM_1}/run=1.json", "max_concurrency", 2),
            f"{NGRAM_1}/run=1.json",
            "max_concurrency",
            True,
            "at concurrency 2, request rate inf, but",
        ),
        (
            _set(f"{NGRAM_2}/run=0.json", "speculative_config", K5),
            f"{NGRAM_2}/run=0.json",
            "speculative_config",
            True,
            "of the same serve combination has",
        ),
        (
            _set(f"{NGRAM_2}/run=*.json", "max_concurrency", 1),
            NGRAM_2,
            "",
            False,
            f"the same serve combination and load as {NGRAM_1}",
        ),
        (
            _no_folder(NGRAM_2),
            "",
            "",
            False,
            f"ngram: no combination at concurrency 2, request rate inf, where {BASE_2}",
        ),
        (
            _set(f"{BASE_1}/run=0.json", "run_number", "0"),
            f"{BASE_1}/run=0.json",
            "run_number",
            True,
            "integer",
        ),
    ],
    ids=[
        "missing-run",
        "no-summary",
        "run-not-json",
        "summary-not-a-list",
        "run-number-disagrees",
        "load-disagrees",
        "serve-parameters-disagree",
        "two-combinations-at-one-load",
        "missing-combination",
        "run-number-text",
    ],
)
def test_a_malformed_folder_is_one_located_problem(
    tmp_path: Path,
    change: Callable[[Path], None],
    where: str,
    field: str,
    located: bool,
    message: str,
) -> None:
    folder = sweep_copy(tmp_path)
    change(folder)
    with pytest.raises(InvalidInput) as info:
        vllm_sweep.read(folder)
    [problem] = info.value.problems
    assert problem.path == (folder / where if where else folder), problem
    assert problem.field == field and message in problem.message, problem
    assert (problem.line is not None) == located, problem


def test_a_folder_of_no_sweep_says_which_folder_to_give(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"no combination folders .*-o DIR -e NAME: DIR/NAME"):
        vllm_sweep.read(tmp_path)
