"""Imported requests given classes from the prompt file the tool sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput
from kbgen.record import compose
from kbgen.record.importers import guidellm, vllm_bench
from kbgen.record.importers.classes import classify
from kbgen.record.importers.imported import no_split
from tests.support.imports import (
    BY_POSITION,
    CHAT_BASE,
    CHAT_NGRAM,
    FASTER,
    GL_BASE,
    GL_NGRAM,
    PROMPTS,
    changed,
    chat_lines,
    suite_file,
    summary_only,
)


@pytest.mark.parametrize(("base", "ngram", "prompts"), BY_POSITION)
def test_classes_by_position(base: Path, ngram: Path, prompts: Path) -> None:
    found = [vllm_bench.read(base, "baseline"), vllm_bench.read(ngram, "ngram")]
    suite = classify(found, prompts)
    lines = [json.loads(line)["class"] for line in prompts.read_text().splitlines()]
    for imported in found:
        assert [s.prompt_class for s in imported.samples] == lines
    assert suite.classes == list(dict.fromkeys(lines))


def test_without_prompts_an_import_has_one_class() -> None:
    found = [vllm_bench.read(CHAT_BASE, "baseline"), vllm_bench.read(CHAT_NGRAM, "ngram")]
    data, _ = compose.from_imports(found, "x", "X", FASTER)
    assert data.workload is not None
    assert data.workload.classes == ["all"] and data.workload.prompt_suite_sha256 is None
    assert data.provenance is not None and no_split("ngram") in data.provenance.notes


def _guidellm_sent(texts: list[str]) -> Callable[[dict[str, Any]], None]:
    """The real report's requests as if they had sent `texts`, one each (chat messages for
    every other request: GuideLLM sends either body)."""

    def change(data: dict[str, Any]) -> None:
        for i, (request, text) in enumerate(
            zip(data["benchmarks"][0]["requests"]["successful"], texts, strict=True)
        ):
            args = json.loads(request["request_args"])
            body = args["body"]
            body.pop("prompt")
            if i % 2:
                body["messages"] = [{"role": "user", "content": [{"type": "text", "text": text}]}]
            else:
                body["prompt"] = text
            request["request_args"] = json.dumps(args)

    return change


def test_guidellm_classes_by_prompt_text(tmp_path: Path) -> None:
    suite = [json.loads(line) for line in PROMPTS.read_text().splitlines()]
    sent = [p["prompt"] for p in reversed(suite[:12])]  # not the file's order: matched by text
    path = changed(GL_BASE, tmp_path / "g.json", _guidellm_sent(sent))
    found = [guidellm.read(path, "baseline"), guidellm.read(path, "ngram")]
    classified = classify(found, PROMPTS)
    expected = [p["class"] for p in reversed(suite[:12])]
    assert [s.prompt_class for s in found[0].samples] == expected
    assert classified.classes == ["coding", "explanatory"]
    assert f"baseline: classes from {PROMPTS.name}, matched by prompt text" in "\n".join(
        found[0].notes
    )
    data, _ = compose.from_imports(found, "x", "X", FASTER, suite=classified)
    assert data.workload is not None and data.workload.classes == ["coding", "explanatory"]
    assert data.verdict is not None and list(data.verdict.per_class) == ["coding", "explanatory"]


@pytest.mark.parametrize(
    ("files", "suite", "message"),
    [
        (
            (CHAT_BASE, CHAT_NGRAM),
            lambda: chat_lines()[:-1],
            r"vllm-bench-chat-baseline\.json: 16 requests, but \S+p\.jsonl holds 15 prompts: "
            r"matching by position needs one request per prompt, in the file's order",
        ),
        (
            (GL_BASE, GL_NGRAM),
            chat_lines,
            r"guidellm-baseline\.json: the prompt of request 0 is not in \S+p\.jsonl "
            r"\(12 of 12 requests' prompts are not\)",
        ),
        (
            (CHAT_BASE, CHAT_NGRAM),
            lambda: [*chat_lines()[:-1], '{"class": "Coding!", "prompt": "x"}'],
            r"p\.jsonl:16: class: 'Coding!' is no class name",
        ),
        ((CHAT_BASE, CHAT_NGRAM), list, r"p\.jsonl: no prompts"),
        (
            (CHAT_BASE, CHAT_NGRAM),
            lambda: [*chat_lines()[:-1], "{oops"],
            r"p\.jsonl:16: not JSON",
        ),
    ],
    ids=["count-differs", "text-not-found", "class-not-a-slug", "empty", "not-json"],
)
def test_a_prompt_file_that_does_not_match_is_one_line(
    tmp_path: Path, files: tuple[Path, Path], suite: Callable[[], list[str]], message: str
) -> None:
    importer = guidellm.read if files[0] == GL_BASE else vllm_bench.read
    found = [importer(files[0], "baseline"), importer(files[1], "ngram")]
    with pytest.raises(InvalidInput, match=message) as info:
        classify(found, suite_file(tmp_path, suite()))
    assert len(info.value.problems) == 1 and "\n" not in str(info.value)


def test_a_text_under_two_classes_cannot_be_matched_by_text(tmp_path: Path) -> None:
    suite = [json.loads(line) for line in chat_lines()]
    sent = [p["prompt"] for p in suite[:12]]
    path = changed(GL_BASE, tmp_path / "g.json", _guidellm_sent(sent))
    twice = [*chat_lines(), json.dumps({"class": "other", "prompt": sent[3]})]
    found = [guidellm.read(path, "baseline")]
    with pytest.raises(InvalidInput, match=r"the prompt of request 3 is in \S+ under 2 classes"):
        classify(found, suite_file(tmp_path, twice))
    # by position the same file is fine: each line has its own class
    chat = [vllm_bench.read(CHAT_BASE, "baseline")]
    assert classify(chat, suite_file(tmp_path, [*chat_lines()[:-1], twice[-1]])).classes


def test_a_summary_only_import_cannot_take_classes(tmp_path: Path) -> None:
    found = [vllm_bench.read(summary_only(CHAT_BASE, tmp_path / "b.json"), "baseline")]
    with pytest.raises(InvalidInput, match=r"b\.json: no per-request results in the order sent"):
        classify(found, PROMPTS)


def test_a_guidellm_request_without_its_prompt_text_cannot_be_matched(tmp_path: Path) -> None:
    suite = [json.loads(line) for line in chat_lines()]
    sent = _guidellm_sent([p["prompt"] for p in suite[:12]])

    def one_without(data: dict[str, Any]) -> None:
        sent(data)
        data["benchmarks"][0]["requests"]["successful"][2]["request_args"] = "{not json"

    found = [guidellm.read(changed(GL_BASE, tmp_path / "g.json", one_without), "baseline")]
    with pytest.raises(InvalidInput, match=r"g\.json: request 2 kept no prompt text to find in"):
        classify(found, PROMPTS)
