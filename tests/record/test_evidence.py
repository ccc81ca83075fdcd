"""The samples file beside a record: deterministic bytes, times relative to each send."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from kbgen.bench.metrics import Counters
from kbgen.record.evidence import Evidence, read_samples, samples_bytes
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
