"""The command line: exit codes, one line per problem, no tracebacks, documented commands."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.errors import (
    Conflict,
    KbgenError,
    Mismatch,
    ServerFailed,
    StoreError,
    TemplateError,
    UsageError,
)
from tests.conftest import PLAN, RECORD
from tests.support import replicated, special


def run(*args: str, cwd: Path | None = None) -> click.testing.Result:
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, list(args))
    with runner.isolated_filesystem(temp_dir=cwd):
        return runner.invoke(cli, list(args))


def test_validate_clean(kb_dir: Path) -> None:
    result = run("validate", str(kb_dir), "--records", str(kb_dir))
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 record(s) and 1 plan(s) valid\n"


def test_validate_reports_one_line_per_problem(kb_dir: Path) -> None:
    bad = kb_dir / "ngram-test.yaml"
    bad.write_text(
        RECORD.replace("mean: 62.6", "mean: x").replace("status: concluded", "status: ok")
    )
    result = run("validate", str(kb_dir), "--records", str(kb_dir))
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
    result = run("validate", str(bad), "--records", str(kb_dir))
    assert result.exit_code == 1
    assert (
        result.stderr.splitlines()[0]
        == f"{bad}:6: auth: unknown field (not in the schema; check its spelling)"
    )


def test_validate_one_file_resolves_references_against_the_root(kb_dir: Path) -> None:
    result = run("validate", str(kb_dir / "ngram-test.yaml"), "--records", str(kb_dir))
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 record(s) and 0 plan(s) valid\n"


def test_validate_only_reports_the_files_asked_for(kb_dir: Path) -> None:
    (kb_dir / "other.yaml").write_text("broken: [\n")
    result = run("validate", str(kb_dir / "ngram-test.yaml"), "--records", str(kb_dir))
    assert result.exit_code == 0, result.output


# --- one vocabulary: --records DIR, found from anywhere in the repository -----------------------

KNOWLEDGE_BASE_COMMANDS = ["check", "diff", "list", "new", "record", "render", "validate"]


@pytest.mark.parametrize("name", KNOWLEDGE_BASE_COMMANDS)
def test_every_command_on_the_knowledge_base_takes_it_as_records(name: str) -> None:
    command = cli.commands[name]
    [param] = [p for p in command.params if p.name == "records"]
    assert isinstance(param, click.Option) and param.opts == ["--records"]
    assert "the nearest records/" in str(param.show_default)  # found, not a fixed records/


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_no_command_names_the_knowledge_base_otherwise(name: str) -> None:
    """No second spelling: the old `validate --root`, `new --dir`, `list ROOT` are gone."""
    params = cli.commands[name].params
    spelt = {opt for p in params for opt in p.opts}
    assert spelt.isdisjoint({"--root", "--dir", "--folder", "--kb", "root", "folder"})


def _repository(tmp_path: Path) -> Path:
    """A repository (as `find_records` sees one) holding the test knowledge base, and a
    folder deep inside it."""
    (tmp_path / ".git").mkdir()
    records = tmp_path / "records"
    (records / "plans").mkdir(parents=True)
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    (records / "ngram-test.yaml").write_text(RECORD)
    deep = tmp_path / "bench" / "notes"
    deep.mkdir(parents=True)
    return deep


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["validate"], "ok: 1 record(s) and 1 plan(s) valid\n"),
        (["list"], "plan next-steps: Next steps (2 tasks)\n"),
        (["render"], "file(s) written\n"),
        (["new", "a title", "--id", "a-title"], "../../records/a-title.yaml\n"),
        (["new", "--plan", "More steps"], "../../records/plans/more-steps.yaml\n"),
    ],
    ids=lambda x: x[0] if isinstance(x, list) else "",
)
def test_a_command_run_deep_in_the_repository_finds_the_knowledge_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    monkeypatch.chdir(_repository(tmp_path))
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(said)
    assert sorted(p.name for p in Path.cwd().iterdir() if p.name != ".kbgen_cache") == []


def test_render_and_check_find_the_docs_beside_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(_repository(tmp_path))
    assert run("render").exit_code == 0
    assert (tmp_path / "docs" / "records" / "ngram-test.md").is_file()
    checked = run("check")  # the fixture's record has no samples: that is all it finds
    assert checked.stderr.splitlines()[1:] == [
        "../../records/ngram-test.yaml:1: raw_samples: a measured record without its samples",
        "1 problem in 1 file(s)",
    ]


def test_a_reader_with_no_knowledge_base_says_so(tmp_path: Path) -> None:
    """Outside a repository, only the current folder is looked in."""
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "ngram-test.yaml").write_text(RECORD)
    below = tmp_path / "elsewhere"
    below.mkdir()
    os.chdir(below)
    result = run("list")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: no knowledge base here: no records/ folder of YAML in this folder or above it "
        "in its repository; give --records DIR\n"
    )


# --- one error format and exit code per kind of problem ---------------------------------------

BROKEN = {"records/ngram-test.yaml": RECORD.replace("status: concluded", "status: ok")}
VALID = {"records/ngram-test.yaml": RECORD, "records/plans/next-steps.yaml": PLAN}
STATUS = r"records/ngram-test\.yaml:5: status: Input should be 'planned', "
BAD_SPEC = {"spec.yaml": "schema_version: 1\nid: x\n"}

PROMPTS = "".join(f'{{"class": "coding", "prompt": "p{i}"}}\n' for i in range(8))
EAGLE3_SPEC = """schema_version: 1
id: eagle3
title: a draft that is not there
hypothesis: {statement: s, primary_metric: decode_tok_s, direction: increase, minimum_effect: 0.05}
server: {launcher: process, command: [python3, -m, vllm.entrypoints.cli.main, serve], model: m}
baseline: baseline
variants:
  baseline: {}
  eagle3:
    speculative_config: {method: eagle3, model: ./no-draft, num_speculative_tokens: 3}
