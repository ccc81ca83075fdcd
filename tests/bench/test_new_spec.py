"""`kbgen new --spec`: a commented spec beside the records folder, valid as written, that
`kbgen bench --estimate` reads once its prompts are there."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.run import spec


def test_a_new_spec_is_valid_commented_and_runs_once_its_prompts_are_written(
    tmp_path: Path,
) -> None:
    records = tmp_path / "records"
    result = CliRunner().invoke(
        cli, ["new", "--spec", "N-gram on Qwen3", "--records", str(records)]
    )
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())
    assert path == tmp_path / "experiments" / "n-gram-on-qwen3.yaml"
    text = path.read_text()
    assert "#   kbgen bench experiments/n-gram-on-qwen3.yaml" in text  # what to run next
    loaded = spec.load(path)
    assert (loaded.id, loaded.title, loaded.workload.rounds) == (
        "n-gram-on-qwen3",
        "N-gram on Qwen3",
        2,
    )
    assert loaded.path(loaded.workload.prompts or "") == path.parent.resolve() / "prompts.jsonl"
    lines = [json.dumps({"class": "coding", "prompt": f"p{i}"}) for i in range(8)]
    (path.parent / "prompts.jsonl").write_text("\n".join(lines) + "\n")
    estimate = CliRunner().invoke(
        cli, ["bench", str(path), "--estimate", "--records", str(records)]
    )
    assert estimate.exit_code == 0, estimate.output


def test_a_spec_whose_name_is_taken_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    records = tmp_path / "records"
    taken = tmp_path / "experiments" / "mine.yaml"
    taken.parent.mkdir()
    taken.write_text("# mine\n")
    result = CliRunner().invoke(
        cli, ["new", "--spec", "x", "--id", "mine", "--records", str(records)]
    )
    assert result.exit_code == 2
    assert "already exists; not overwritten" in result.stderr
    assert taken.read_text() == "# mine\n"
