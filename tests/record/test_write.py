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
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbgen import __version__, redact
from kbgen.cli import cli
from kbgen.errors import InvalidInput
from kbgen.kb import loading as kb
from kbgen.kb import store
from kbgen.kb.documents import load_file
from kbgen.kb.models import ModelInfo, Record
from kbgen.record import command, compose
from kbgen.record.write import write
from kbgen.run.folder import RunFolder
from tests.conftest import PLAN
from tests.support.golden import assert_golden, golden_path
from tests.support.imports import BASE, NGRAM, SPEC, summary_only
from tests.support.properties import examples
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
    """With the spec of the experiment the files ran: its variants' settings, server arguments
    and hardware, the files' concurrency, rate, endpoint and token counts."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.read_text())
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


@pytest.mark.slow  # over 10 s: not in the fast lane
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


# `record` never writes what `kbgen validate` (or `kbgen check`) would refuse: the bytes it is
# about to write are read back as `validate` reads them first, and any problem refuses the
# whole write, with every file left as it was.


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry below `folder` as it is: a file's bytes, a symlink's target."""
    return {
        str(path.relative_to(folder)): (
            f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes()
        )
        for path in sorted(folder.rglob("*"))
        if path.is_symlink() or path.is_file()
    }


def _planned(records: Path, name: str = "2026-11-29-my-plan", extra: str = "") -> Path:
    path = records / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PLANNED + extra)
    return path


def _model_named(run: Path, name: str) -> None:
    """The run as if its server had given the model this name (run.json is a file on disk)."""
    meta = json.loads((run / "run.json").read_text())
    for variant in meta["variants"].values():
        variant["model"] = name
    (run / "run.json").write_text(json.dumps(meta))


def _symlinked(records: Path) -> Path:
    real = _planned(records / "real")
    link = records / real.name
    link.symlink_to(real)
    return link


def _beside_samples(records: Path) -> Path:
    (records / f"2026-11-29-my-plan{compose.SAMPLES_SUFFIX}").write_bytes(b"another record's")
    return _planned(records)


def _without_plan(records: Path) -> Path:
    (records / "plans" / "next-steps.yaml").unlink()
    return _planned(records)


FILE = r"\S+/records/"
REFUSED_INTO = {  # setting up an --into target (given the records folder); what is refused
    "an id that is not the file name": (
        lambda r: _planned(r, "2026-11-29-other"),
        rf"{FILE}2026-11-29-other\.yaml:3: id: '2026-11-29-my-plan' must equal the file name",
    ),
    "a file name that is no id": (
        lambda r: _planned(r, "My plan"),
        rf"{FILE}My plan\.yaml: id: String should match pattern",
    ),
    "a record in a plans/ folder": (
        lambda r: _planned(r / "plans"),
        rf"{FILE}plans/2026-11-29-my-plan\.yaml: in a plans/ folder, where every file is a plan",
    ),
    "a record it relates to that does not exist": (
        lambda r: _planned(r, extra="related: [no-such-record]\n"),
        rf"{FILE}2026-11-29-my-plan\.yaml:\d+: related\[0\]: no record 'no-such-record'",
    ),
    "a record it supersedes that does not exist": (
        lambda r: _planned(r, extra="supersedes: [no-such-record]\n"),
        rf"{FILE}2026-11-29-my-plan\.yaml:\d+: supersedes\[0\]: no record 'no-such-record'",
    ),
    "a plan the run's spec resolves that does not exist": (
        _without_plan,
        rf"{FILE}2026-11-29-my-plan\.yaml:\d+: resolves\[0\]: no plan 'next-steps'",
    ),
    "an id another record below the folder has": (
        lambda r: (_planned(r / "2025"), _planned(r))[1],
        rf"{FILE}2026-11-29-my-plan\.yaml:3: id: '2026-11-29-my-plan' is also the id of "
        rf"{FILE}2025/2026-11-29-my-plan\.yaml",
    ),
    "a symlink to a record of the same name in a subfolder": (
        _symlinked,
        rf"{FILE}2026-11-29-my-plan\.yaml:3: id: .* is also the id of {FILE}real/2026-11",
    ),
    "a samples file beside it that is not its own": (
        _beside_samples,
        rf"{FILE}2026-11-29-my-plan\.yaml:\d+: raw_samples\.path: 2026-11-29-my-plan\.samples"
        r"\.jsonl\.gz exists and is not this record's samples",
    ),
}


