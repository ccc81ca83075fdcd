"""Requests paired across variants only by what the files prove."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbgen.record import compose
from kbgen.record.importers import guidellm, vllm_bench
from kbgen.record.importers.imported import Imported
from kbgen.record.importers.pairing import pair_prompts
from tests.support.imports import (
    BASE,
    FASTER,
    GL_BASE,
    GL_NGRAM,
    NGRAM,
    changed,
)


def _indices(found: Imported) -> list[int]:
    return [s.prompt_index for s in found.samples]


def test_vllm_bench_requests_paired_by_position_only_when_input_lengths_agree(
    tmp_path: Path,
) -> None:
    found = [vllm_bench.read(BASE, "baseline"), vllm_bench.read(NGRAM, "ngram")]
    paired, note = pair_prompts(found)
    assert paired and _indices(found[0]) == _indices(found[1]) == list(range(12))
    assert "paired by position" in note and "same input length" in note

    def longer(data: dict[str, Any]) -> None:
        data["input_lens"][4] += 1

    other = vllm_bench.read(changed(NGRAM, tmp_path / "n.json", longer), "ngram")
    found = [vllm_bench.read(BASE, "baseline"), other]
    paired, note = pair_prompts(found)
    assert not paired and not set(_indices(found[0])) & set(_indices(found[1]))  # nothing paired
    assert "not paired by prompt (the input length differs between the files)" in note
    data, _ = compose.from_imports(found, "x", "X", FASTER, allow_mismatch=True)
    assert data.provenance is not None and note in data.provenance.notes
    # unpaired, the verdict compares requests: it is still judged, on the unit it says it used
    assert data.verdict is not None and data.verdict.unit == "request"
    assert data.verdict.per_class["all"].n_baseline == 12


def test_guidellm_requests_paired_by_prompt_text(tmp_path: Path) -> None:
    texts: dict[str, set[tuple[str, int]]] = {}

    def reorder_and_change_one(data: dict[str, Any]) -> None:
        requests = data["benchmarks"][0]["requests"]
        requests["successful"].reverse()  # completion order need not be the prompts' order
        args = json.loads(requests["successful"][0]["request_args"])
        args["body"]["prompt"] += " and something else"
        requests["successful"][0]["request_args"] = json.dumps(args)

    def prompts(found: Imported, path: Path) -> None:
        for sample, req in zip(
            found.samples,
            json.loads(path.read_text())["benchmarks"][0]["requests"]["successful"],
            strict=True,
        ):
            texts.setdefault(json.loads(req["request_args"])["body"]["prompt"], set()).add(
                (found.variant, sample.prompt_index)
            )

    ngram_path = changed(GL_NGRAM, tmp_path / "n.json", reorder_and_change_one)
    found = [guidellm.read(GL_BASE, "baseline"), guidellm.read(ngram_path, "ngram")]
    paired, note = pair_prompts(found)
    assert paired
    prompts(found[0], GL_BASE)
    prompts(found[1], ngram_path)
    # one index per text, the same in both variants; the changed text has an index of its own
    indices = {text: {i for _, i in seen} for text, seen in texts.items()}
    assert all(len(i) == 1 for i in indices.values())
    assert len(set().union(*indices.values())) == 13
    assert sum(len(seen) == 2 for seen in texts.values()) == 11
    assert note == "requests paired by prompt text: 11 prompt(s) sent to every variant, of 13"
