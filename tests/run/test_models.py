"""The run folder's JSON files as models: a folder as kbgen writes it loads and writes back byte
for byte, one of another format is refused in one line, and a run.json that does not fit is one
located problem, not a traceback."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbgen.bench import totals as run_totals
from kbgen.cli import cli
from kbgen.run.folder import RunFolder
from kbgen.run.models import FORMAT, RunMeta, RunTotals
from kbgen.run.spec import load as load_spec

RUN = Path(__file__).parents[1] / "fixtures" / "run-folders" / "fake-two-attempts"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A copy of a run folder as kbgen bench wrote it (see the fixture's README)."""
    return Path(shutil.copytree(RUN, tmp_path / RUN.name))


def test_a_run_json_loads_and_writes_back_byte_for_byte(run: Path) -> None:
    folder = RunFolder.open(run)
    meta = folder.meta()
    assert (meta.format, meta.status, meta.attempts, meta.hardware) == (FORMAT, "complete", 2, None)
    assert meta.finished is not None and meta.order == [(0, "a"), (0, "b")]
    [first, second] = meta.variants["a"].windows
    assert (first.attempt, second.attempt, second.after) == (0, 1, "metrics/a-1-after.prom")
    folder.write_meta(meta)
    assert (run / "run.json").read_bytes() == (RUN / "run.json").read_bytes()


def test_a_run_s_totals_are_its_summary_json(run: Path) -> None:
    """summary.json loads and writes back byte for byte, and is what the folder's samples and
    scrapes give when recomputed."""
    folder = RunFolder.open(run)
    written = RunTotals.model_validate_json((RUN / "summary.json").read_text())
    folder.write_totals(written)
    assert (run / "summary.json").read_bytes() == (RUN / "summary.json").read_bytes()
    totals = run_totals.totals(load_spec(folder.spec_path), folder)
    assert totals.model_dump(exclude_unset=True) == written.model_dump(exclude_unset=True)
    assert totals.variants["a"].requests_ok == 4 and totals.variants["a"].requests_failed == 0
    assert all(w.window_s for v in totals.variants.values() for w in v.windows)


@pytest.mark.parametrize(
    ("format", "said"),
    [
        (None, "missing: the folder was written by a kbgen from before run-folder formats"),
        (FORMAT - 1, f"{FORMAT - 1}: the folder was written by an older kbgen"),
        (FORMAT + 1, f"{FORMAT + 1}: not a run-folder format this kbgen knows (a newer kbgen?)"),
    ],
    ids=["missing", "older", "newer"],
)
@pytest.mark.parametrize("command", ["bench-resume", "record"])
def test_every_reader_refuses_a_folder_of_another_format_in_one_line(
    run: Path, tmp_path: Path, format: int | None, said: str, command: str
) -> None:
    meta = json.loads((run / "run.json").read_text())
    if format is None:
        del meta["format"]
    else:
        meta["format"] = format
    (run / "run.json").write_text(json.dumps(meta, indent=2))
    written = (run / "run.json").read_bytes()
    args = (
        ["bench", "--resume", str(run)]
        if command == "bench-resume"
        else ["record", str(run), "--records", str(tmp_path / "records")]
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    [problem, count] = result.stderr.splitlines()
    line = "" if format is None else ":2"
    assert problem == (
        f"{run / 'run.json'}{line}: format: {said}; this kbgen reads format {FORMAT} only: make "
        "the record with the kbgen that wrote the folder, or run the experiment again"
    )
    assert count == "1 problem in 1 file(s)"
    assert (run / "run.json").read_bytes() == written  # left as it was
    assert not (tmp_path / "records").exists()


def test_a_run_json_keeps_what_it_was_given_and_nothing_more(tmp_path: Path) -> None:
    written = json.loads((RUN / "run.json").read_text())
    del written["finished"]  # a run not complete yet has none
    written["hardware"] = {"cpu": "EPYC", "cpu_count": 128, "host": "gpu-1", "count": 8}
    meta = RunMeta.model_validate(written)
    assert meta.hardware is not None and meta.hardware.accelerator is None
    assert meta.model_dump(mode="json", exclude_unset=True) == written
    assert list(meta.model_dump(exclude_unset=True)["hardware"]) == list(written["hardware"])


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("attempts", r"attempts: Input should be a valid integer"),
        ("status", r"status: Input should be 'running'"),
        ("start_ns", r"variants\.a\.windows\[0\]\.start_ns: "),
        ("max_model_len", r"variants\.a\.max_model_len: "),
    ],
)
@pytest.mark.parametrize("command", ["bench-resume", "record"])
def test_a_bad_run_json_is_one_located_line_on_the_command_line(
    run: Path, tmp_path: Path, key: str, where: str, command: str
) -> None:
    """The first `key` of run.json given a string: one problem, at its line and field."""
    text = (run / "run.json").read_text()
    found = re.search(rf'"{key}": [^,\n]+', text)
    assert found is not None
    line = text[: found.start()].count("\n") + 1
    (run / "run.json").write_text(text[: found.start()] + f'"{key}": "many"' + text[found.end() :])
    broken = (run / "run.json").read_bytes()
    args = (
        ["bench", "--resume", str(run)]
        if command == "bench-resume"
        else ["record", str(run), "--records", str(tmp_path / "records")]
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # handled, not a traceback
    [problem, count] = result.stderr.splitlines()
    assert problem.startswith(f"{run / 'run.json'}:{line}: ") and count == "1 problem in 1 file(s)"
    assert re.search(where, problem), problem
    assert (run / "run.json").read_bytes() == broken  # left as it was


def test_torn_run_json_is_located_on_the_command_line(run: Path) -> None:
    (run / "run.json").write_text((RUN / "run.json").read_text()[:200])
    result = CliRunner().invoke(cli, ["bench", "--resume", str(run)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines()[0].startswith(f"{run / 'run.json'}:")
    assert "not JSON" in result.stderr
