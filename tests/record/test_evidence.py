"""The samples file beside a record: deterministic bytes, times relative to each send."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import InvalidInput
from kbgen.record import evidence as evidence_module
from kbgen.record.evidence import Evidence, read_samples, samples_bytes
from kbgen.run.counters import Counters
from tests.support import special
from tests.support.runs import make_sample


def test_samples_file_is_deterministic_and_round_trips() -> None:
    rng = random.Random(1)
    evidence = Evidence(
        "a",
        ["a", "b"],
        ["c"],
        [make_sample("a", "c", 0, 0, 50.0, rng), make_sample("b", "c", 0, 0, 40.0, rng)],
        {"b": [Counters(generation_tokens=64.0)]},
    )
    first, second = samples_bytes(evidence), samples_bytes(evidence)
    assert first == second
    lines = [json.loads(line) for line in gzip.decompress(first).decode().splitlines()]
    assert [line["kind"] for line in lines] == ["evidence", "window", "sample", "sample"]
    assert all(line["sent_ns"] == 0 for line in lines if line["kind"] == "sample")


def test_samples_file_reads_back_as_the_same_evidence(tmp_path: Path) -> None:
    rng = random.Random(2)
    sample = make_sample("a", "c", 0, 0, 50.0, rng)
    evidence = Evidence("a", ["a", "b"], ["c"], [sample], {"b": [Counters(generation_tokens=64.0)]})
    path = tmp_path / "x.samples.jsonl.gz"
    path.write_bytes(samples_bytes(evidence))
    back = read_samples(path)
    assert (back.baseline, back.variants, back.classes) == ("a", ["a", "b"], ["c"])
    assert back.windows == evidence.windows and back.challenger == "b"
    assert back.samples[0].metrics() == sample.metrics()  # relative times, same figures


def test_a_committed_samples_file_is_written_back_byte_for_byte() -> None:
    path = Path(__file__).parents[2] / "records" / "2026-11-29-ngram-vs-baseline.samples.jsonl.gz"
    evidence = read_samples(path)
    assert evidence.windows["ngram"][0].spec_decode is not None
    assert evidence.windows["baseline"][0].spec_decode is None
    assert samples_bytes(evidence) == path.read_bytes()


def _packed(*lines: str) -> bytes:
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


HEADER = json.dumps({"kind": "evidence", "baseline": "a", "variants": ["a", "b"], "classes": []})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_packed(HEADER, '{"kind": "sample", "variant": 1}'), "x.gz:2: prompt_class: "),
        (_packed(HEADER, "{torn"), "x.gz:2: not a line of a samples file: Expecting"),
        (_packed(HEADER, "[]"), "x.gz:2: not a line of a samples file"),
        (_packed(HEADER, '{"kind": "other"}'), "x.gz:2: kind: unknown kind 'other'"),
        (_packed('{"kind": "evidence", "baseline": 1}'), "x.gz:1: baseline: "),
        (_packed(""), "x.gz:1: not a line of a samples file"),
        (b"not gzip", "x.gz: not a gzip file"),
        (_packed(HEADER)[:-12], "x.gz: a truncated gzip file"),
    ],
    ids=[
        "not-a-sample",
        "not-json",
        "not-an-object",
        "unknown-kind",
        "bad-header",
        "empty",
        "not-gzip",
        "truncated",
    ],
)
def test_a_bad_samples_file_is_located(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "x.gz").write_bytes(content)
    with pytest.raises(InvalidInput) as info:
        read_samples(tmp_path / "x.gz")
    assert any(str(p).startswith(f"{tmp_path}/{message}") for p in info.value.problems), str(
        info.value
    )


def test_a_samples_file_that_unpacks_past_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evidence_module, "MAX_SAMPLES_BYTES", 1000)
    (tmp_path / "x.gz").write_bytes(gzip.compress(b" " * 1001))  # 29 bytes packed
    with pytest.raises(InvalidInput, match=r"x\.gz: unpacks to more than 1,000 bytes"):
        read_samples(tmp_path / "x.gz")


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
def test_a_special_samples_file_is_one_located_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "kb" / "x.samples.jsonl.gz"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        read_samples(path)
    assert str(info.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"chunk_tokens": [True]}, "valid integer"),
        ({"chunk_tokens": [10**12]}, "chunk_tokens sum past"),  # one ITL value per token
        ({"chunk_ns": [10**30]}, "64 bits"),
        ({"output_tokens": -1}, "greater than or equal to 0"),
        ({"prompt_index": "3"}, "valid integer"),
        ({"sent_ns": 10**12}, "times out of order"),  # a negative TTFT
        ({"chunk_ns": [3, 2, *range(4, 34)]}, "times out of order"),  # a negative gap
        ({"done_ns": 1}, "times out of order"),
        ({"chunk_tokens": [1, 1]}, "chunk_tokens holds 2 counts for 32 chunk_ns"),
    ],
    ids=[
        *("bool-tokens", "a-trillion-tokens", "time-past-64-bits", "negative-output", "string"),
        *("sent-after-first-chunk", "chunks-out-of-order", "done-before-chunks", "short-counts"),
    ],
)
def test_a_sample_with_impossible_numbers_is_a_located_error(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    sample = make_sample("a", "c", 0, 0, 50.0, random.Random(3))
    evidence = Evidence("a", ["a", "b"], ["c"], [sample])
    lines = gzip.decompress(samples_bytes(evidence)).decode().splitlines()
    entry = {**json.loads(lines[1]), **change}
    path = tmp_path / "x.samples.jsonl.gz"
    path.write_bytes(gzip.compress((lines[0] + "\n" + json.dumps(entry) + "\n").encode()))
    with pytest.raises(InvalidInput, match=message) as info:
        read_samples(path)
    assert str(info.value).startswith(f"{path}:2: ")
    assert len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize("line", ["[1, 2]", "7", '"sample"', "[" * 100_000 + "]" * 100_000])
def test_a_samples_line_of_another_shape_is_a_located_error(tmp_path: Path, line: str) -> None:
    evidence = Evidence("a", ["a", "b"], ["c"], [])
    header = gzip.decompress(samples_bytes(evidence)).decode().splitlines()[0]
    path = tmp_path / "x.samples.jsonl.gz"
    path.write_bytes(gzip.compress(f"{header}\n{line}\n".encode()))
    with pytest.raises(
        InvalidInput, match=r"x\.samples\.jsonl\.gz:2: not a line of a samples file"
    ):
        read_samples(path)


def test_the_prompts_groups_travel_with_the_samples_file(tmp_path: Path) -> None:
    """`kbgen record --check` decides by the same groups on any machine: they are in the
    samples file's header, not only in the prompt file."""
    from tests.record.test_verdict import experiment

    evidence = experiment({"coding": 0.3, "math": 0.3}, rounds=2)
    evidence.groups = {"coding": ["a", "a", None], "math": ["b"]}
    path = tmp_path / "x.samples.jsonl.gz"
    path.write_bytes(samples_bytes(evidence))
    assert read_samples(path).groups == evidence.groups
