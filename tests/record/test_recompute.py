"""`kbgen record --check`: every number recomputed from the samples file, edits caught."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kbgen.bench.runs import RunFolder
from kbgen.cli import cli
from kbgen.kb import store
from kbgen.record import command, recompute, write
from tests.support import sweeps
from tests.support.records import load_record
from tests.support.runs import make_run


def test_check_recomputes_every_number_and_catches_an_edit(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    path = command.record_run(run, records)
    ok = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert ok.exit_code == 0, ok.output
    doc = store.load_document(path)
    doc.data["measurements"]["ngram"]["math"]["ttft_ms"]["mean"] = 1.0
    doc.data["verdict"]["per_class"]["coding"]["outcome"] = "supported"
    store.save(doc)
    bad = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert bad.exit_code == 1
    lines = bad.stderr.splitlines()
    assert any(
        re.match(
            rf"{re.escape(str(path))}:\d+: measurements\.ngram\.math\.ttft_ms\.mean: "
            r"is 1\.0, but its samples give",
            line,
        )
        for line in lines
    )
    assert any("verdict.per_class.coding.outcome: is 'supported'" in line for line in lines)


def test_check_refuses_a_tampered_samples_file(tmp_path: Path, records: Path) -> None:
    path = command.record_run(
        make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}), records
    )
    samples = path.parent / f"{path.stem}.samples.jsonl.gz"
    samples.write_bytes(gzip.compress(b"{}\n"))
    [problem] = recompute.recompute(path)
    assert problem.field == "raw_samples.sha256" and problem.line is not None


def test_check_recomputes_a_sweep_s_front(records: Path) -> None:
    """A sweep's throughput-latency points are figures like any other: recomputed from the
    samples file, an edit caught."""
    truth = {"base": [10.0, 14.0], "k3": [8.0, 16.0]}
    evidence = sweeps.closed_loop(
        np.random.default_rng(1), truth, [{"concurrency": 1}, {"concurrency": 4}]
    )
    record = sweeps.record(evidence, samples=True)
    assert record.verdict is not None and len(record.verdict.pareto) == 4
    path = write.write(records / "a-sweep.yaml", record, evidence)
    assert recompute.recompute(path) == []
    doc = store.load_document(path)
    doc.data["verdict"]["pareto"][1]["on_front"] = not record.verdict.pareto[1].on_front
    doc.data["verdict"]["pareto"][2]["tpot_ms_p99"] = 1.0
    store.save(doc)
    found = {p.field for p in recompute.recompute(path)}
    assert found == {"verdict.pareto[1].on_front", "verdict.pareto[2].tpot_ms_p99"}


@pytest.mark.integration
def test_reference_flow_on_a_real_vllm(tiny_run: Path, records: Path) -> None:
    """bench (the shared real run) -> record -> validate clean -> check recomputes it."""
    made = CliRunner().invoke(cli, ["record", str(tiny_run), "--records", str(records)])
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    valid = CliRunner().invoke(cli, ["validate", str(records), "--records", str(records)])
    assert valid.exit_code == 0, valid.output
    saved = load_record(path)
    assert saved.verdict is not None and saved.verdict.method == "bootstrap"
    samples = RunFolder.open(tiny_run).samples()
    for cls in ("coding", "math"):
        verdict = saved.verdict.per_class[cls]
        assert verdict.ci_low is not None and verdict.ci_high is not None
        assert verdict.ci_low <= verdict.effect <= verdict.ci_high
        # a request whose tokens all arrived in one read has no decode rate (a loaded machine
        # can do that); n counts exactly the requests that have one
        with_rate = [
            s
            for s in samples
            if s.variant == "baseline" and s.prompt_class == cls and "decode_tok_s" in s.metrics()
        ]
        assert verdict.n_baseline == len(with_rate) >= 2  # 6 requests, some maybe in one read
    assert saved.config is not None and saved.config.engine.version == "0.32.0"
    ngram = saved.spec_decode["ngram"]
    assert ngram.drafts and isinstance(ngram.mean_acceptance_length, float)  # a figure, no range
    assert ngram.mean_acceptance_length > 1
    checked = CliRunner().invoke(cli, ["record", "--check", str(path)])
    assert checked.exit_code == 0, checked.output


def test_check_reads_no_samples_through_a_folder_linked_outside(
    tmp_path: Path, records: Path
) -> None:
    path = command.record_run(
        make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}), records
    )
    samples = path.parent / f"{path.stem}.samples.jsonl.gz"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    samples.rename(elsewhere / samples.name)  # the right bytes, but outside the records
    (records / "linked").symlink_to(elsewhere)
    doc = store.load_document(path)
    doc.data["raw_samples"]["path"] = f"linked/{samples.name}"
    store.save(doc)
    [problem] = recompute.recompute(path)
    assert problem.field == "raw_samples.path" and problem.line is not None
    assert problem.message == f"a symlink to a file outside {records}; not read"


def test_check_recomputes_the_steady_state_of_a_concurrent_run(
    tmp_path: Path, records: Path
) -> None:
    """A run at concurrency 4 (its requests overlap): the record has a steady-state throughput
    per class, the samples file carries the concurrency, and an edit of the figure is caught."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    spec = run / "spec.yaml"
    spec.write_text(spec.read_text().replace("  repeats: 3\n", "  repeats: 3\n  concurrency: 4\n"))
    path = command.record_run(run, records)
    record = load_record(path)
    assert record.workload is not None and record.workload.concurrency == 4
    steady = record.measurements["ngram"]["math"]["steady_output_tok_s"]
    assert recompute.recompute(path) == []
    doc = store.load_document(path)
    doc.data["measurements"]["ngram"]["math"]["steady_output_tok_s"]["mean"] = steady.mean * 2
    store.save(doc)
    [problem] = recompute.recompute(path)
    assert problem.field == "measurements.ngram.math.steady_output_tok_s.mean"