workload: {prompts: prompts.jsonl, classes: [coding]}
"""
MISSING_DRAFT = {"spec.yaml": EAGLE3_SPEC, "prompts.jsonl": PROMPTS}

# (files in the current folder, command line, exit code, the error's first line)
BAD_INPUTS = {
    "validate-no-such-path": ({}, ["validate", "no/such/path"], 2, "error: no/such/path: no such"),
    "validate-invalid": (BROKEN, ["validate"], 1, STATUS),
    "validate-old-option": (VALID, ["validate", "--root", "records"], 2, "error: No such option"),
    "list-no-knowledge-base": ({}, ["list"], 2, "error: no knowledge base here"),
    "list-invalid": (BROKEN, ["list"], 1, STATUS),
    "list-old-argument": (VALID, ["list", "records"], 2, "error: Got unexpected extra argument"),
    "new-no-title": ({}, ["new"], 2, r"error: Missing argument 'TITLE'\.$"),
    "new-bad-id": ({}, ["new", "t", "--id", "No Id"], 2, r"error: 'No Id' is no id: lower-case"),
    "new-taken-id": (
        VALID,
        ["new", "t", "--id", "ngram-test"],
        2,
        r"error: records/ngram-test\.yaml: already exists; not overwritten",
    ),
    "new-taken-plan": (
        VALID,
        ["new", "--plan", "Next steps"],
        2,
        r"error: records/plans/next-steps\.yaml: already exists",
    ),
    "new-disk-refuses": (
        {},
        ["new", "t", "--records", "/dev/null/records"],
        4,
        r"error: /dev/null/records/[^ ]+\.yaml: cannot write",
    ),
    "new-old-option": ({}, ["new", "t", "--dir", "records"], 2, r"error: No such option '--dir'"),
    "schema-out-is-a-file": (
        BAD_SPEC,
        ["schema", "--out", "spec.yaml"],
        2,
        r"error: Invalid value for '--out': Directory 'spec\.yaml' is a file\.$",
    ),
    "bench-nothing-to-run": ({}, ["bench"], 2, "error: give either a SPEC_FILE or --resume RUN"),
    "bench-invalid-spec": (BAD_SPEC, ["bench", "spec.yaml"], 1, "spec.yaml:1: baseline: required"),
    "bench-draft-with-tilde": (
        {**MISSING_DRAFT, "spec.yaml": EAGLE3_SPEC.replace("./no-draft", "~/draft")},
        ["bench", "spec.yaml"],
        1,
        r"spec\.yaml:10: variants\.eagle3\.speculative_config\.model: write ~/draft without ~",
    ),
    "bench-missing-draft": (
        MISSING_DRAFT,
        ["bench", "spec.yaml"],
        1,
        r"spec\.yaml:10: variants\.eagle3\.speculative_config\.model: no draft model at \./no",
    ),
    "record-no-run": ({}, ["record", "runs/none"], 2, r"error: runs/none: no such run folder$"),
    "record-check-invalid": (
        BROKEN,
        ["record", "--check", "records/ngram-test.yaml"],
        1,
        STATUS,
    ),
    "render-no-knowledge-base": ({}, ["render"], 2, "error: no knowledge base here"),
    "render-invalid": (BROKEN, ["render"], 1, STATUS),
    "diff-outside-git": (VALID, ["diff"], 2, r"error: records: not inside a git repository$"),
    "check-invalid": (BROKEN, ["check"], 1, STATUS),
    "check-no-such-records": (
        {},
        ["check", "--records", "nowhere"],
        2,
        r"error: Invalid value for '--records': Directory 'nowhere' does not exist\.$",
    ),
    "unknown-command": ({}, ["frobnicate"], 2, r"error: No such command 'frobnicate'\.$"),
    "unknown-option-of-kbgen": ({}, ["--bogus"], 2, r"error: No such option '--bogus'\.$"),
}
# a located problem: FILE:LINE: FIELD: MESSAGE, or FILE: MESSAGE where the input has no line
PROBLEM = re.compile(r"[^\s:]+(:\d+)?: (\S+: )?\S.*")


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_every_command_says_a_mistake_in_one_format_and_exit_code(
    tmp_path: Path, case: str
) -> None:
    """A usage error is one line, `error: MESSAGE`, exit 2; an invalid input one line per
    problem and their count, exit 1; the disk refusing, `error: MESSAGE`, exit 4. Never a
    traceback, and nothing on stdout."""
    given, args, code, first = BAD_INPUTS[case]
    for name, text in given.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    with special.deadline(20):
        result = run(*args)
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]
    assert re.match(first, lines[0]), lines
    if code == 1:
        *problems, count = lines
        assert all(PROBLEM.fullmatch(line) for line in problems), problems
        assert re.fullmatch(r"\d+ problems? in \d+ file\(s\)", count)
    else:
        assert len(lines) == 1, lines
    assert "Traceback" not in result.output


def test_a_draft_model_that_is_not_there_stops_the_bench_before_anything_is_written(
    tmp_path: Path,
) -> None:
    for name, text in MISSING_DRAFT.items():
        (tmp_path / name).write_text(text)
    result = run("bench", "spec.yaml")
    assert result.exit_code == 1 and "no draft model at ./no-draft" in result.stderr
    assert not (tmp_path / "runs").exists()  # no run folder, no server started
    (tmp_path / "no-draft").mkdir()
    started = run("bench", "spec.yaml")  # there now: its server is started (and fails: no vLLM)
    assert started.exit_code == 5, started.output
    assert "no draft model" not in started.stderr and (tmp_path / "runs").is_dir()


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UsageError("records: no such folder"), 2),
        (Conflict("records/x.yaml: changed on disk"), 3),
        (StoreError("records/x.yaml: cannot write: No space left on device"), 4),
        (ServerFailed("the server died"), 5),
        (TemplateError("templates/record.md.j2:2: unexpected '}'"), 1),
        (Mismatch("different engine versions"), 1),
    ],
    ids=lambda x: type(x).__name__ if isinstance(x, Exception) else str(x),
)
def test_each_kind_of_error_has_its_exit_code_and_one_line(
    monkeypatch: pytest.MonkeyPatch, error: KbgenError, code: int
) -> None:
    from kbgen.kb import scaffold

    def fails(*args: object, **kwargs: object) -> Path:
        raise error

    monkeypatch.setattr(scaffold, "new_record", fails)
    result = run("new", "a title")
    assert (result.exit_code, result.stderr) == (code, f"error: {error}\n")


def test_list(kb_dir: Path) -> None:
    result = run("list", "--records", str(kb_dir))
    assert result.exit_code == 0, result.output
    header, row, plan = result.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "VERDICT", "TITLE"]
    assert row.split()[:3] == ["ngram-test", "concluded", "refuted"]
    assert plan == "plan next-steps: Next steps (2 tasks)"


def test_new_scaffolds_a_valid_planned_record(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    first = run("new", "Is n-gram faster?", "--records", str(folder))
    second = run("new", "Is n-gram faster?", "--records", str(folder))
    assert first.exit_code == 0, first.output
    made = Path(first.stdout.strip())
    assert made.name.endswith("-is-n-gram-faster.yaml")
    # the same title the same day: refused, not renamed behind its author's back
    assert second.exit_code == 2 and second.stdout == ""
    assert (
        second.stderr
        == f"error: {made}: already exists; not overwritten (choose another id: --id)\n"
    )
    assert sorted(folder.iterdir()) == [made]
    assert run("validate", str(folder), "--records", str(folder)).exit_code == 0


def test_new_takes_an_id_and_starts_a_plan_that_validate_accepts(tmp_path: Path) -> None:
    records = tmp_path / "records"
    made = run("new", "EAGLE-3 on Kimi", "--id", "eagle3-kimi", "--records", str(records))
    plan = run("new", "--plan", "Next steps: EAGLE-3", "--records", str(records))
    assert made.stdout == f"{records / 'eagle3-kimi.yaml'}\n", made.output
    assert plan.stdout == f"{records / 'plans' / 'next-steps-eagle-3.yaml'}\n", plan.output
    record = records / "eagle3-kimi.yaml"
    record.write_text(
        record.read_text().replace("resolves: []", "resolves: [next-steps-eagle-3#first-step]")
    )
    checked = run("validate", "--records", str(records))
    assert checked.stdout == "ok: 1 record(s) and 1 plan(s) valid\n", checked.output


@pytest.mark.parametrize(
    "args",
    [["new", "t", "--id", "ngram-test"], ["new", "--plan", "t", "--id", "next-steps"]],
    ids=["record", "plan"],
)
def test_new_never_overwrites(kb_dir: Path, args: list[str]) -> None:
    before = {path: path.read_bytes() for path in kb_dir.rglob("*") if path.is_file()}
    result = run(*args, "--records", str(kb_dir))
    assert result.exit_code == 2 and "already exists; not overwritten" in result.stderr
    assert {path: path.read_bytes() for path in kb_dir.rglob("*") if path.is_file()} == before


def test_new_refuses_an_overlong_title(tmp_path: Path) -> None:
    result = run("new", "x" * 300, "--records", str(tmp_path))
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
    with special.deadline(10):
        result = run(command, "--records", str(kb_dir))
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]
    assert len(lines) == 2 and lines[0].startswith(f"{path}: {message}"), result.stderr
    assert lines[1] == "1 problem in 1 file(s)"


def test_list_stale_names_the_records_a_newer_engine_version_re_measured(tmp_path: Path) -> None:
    records = replicated.knowledge_base(tmp_path)
    result = run("list", "--stale", "--records", str(records))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{rid}  measured on 0.32.0; contradiction measured the same setup on 0.33.0  "
        f"({records / rid}.yaml)"
        for rid in ("first", "replication")
    ]
    (records / "contradiction.yaml").unlink()
    none = run("list", "--stale", "--records", str(records))
    assert none.exit_code == 0 and none.stdout == "" and none.stderr == "no stale records\n"
