"""The run folder's JSON files as models: a folder written before them loads and writes back
byte for byte, and a run.json that does not fit is one located problem, not a traceback."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbgen.bench import driver
from kbgen.bench.run_models import RunMeta, RunTotals
from kbgen.bench.runs import RunFolder
from kbgen.bench.spec import load as load_spec
from kbgen.cli import cli

OLD_RUN = Path(__file__).parents[1] / "fixtures" / "run-folders" / "fake-two-attempts"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A copy of a run folder written before the models (see the fixture's README)."""
    return Path(shutil.copytree(OLD_RUN, tmp_path / OLD_RUN.name))


def test_an_old_run_json_loads_and_writes_back_byte_for_byte(old_run: Path) -> None:
    folder = RunFolder.open(old_run)
    meta = folder.meta()
    assert (meta.status, meta.attempts, meta.hardware, meta.finished is not None) == (
        "complete",
        2,
        None,
        True,
    )
    [first, second] = meta.variants["a"].windows
    assert (first.attempt, second.attempt, second.after) == (0, 1, "metrics/a-1-after.prom")
    folder.write_meta(meta)
    assert (old_run / "run.json").read_bytes() == (OLD_RUN / "run.json").read_bytes()


def test_an_old_run_s_totals_are_its_summary_json_plus_the_window_lengths(old_run: Path) -> None:
    """An old summary.json loads and writes back byte for byte; recomputed from the old run, the
    totals are the same figures, plus each window's length (added later, for throughput)."""
    folder = RunFolder.open(old_run)
    old = RunTotals.model_validate_json((OLD_RUN / "summary.json").read_text())
    folder.write_totals(old)
    assert (old_run / "summary.json").read_bytes() == (OLD_RUN / "summary.json").read_bytes()
    totals = driver.totals(load_spec(folder.spec_path), folder)
    windows = [w for v in totals.variants.values() for w in v.windows]
    assert windows and all(w.window_s is not None and w.window_s > 0 for w in windows)
    stripped = RunTotals.model_validate(
        {
            "spec_id": totals.spec_id,
            "variants": {
                name: {
                    **v.model_dump(),
                    "windows": [w.model_dump(exclude={"window_s"}) for w in v.windows],
                }
                for name, v in totals.variants.items()
            },
        }
    )
    assert stripped.model_dump() == old.model_dump()
    assert totals.variants["a"].requests_ok == 4 and totals.variants["a"].requests_failed == 0


def test_a_run_json_keeps_what_it_was_given_and_nothing_more(tmp_path: Path) -> None:
    written = json.loads((OLD_RUN / "run.json").read_text())
    del written["finished"]  # a run not complete yet has none
    written["hardware"] = {"cpu": "EPYC", "cpu_count": 128, "host": "gpu-1", "count": 8}
    meta = RunMeta.model_validate(written)
    assert meta.hardware is not None and meta.hardware.accelerator is None
    assert meta.model_dump(exclude_unset=True) == written
    assert list(meta.model_dump(exclude_unset=True)["hardware"]) == list(written["hardware"])


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ('"attempts": 2', r"run\.json:8: attempts: Input should be a valid integer"),
        ('"status": "complete"', r"run\.json:3: status: Input should be 'running'"),
        ('"start_ns": 1750417071430', r"run\.json:21: variants\.a\.windows\[0\]\.start_ns: "),
        ('"max_model_len": 2048', r"run\.json:17: variants\.a\.max_model_len: "),
    ],
    ids=["attempts", "status", "window", "variant"],
)
@pytest.mark.parametrize("command", ["bench-resume", "record"])
def test_a_bad_run_json_is_one_located_line_on_the_command_line(
    old_run: Path, tmp_path: Path, change: str, where: str, command: str
) -> None:
    text = (old_run / "run.json").read_text()
    key = change.split(":")[0]
    assert change in text
    (old_run / "run.json").write_text(text.replace(change, f'{key}: "many"', 1))
    broken = (old_run / "run.json").read_bytes()
    args = (
        ["bench", "--resume", str(old_run)]
        if command == "bench-resume"
        else ["record", str(old_run), "--records", str(tmp_path / "records")]
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # handled, not a traceback
    [problem, count] = result.stderr.splitlines()
    assert problem.startswith(str(old_run / "run.json")) and count == "1 problem in 1 file(s)"
    assert re.search(where, problem), problem
    assert (old_run / "run.json").read_bytes() == broken  # left as it was


def test_torn_run_json_is_located_on_the_command_line(old_run: Path) -> None:
    (old_run / "run.json").write_text((OLD_RUN / "run.json").read_text()[:200])
    result = CliRunner().invoke(cli, ["bench", "--resume", str(old_run)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines()[0].startswith(f"{old_run / 'run.json'}:")
    assert "not JSON" in result.stderr
