"""Writing a record: a planned one is filled in with the author's words kept; a concluded one
is never overwritten."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from kbgen import __version__
from kbgen.cli import cli
from kbgen.record import command
from tests.support.golden import assert_golden, golden_path
from tests.support.records import load_record
from tests.support.runs import make_run

PLANNED = """\
# my planned experiment
schema_version: 1
id: 2026-11-29-my-plan
title: My own title
status: planned
created: 2026-11-28
context: |
  The author's context.
hypothesis:
  statement: ngram is faster by a lot
  primary_metric: decode_tok_s
  direction: increase
  minimum_effect: 0.5   # the author's bar, not the spec's
resolves: []   # filled in by the record
tags: [mine]
"""


def test_filling_a_planned_record_keeps_the_author_s_words(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0}, prompts=8)
    planned = records / "2026-11-29-my-plan.yaml"
    planned.write_text(PLANNED)
    result = CliRunner().invoke(cli, ["record", str(run), "--into", str(planned)])
    assert result.exit_code == 0, result.output
    text = planned.read_text()
    assert text.startswith("# my planned experiment\n")
    assert re.search(r"minimum_effect: 0.5 +# the author's bar, not the spec's", text)
    assert "title: My own title" in text and "The author's context." in text
    saved = load_record(planned)
    assert saved.status == "concluded" and saved.created.isoformat() == "2026-11-28"
    # +25% clears the spec's 5% but not the author's 50%: the record's hypothesis rules
    assert saved.verdict is not None and saved.verdict.outcome == "refuted"
    assert any("hypothesis differs" in c for c in saved.verdict.caveats)
    assert saved.tags == ["mine", "synthetic"] and saved.resolves == ["next-steps#test-ngram"]


def test_a_concluded_record_is_not_overwritten(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    first = command.record_run(run, records)
    second = command.record_run(run, records)  # a second record, never a clobbered first
    assert first != second and second.stem == f"{first.stem}-2"
    result = CliRunner().invoke(cli, ["record", str(run), "--into", str(first)])
    assert result.exit_code == 2 and "only a planned or running record" in result.stderr


FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"


def _stable(text: str) -> str:
    """A written record with what changes from day to day and run to run replaced."""
    text = text.replace(dt.date.today().isoformat(), "TODAY").replace(__version__, "VERSION")
    text = re.sub(r"recorded_at: .*", "recorded_at: NOW", text)
    return re.sub(r"\d{8}T\d{6}-", "STAMP-", text)


def _same_as_golden(name: str, path: Path) -> None:
    """Written records are byte-identical to the golden ones."""
    samples = path.parent / f"{path.stem}.samples.jsonl.gz"
    content = _stable(path.read_text())
    if samples.exists():  # its digest is on the record: the samples file is byte-identical too
        assert hashlib.sha256(samples.read_bytes()).hexdigest() in content
    assert_golden(content, golden_path(name))


def test_a_new_record_is_written_in_the_model_s_order(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0})
    meta = json.loads((run / "run.json").read_text())  # a GPU machine outside git
    meta["hardware"].update(accelerator="NVIDIA H200", count=8, accelerator_memory_gib=140.4)
    meta["hardware"]["host"] = meta["host_label"] = "h200-lab"
    meta["software"] = {
        "kbgen": "0.1.0",
        "python": "3.12.3",
        "torch": "2.11.0",
        "cuda": "13.0",
        "driver": "570.133.20",
    }
    meta["prompt_suite"] = "bench/prompts/seed.jsonl"
    meta["prompt_suite_sha256"] = "ab" * 32
    meta["git_sha"] = None
    # kbgen installed there with `pip install git+URL@REV`: its commit from direct_url.json
    meta["kbgen"] = {"version": "0.1.0", "commit": "5e" * 20, "commit_from": "direct_url"}
    (run / "run.json").write_text(json.dumps(meta))
    _same_as_golden("record__from-run.yaml", command.record_run(run, records))


def test_a_filled_in_record_keeps_its_own_order(tmp_path: Path, records: Path) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    planned = records / "2026-11-29-my-plan.yaml"
    planned.write_text(PLANNED)
    _same_as_golden("record__filled-in.yaml", command.record_run(run, records, into=planned))


def test_an_imported_record_is_written_in_the_model_s_order(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        (Path(__file__).parents[2] / "bench/experiments/ngram-vs-baseline.yaml").read_text()
    )
    pairs = [f"baseline={FIXTURES / 'vllm-bench-baseline.json'}"]
    pairs.append(f"ngram={FIXTURES / 'vllm-bench-ngram.json'}")
    path = command.record_import("vllm-bench", pairs, tmp_path, None, spec)
    _same_as_golden("record__imported.yaml", path)


# Starts `kbgen record`'s real CLI in a process of its own once kbgen is imported, and holds it
# until the file named second exists: both writers then reach the record at the same moment.
RACER = """
import os, sys, time
from kbgen.cli import cli
import kbgen.record.command
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.001)
cli(sys.argv[2:], prog_name="kbgen")
"""


def test_two_writers_into_one_record_leave_one_writer_s_record_and_samples(
    tmp_path: Path, records: Path
) -> None:
    """Each round: two processes fill the same planned record from different runs. One wins,
    and its record checks against its own samples; the other changed nothing (exit 3 when it
    raced the winner, 2 when it came after it and found the record concluded)."""
    runs = {
        "fast": make_run(tmp_path / "fast", {"baseline": 60.0, "ngram": 75.0}, prompts=8),
        "slow": make_run(tmp_path / "slow", {"baseline": 60.0, "ngram": 45.0}, prompts=8),
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    raced = 0
    for round_ in range(4):
        planned = records / "2026-11-29-my-plan.yaml"
        for leftover in records.glob("2026-11-29-my-plan*"):
            leftover.unlink()
        planned.write_text(PLANNED)
        go = tmp_path / f"go-{round_}"
        racers = {
            name: subprocess.Popen(
                [sys.executable, "-c", RACER, str(go), "record", str(run), "--into", str(planned)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, run in runs.items()
        }
        go.touch()
        codes = {name: p.wait(timeout=60) for name, p in racers.items()}
        outputs = {name: p.communicate() for name, p in racers.items()}
        [winner] = [name for name, code in codes.items() if code == 0]
        [(loser, code)] = [(n, c) for n, c in codes.items() if n != winner]
        assert code in (2, 3), outputs[loser]
        raced += code == 3
        if code == 3:
            assert "changed on disk since it was read" in outputs[loser][1]
        saved = load_record(planned)
        assert saved.provenance is not None and saved.provenance.run == runs[winner].name
        check = CliRunner().invoke(cli, ["record", "--check", str(planned)])
        assert check.exit_code == 0, check.output  # the winner's numbers, the winner's samples
        assert sorted(p.name for p in records.iterdir()) == [
            "2026-11-29-my-plan.samples.jsonl.gz",
            "2026-11-29-my-plan.yaml",
            "plans",
        ]
    assert raced, "the writers never raced: the test proved nothing"