@pytest.mark.parametrize(("setup", "refused"), REFUSED_INTO.values(), ids=list(REFUSED_INTO))
def test_record_into_a_target_validate_would_refuse_writes_nothing(
    tmp_path: Path, records: Path, setup: Callable[[Path], Path], refused: str
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    into = setup(records)
    before = _tree(tmp_path)
    result = CliRunner().invoke(
        cli, ["record", str(run), "--into", str(into), "--records", str(records)]
    )
    assert result.exit_code == 1, result.output
    assert re.fullmatch(rf"{refused}.*\n1 problem in 1 file\(s\)\n", result.stderr), result.stderr
    assert _tree(tmp_path) == before


REFUSED_NAMES = {  # a model name from the server (run.json) that YAML cannot write as it is
    "a next-line character (U+0085), read back as a line break": (
        "org/m\x85rev",
        r"2026-11-29-my-plan\.yaml:\d+: config\.model\.name: holds a character that YAML does "
        r"not keep as it is",
    ),
}


@pytest.mark.parametrize(("name", "refused"), REFUSED_NAMES.values(), ids=list(REFUSED_NAMES))
def test_a_record_that_would_not_read_back_as_composed_is_not_written(
    tmp_path: Path, records: Path, name: str, refused: str
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    _model_named(run, name)
    into = _planned(records)
    before = _tree(tmp_path)
    result = CliRunner().invoke(cli, ["record", str(run), "--into", str(into)])
    assert result.exit_code == 1, result.output
    assert re.search(
        rf"{refused}.*\(in the record as it would be written; nothing written\)\n"
        r"1 problem in 1 file\(s\)\n",
        result.stderr,
    ), result.stderr
    assert _tree(tmp_path) == before


def test_a_control_character_in_a_text_of_several_lines_is_written_escaped(
    tmp_path: Path, records: Path
) -> None:
    """Not a literal block, where it would be written raw and not read back: quoted, escaped."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    _model_named(run, "org/m\nrev \x10")
    into = _planned(records)
    result = CliRunner().invoke(cli, ["record", str(run), "--into", str(into)])
    assert result.exit_code == 0, result.output
    saved = load_record(into)
    assert saved.config is not None and saved.config.model.name == "org/m\nrev \x10"


@pytest.mark.parametrize(
    ("folder", "refused"),
    [
        ("plans", r"plans/\S+\.yaml: in a plans/ folder, where every file is a plan"),
        (".", r"\S+\.yaml:\d+: resolves\[0\]: no plan 'next-steps'"),  # no plan in this folder
    ],
    ids=["into a plans folder", "resolving a plan the folder lacks"],
)
def test_a_new_record_validate_would_refuse_is_not_written(
    tmp_path: Path, folder: str, refused: str
) -> None:
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    records = tmp_path / "records"
    (records / "plans").mkdir(parents=True)
    before = _tree(tmp_path)
    result = CliRunner().invoke(cli, ["record", str(run), "--records", str(records / folder)])
    assert result.exit_code == 1 and re.search(refused, result.stderr), result.output
    assert _tree(tmp_path) == before


def test_a_new_record_takes_a_name_no_record_or_samples_file_has(
    tmp_path: Path, records: Path
) -> None:
    """Its name is kbgen's to choose: one taken below the folder, or whose samples file is there
    (a record renamed keeps its samples' name), is passed over, not refused."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    stem = f"{dt.date.today().isoformat()}-synthetic"
    (records / "2025").mkdir()
    (records / "2025" / f"{stem}.yaml").write_text(PLANNED.replace("2026-11-29-my-plan", stem))
    (records / f"{stem}-2{compose.SAMPLES_SUFFIX}").write_bytes(b"a renamed record's")
    path = command.record_run(run, records)
    assert path.name == f"{stem}-3.yaml"
    assert (records / f"{stem}-2{compose.SAMPLES_SUFFIX}").read_bytes() == b"a renamed record's"
    assert (
        CliRunner().invoke(cli, ["validate", "--no-cache", "--records", str(records)]).exit_code
        == 0
    )


STALE_VERDICT = """\
verdict:
  outcome: supported
  variant: ngram
  method: bootstrap
  rule: an earlier try
  rationale: The author's reasons.
  per_class:
    oldclass: {outcome: supported, effect: 0.2}
  reasons: [an earlier reason]
raw_samples: {path: an-earlier.samples.jsonl.gz}
"""


def test_a_planned_record_s_verdict_and_samples_are_replaced_not_merged(
    tmp_path: Path, records: Path
) -> None:
    """Merged key by key, a class or a reason of the planned verdict would outlive the run and
    `kbgen check` find the numbers edited by hand; only the author's rationale is kept."""
    run = make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 75.0})
    into = _planned(records, extra=STALE_VERDICT)
    command.record_run(run, records, into=into)
    saved = load_file(into)
    assert isinstance(saved, Record) and saved.verdict is not None
    assert set(saved.verdict.per_class) == {"coding", "math"}
    assert saved.verdict.rationale == "The author's reasons."
    assert "an earlier reason" not in saved.verdict.reasons
    assert CliRunner().invoke(cli, ["record", "--check", str(into)]).exit_code == 0


def test_an_import_without_samples_drops_the_planned_record_s_samples(
    tmp_path: Path, records: Path
) -> None:
    into = _planned(records, extra=STALE_VERDICT)
    pairs = [f"baseline={summary_only(BASE, tmp_path / 'b.json')}"]
    pairs.append(f"ngram={summary_only(NGRAM, tmp_path / 'n.json')}")
    command.record_import("vllm-bench", pairs, records, into, None, allow_summary_only=True)
    saved = load_file(into)
    assert isinstance(saved, Record) and saved.raw_samples is None
    assert saved.verdict is not None and saved.verdict.method == "summary"


# Any text a run can carry into a record: every code point (lone surrogates too), and often
# mostly the ones YAML treats specially: line breaks of every kind, control characters, a
# byte-order mark, indicators.
SPECIAL = "\n\r\t\x00\x10\x1f\x7f\x85\u2028\u2029\ufeff\ud800 :#'\"-?|>&*!%@`{[,ab"
TEXT = st.text(st.sampled_from(SPECIAL), min_size=1, max_size=12) | st.text(
    st.characters(codec=None, exclude_categories=()), min_size=1, max_size=40
)


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> Record:
    root = tmp_path_factory.mktemp("composed")
    run = RunFolder.open(make_run(root / "runs", {"baseline": 60.0, "ngram": 75.0}))
    return compose.from_run(run, "2026-11-29-my-plan")[0]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(title=TEXT, model=TEXT, planned=st.booleans())
def test_whatever_the_text_the_record_written_is_one_validate_accepts(
    composed: Record, title: str, model: str, planned: bool
) -> None:
    """Written, the record validates and reads back as composed (secrets masked); refused, no
    file changed."""
    config = composed.config
    assert config is not None
    updated = {"config": config.model_copy(update={"model": ModelInfo(name=model)})}
    record = composed.model_copy(update={"title": title, **updated})
    with tempfile.TemporaryDirectory() as folder:
        records = Path(folder)
        (records / "plans").mkdir()
        (records / "plans" / "next-steps.yaml").write_text(PLAN)
        path = _planned(records) if planned else records / f"{record.id}.yaml"
        read = store.load_document(path) if planned else None
        before = _tree(records)
        try:
            write(path, record, None, read, records)
        except InvalidInput as exc:
            assert [p.path for p in exc.problems] == [path] * len(exc.problems)
            assert _tree(records) == before
            return
        assert kb.load_facts([records]).problems == []
        saved = load_file(path)
        assert isinstance(saved, Record) and saved.config is not None
        assert saved.config.model.name == redact.data({"n": model})["n"]
        if not planned:  # filling in keeps the author's title
            assert saved.title == redact.data({"t": title})["t"]
