"""The command line: exit codes, one line per problem, no tracebacks, documented commands."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from tests.conftest import RECORD
from tests.support import replicated, special


def run(*args: str, cwd: Path | None = None) -> click.testing.Result:
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, list(args))
    with runner.isolated_filesystem(temp_dir=cwd):
        return runner.invoke(cli, list(args))


def test_validate_clean(kb_dir: Path) -> None:
    result = run("validate", str(kb_dir), "--root", str(kb_dir))
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 record(s) and 1 plan(s) valid\n"


def test_validate_reports_one_line_per_problem(kb_dir: Path) -> None:
    bad = kb_dir / "ngram-test.yaml"
    bad.write_text(
        RECORD.replace("mean: 62.6", "mean: x").replace("status: concluded", "status: ok")
    )
    result = run("validate", str(kb_dir), "--root", str(kb_dir))
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{bad}:5: status: Input should be")
    assert lines[1].startswith(f"{bad}:32: measurements.baseline.coding.decode_tok_s.mean: ")
    assert lines[2] == "2 problems in 1 file(s)"
    assert "Traceback" not in result.output


def test_a_problem_named_like_a_secret_keeps_its_line_and_message(kb_dir: Path) -> None:
    bad = kb_dir / "auth-proxy.yaml"  # `auth-proxy.yaml:5:` and `auth: …` are no secrets
    bad.write_text(RECORD.replace("status: concluded", "status: concluded\nauth: x"))
    result = run("validate", str(bad), "--root", str(kb_dir))
    assert result.exit_code == 1
    assert (
        result.stderr.splitlines()[0]
        == f"{bad}:6: auth: unknown field (not in the schema; check its spelling)"
    )


def test_validate_one_file_resolves_references_against_the_root(kb_dir: Path) -> None:
    result = run("validate", str(kb_dir / "ngram-test.yaml"), "--root", str(kb_dir))
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 record(s) and 0 plan(s) valid\n"


def test_validate_only_reports_the_files_asked_for(kb_dir: Path) -> None:
    (kb_dir / "other.yaml").write_text("broken: [\n")
    result = run("validate", str(kb_dir / "ngram-test.yaml"), "--root", str(kb_dir))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args",
    [["validate", "no/such/path"], ["frobnicate"], ["new"], ["--bogus"], ["list", "nowhere"]],
    ids=["missing-path", "unknown-command", "missing-argument", "unknown-option", "no-folder"],
)
def test_usage_errors_exit_2_in_one_line(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert "Traceback" not in result.output


def test_list(kb_dir: Path) -> None:
    result = run("list", str(kb_dir))
    assert result.exit_code == 0, result.output
    header, row, plan = result.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "VERDICT", "TITLE"]
    assert row.split()[:3] == ["ngram-test", "concluded", "refuted"]
    assert plan == "plan next-steps: Next steps (2 tasks)"


def test_new_scaffolds_a_valid_planned_record(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    first = run("new", "Is n-gram faster?", "--dir", str(folder))
    second = run("new", "Is n-gram faster?", "--dir", str(folder))
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    a, b = Path(first.stdout.strip()), Path(second.stdout.strip())
    assert a.name.endswith("-is-n-gram-faster.yaml") and a != b
    assert b.stem.startswith(a.stem + "-")
    assert run("validate", str(folder), "--root", str(folder)).exit_code == 0


def test_new_refuses_an_overlong_title(tmp_path: Path) -> None:
    result = run("new", "x" * 300, "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert "title" in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_schema_writes_once(tmp_path: Path) -> None:
    out = tmp_path / "schema"
    first = run("schema", "--out", str(out))
    second = run("schema", "--out", str(out))
    assert first.stdout.count("wrote") == 3 and second.stdout.count("unchanged") == 3
    record = json.loads((out / "record.schema.json").read_text())
    assert record["title"] == "Record" and "hypothesis" in record["properties"]


def test_committed_schema_is_current(tmp_path: Path) -> None:
    repo_schema = Path(__file__).resolve().parents[1] / "docs" / "schema"
    run("schema", "--out", str(tmp_path))
    for name in ("record.schema.json", "plan.schema.json", "experiment.schema.json"):
        assert (repo_schema / name).read_text() == (tmp_path / name).read_text(), (
            f"docs/schema/{name} is stale: run `kbgen schema`"
        )


def _commands(group: click.Group) -> list[str]:
    return sorted(group.commands)


@pytest.mark.parametrize("name", _commands(cli))
def test_every_command_has_help_with_an_example(name: str) -> None:
    result = run(name, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    assert f"kbgen {name}" in result.stdout.split("Example:")[1]


@pytest.mark.parametrize("command", ["validate", "render", "list", "check"])
@pytest.mark.parametrize("kind", sorted(set(special.SPECIAL) - {"folder"}))
def test_a_special_file_among_the_records_is_one_line_to_every_command(
    kb_dir: Path, kind: str, command: str
) -> None:
    path = kb_dir / "special.yaml"
    message = special.make(kind, path)
    args = {"validate": ["--root"], "render": ["--records"], "check": ["--records"]}
    with special.deadline(10):
        result = run(command, *args.get(command, []), str(kb_dir))
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]
    assert len(lines) == 2 and lines[0].startswith(f"{path}: {message}"), result.stderr
    assert lines[1] == "1 problem in 1 file(s)"


def test_list_stale_names_the_records_a_newer_engine_version_re_measured(tmp_path: Path) -> None:
    records = replicated.knowledge_base(tmp_path)
    result = run("list", "--stale", str(records))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{rid}  measured on 0.32.0; contradiction measured the same setup on 0.33.0  "
        f"({records / rid}.yaml)"
        for rid in ("first", "replication")
    ]
    (records / "contradiction.yaml").unlink()
    none = run("list", "--stale", str(records))
    assert none.exit_code == 0 and none.stdout == "" and none.stderr == "no stale records\n"
