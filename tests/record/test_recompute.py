"""`kbgen record --check`: every number recomputed from the samples file, edits caught."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.kb import store
from kbgen.kb.models import Hypothesis, Load, Record
from kbgen.kb.problems import dotted
from kbgen.record import command, evidence, figures, recompute, verdict, write
from kbgen.run.folder import RunFolder
from tests.conftest import REPO
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
    assert saved.verdict is not None and saved.verdict.method == "samples"
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


LOADS: list[Load] = [{"concurrency": 1}, {"concurrency": 8}]
HYPOTHESIS = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=0.05
)


def _sweep_record(folder: Path) -> Path:
    """A sweep (k3 and k5 at concurrency 1 and 8, synthetic samples of known truth) recorded as
    `kbgen record` writes one: its samples file beside it, every figure computed from it."""
    found = sweeps.evidence(
        np.random.default_rng(1), {"k3": [0.5, -0.3], "k5": [-0.1, 0.0]}, LOADS, prompts=12
    )
    packed = evidence.samples_bytes(found)
    (folder / "sweep.samples.jsonl.gz").write_bytes(packed)
    record = Record.model_validate(
        {
            "schema_version": 1,
            "id": "sweep",
            "title": "n-gram k3 and k5 at two loads",
            "status": "concluded",
            "created": "2026-12-02",
            "concluded": "2026-12-02",
            "hypothesis": HYPOTHESIS.model_dump(),
            "config": {
                "engine": {"name": "vllm"},
                "model": {"name": "m"},
                "hardware": {},
                "baseline": "base",
                "variants": {"base": {}, "k3": {}, "k5": {}},
            },
            "workload": {"prompt_suite": "s", "classes": ["coding"], "loads": LOADS},
            "measurements": figures.measurements(found),
            "by_load": figures.by_load(found),
            "verdict": verdict.judge(found, HYPOTHESIS, []),
            "provenance": {"source": "measured"},
            "raw_samples": {
                "path": "sweep.samples.jsonl.gz",
                "sha256": hashlib.sha256(packed).hexdigest(),
            },
        }
    )
    path = folder / "sweep.yaml"
    store.save(store.new_document(path, record.model_dump(mode="json", exclude_none=True)))
    return path


def test_check_recomputes_a_sweep_s_cells_and_best_and_locates_an_edit(records: Path) -> None:
    """A cell's outcome and a load's best configuration edited by hand: each reported at its
    own line of the YAML, by its dotted path."""
    path = _sweep_record(records)
    assert recompute.recompute(path) == []
    doc = store.load_document(path)
    cells = doc.data["verdict"]["cells"]
    at = next(i for i, c in enumerate(cells) if (c["variant"], c["load"]) == ("k3", LOADS[1]))
    assert cells[at]["outcome"] == "refuted"
    cells[at]["outcome"] = "supported"
    doc.data["verdict"]["best"][1]["variant"] = "k3"
    doc.data["verdict"]["best"][0]["probability_best"] = 0.5
    store.save(doc)
    tree = store.load_document(path).data
    problems = {p.field: p for p in recompute.recompute(path)}
    assert problems.keys() == {
        f"verdict.cells[{at}].outcome",
        "verdict.best[1].variant",
        "verdict.best[0].probability_best",
    }
    edited: list[list[str | int]] = [
        ["verdict", "cells", at, "outcome"],
        ["verdict", "best", 1, "variant"],
        ["verdict", "best", 0, "probability_best"],
    ]
    for loc in edited:
        [problem] = [p for p in problems.values() if p.field == dotted(loc)]
        assert problem.line == store.line_of(tree, loc)[0]
    assert problems[f"verdict.cells[{at}].outcome"].message == (
        "is 'supported', but its samples give 'refuted'"
    )


def test_update_rewrites_what_differs_and_keeps_the_rest(tmp_path: Path) -> None:
    """`kbgen record --check --update`: a hand-edited effect is rewritten from the samples, the
    record's comments stay, and a current record is left as it was."""
    from kbgen.record import command

    source = REPO / "records" / "2026-12-01-ngram-vs-baseline-h200-c1.yaml"
    shutil.copy(source, tmp_path / source.name)
    samples = source.name.replace(".yaml", ".samples.jsonl.gz")
    shutil.copy(source.parent / samples, tmp_path / samples)
    path = tmp_path / source.name
    assert command.check([path], update=True) == [f"{path}: current"]
    text = path.read_text()
    path.write_text("# kept\n" + text.replace("effect: -0.5", "effect: -0.9", 1))
    assert command.check([path], update=True) == [f"{path}: updated verdict"]
    assert path.read_text() == "# kept\n" + text
    assert command.check([path]) == ["ok: every number on 1 record(s) matches its samples"]


def test_update_leaves_a_current_record_without_a_sweep_as_it_was(tmp_path: Path) -> None:
    """A record without a sweep leaves the verdict's sweep fields out and keys its prompts'
    effects by number: compared as the model writes them, it is current, and nothing is
    rewritten (not the prompts' numbers as strings, not empty sweep fields)."""
    from kbgen.record import command

    source = REPO / "records" / "2026-12-07-trace-replay.yaml"
    for name in (source.name, source.name.replace(".yaml", ".samples.jsonl.gz")):
        shutil.copy(source.parent / name, tmp_path / name)
    path = tmp_path / source.name
    text = path.read_text()
    assert "cells:" not in text and "\n        0: " in text
    assert command.check([path], update=True) == [f"{path}: current"]
    assert path.read_text() == text
