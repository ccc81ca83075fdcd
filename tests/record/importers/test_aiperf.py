"""AIPerf's per-request export as evidence: files written by the real AIPerf 0.13.0 against the
CPU vLLM (tiny model; baseline, and n-gram with 3 tokens), 8 requests each at 4 requests/s,
Poisson, its synthetic prompts of seed 3 (tests/fixtures/aiperf/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbgen.errors import InvalidInput
from kbgen.kb.models import Arrivals
from kbgen.record import compose, recompute, write
from kbgen.record.importers import IMPORTERS, aiperf
from tests.support.imports import FASTER

FIXTURES = Path(__file__).parents[2] / "fixtures" / "aiperf"


def test_a_request_keeps_its_scheduled_time_its_send_and_the_server_s_tokens() -> None:
    (found,) = aiperf.read(FIXTURES / "baseline", "baseline")
    assert found.tool == "AIPerf" and found.version == "0.13.0"
    assert len(found.samples) == 8 and all(s.ok and s.on_schedule for s in found.samples)
    lines = [
        json.loads(x) for x in (FIXTURES / "baseline" / aiperf.RECORDS).read_text().split("\n") if x
    ]
    first = min(lines, key=lambda r: r["metadata"]["credit_issued_ns"])
    s = found.samples[0]
    assert s.scheduled_ns == first["metadata"]["credit_issued_ns"]
    assert s.sent_ns == first["metadata"]["request_start_ns"]
    assert s.metrics()["ttft_sent_ms"] == pytest.approx(
        first["metrics"]["time_to_first_token"]["value"], abs=1e-3
    )
    assert s.output_tokens == first["metrics"]["usage_completion_tokens"]["value"] == 16
    assert s.chunk_tokens == []  # which chunk held how many: AIPerf does not say
    assert found.said == {
        "concurrency": None,
        "request_rate": 4.0,
        "arrivals": {"process": "poisson"},
        "api": "chat",
        "usage": "final",
        "max_tokens": 16,
        "temperature": 0,
        "ignore_eos": True,
    }
    assert found.prompt_evidence == "prompt text" and None not in found.prompt_keys
    assert IMPORTERS["aiperf"] is aiperf.read


def test_two_arms_of_the_same_prompts_are_paired_recorded_and_recomputed(tmp_path: Path) -> None:
    found = [
        *aiperf.read(FIXTURES / "baseline", "baseline"),
        *aiperf.read(FIXTURES / "ngram" / aiperf.RECORDS, "ngram"),  # the file names its folder
    ]
    record, evidence = compose.from_imports(found, "aiperf-ab", "AIPerf A/B", FASTER)
    assert record.workload is not None and record.workload.request_rate == 4.0
    assert record.workload.arrivals == Arrivals(process="poisson")
    assert record.verdict is not None and record.verdict.unit == "prompt"
    assert evidence is not None
    assert {s.prompt_index for s in evidence.samples} == set(range(8))  # the same 8 prompts
    assert [k.variant for k in record.schedule] == ["baseline", "ngram"]
    assert all(k.offered_rps == 4.0 for k in record.schedule)
    write.write(tmp_path / "aiperf-ab.yaml", record, evidence)
    assert recompute.recompute(tmp_path / "aiperf-ab.yaml") == []


def test_a_broken_line_is_named_with_its_line(tmp_path: Path) -> None:
    lines = (FIXTURES / "baseline" / aiperf.RECORDS).read_text().splitlines()
    broken = json.loads(lines[2])
    broken["metadata"]["request_start_ns"] = "soon"
    lines[2] = json.dumps(broken)
    (tmp_path / aiperf.RECORDS).write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInput) as caught:
        aiperf.read(tmp_path, "baseline")
    (problem,) = caught.value.problems
    assert problem.line == 3 and problem.field == "metadata.request_start_ns"
    (tmp_path / aiperf.RECORDS).write_text("")
    with pytest.raises(InvalidInput, match="0 profiling requests"):
        aiperf.read(tmp_path, "baseline")
