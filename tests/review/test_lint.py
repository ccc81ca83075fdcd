"""`kbgen check` on a real git repository: each class of problem it must refuse."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kbgen.cli import cli
from kbgen.kb import documents, loading, store
from kbgen.record.command import record_run
from tests.conftest import PLAN, RECORD
from tests.support import replicated, swept
from tests.support.git import commit, git
from tests.support.runs import make_run


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    """A repository whose knowledge base passes `kbgen check`: a measured record with samples."""
    repo = tmp_path / "clean"
    records = repo / "records"
    (records / "plans").mkdir(parents=True)
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    git(repo, "init", "-q", "-b", "main")
    record_run(make_run(tmp_path / "runs", {"baseline": 60.0, "ngram": 45.0}), records)
    assert check(records).exit_code == 0, check(records).output
    commit(repo, "a measured record")
    return records


def check(records: Path) -> Result:
    docs = records.parent / "docs"
    if not docs.exists():
        CliRunner().invoke(cli, ["render", "--records", str(records), "--docs", str(docs)])
    return CliRunner().invoke(cli, ["check", "--records", str(records), "--docs", str(docs)])


def _the_record(records: Path) -> Path:
    return next(records.glob("*.yaml"))


def _invalid(records: Path) -> str:
    path = _the_record(records)
    path.write_text(path.read_text().replace("status: concluded", "status: finished"))
    return rf"{path.name}:\d+: status: "


def _stale_docs(records: Path) -> str:
    page = records.parent / "docs" / "records" / f"{_the_record(records).stem}.md"
    page.write_text("hand edit\n")
    return rf"{page.name}: stale: run `kbgen render`"


def _id_collision(records: Path) -> str:
    repo = records.parent
    shared = RECORD.replace("id: ngram-test", "id: shared-id").replace(
        "source: measured", "source: reported"
    )
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "checkout", "-q", "main")
    (records / "shared-id.yaml").write_text(shared.replace("n-gram vs baseline", "main's"))
    commit(repo, "main adds shared-id")
    git(repo, "checkout", "-q", "feature")
    (records / "shared-id.yaml").write_text(shared)  # this branch's, not yet committed
    render_docs(records)
    return r"shared-id\.yaml:\d+: id: main also added a record 'shared-id' since this branch forked"


def _dangling_link(records: Path) -> str:
    path = _the_record(records)
    doc = store.load_document(path)
    doc.data["context"] = (
        "See [the old run](2026-01-01-no-such-record.md) for why, [the plan](../plans/"
        "next-steps.md#tasks), [review](../review.md) and [a site](https://example.org/x.md)."
    )
    store.save(doc)
    (records.parent / "docs" / "review.md").write_text("# a page of the site\n")
    render_docs(records)
    return rf"{path.name}:\d+: context: links to '2026-01-01-no-such-record.md', a page that"


def _missing_samples(records: Path) -> str:
    samples = next(records.glob("*.samples.jsonl.gz"))
    samples.unlink()
    return rf"{_the_record(records).name}:\d+: raw_samples\.path: {samples.name} is missing"


def _hand_edited(records: Path) -> str:
    path = _the_record(records)
    doc = store.load_document(path)
    doc.data["measurements"]["ngram"]["coding"]["decode_tok_s"]["mean"] = 99.0
    store.save(doc)
    render_docs(records)
    field = r"measurements\.ngram\.coding\.decode_tok_s\.mean"
    return rf"{path.name}:\d+: {field}: is 99\.0, but its samples give"


def _a_secret(records: Path) -> str:
    path = _the_record(records)
    doc = store.load_document(path)
    doc.data["context"] = "Served with HF_TOKEN=hf_Qx7Tr2Lp9Zw4Kd8Vn3Bs6Fm1 exported, 512 tokens."
    store.save(doc)
    render_docs(records)
    return rf"{path.name}:\d+: context: looks like a secret"


def render_docs(records: Path) -> None:
    docs = records.parent / "docs"
    CliRunner().invoke(cli, ["render", "--records", str(records), "--docs", str(docs)])


@pytest.mark.parametrize(
    "mistake",
    [
        _invalid,
        _stale_docs,
        _id_collision,
        _dangling_link,
        _missing_samples,
        _hand_edited,
        _a_secret,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
def test_check_catches_each_class_of_problem(clean: Path, mistake: Callable[[Path], str]) -> None:
    pattern = mistake(clean)
    result = check(clean)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert any(re.search(pattern, line) for line in lines), lines
    assert lines[-1].startswith("1 problem in 1 file"), lines  # that one, and nothing else


def test_check_outside_git_still_checks_the_rest(clean: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(clean.parent, copy, ignore=shutil.ignore_patterns(".git"))
    result = check(copy / "records")
    assert result.exit_code == 0, result.output
    assert "note: not compared with a main branch" in result.stderr


def test_check_refuses_a_main_branch_that_does_not_exist(clean: Path) -> None:
    docs = clean.parent / "docs"
    render_docs(clean)
    args = ["check", "--records", str(clean), "--docs", str(docs), "--main", "mian"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and result.stderr == "error: unknown git revision 'mian'\n"


def test_numbers_are_recomputed_for_changed_records_unless_every_record(clean: Path) -> None:
    _hand_edited(clean)
    commit(clean.parent, "a hand edit that reached main")
    docs = clean.parent / "docs"
    args = ["check", "--records", str(clean), "--docs", str(docs)]
    quick = CliRunner().invoke(cli, args)
    assert quick.exit_code == 0, quick.output  # unchanged since the fork: not recomputed
    assert "numbers recomputed from samples for the 0 record file(s) whose" in quick.stderr
    full = CliRunner().invoke(cli, [*args, "--every-record"])
    assert full.exit_code == 1 and "decode_tok_s.mean: is 99.0" in full.stderr


def test_an_edit_of_a_record_s_words_recomputes_nothing_an_edit_of_a_number_does(
    clean: Path,
) -> None:
    _hand_edited(clean)  # wrong numbers on main (checked there, trusted here)
    commit(clean.parent, "a hand edit that reached main")
    path = _the_record(clean)
    doc = store.load_document(path)
    doc.data["title"] = "A better title"
    doc.data["decision"] = "Keep n-gram off, as [the plan](../plans/next-steps.md) says."
    doc.data["verdict"]["rationale"] = "Slower in every class."
    store.save(doc)
    render_docs(clean)
    words = check(clean)
    assert words.exit_code == 0, words.output
    assert "for the 0 record file(s) whose numbers or samples changed" in words.stderr
    doc = store.load_document(path)
    doc.data["verdict"]["caveats"] = [*doc.data["verdict"]["caveats"], "one more caveat"]
    store.save(doc)
    render_docs(clean)
    number = check(clean)  # not the author's words alone: recomputed, the old edit found
    assert number.exit_code == 1 and "decode_tok_s.mean: is 99.0" in number.stderr
    assert "for the 1 record file(s) whose numbers or samples changed" in number.stderr


def test_check_sees_a_changed_samples_file_under_any_name(clean: Path) -> None:
    path = next(clean.glob("*.yaml"))
    samples = next(clean.glob("*.samples.jsonl.gz"))
    (clean / "samples").mkdir()
    moved = clean / "samples" / "run.jsonl.gz"
    samples.rename(moved)
    doc = store.load_document(path)
    doc.data["raw_samples"]["path"] = "samples/run.jsonl.gz"
    store.save(doc)
    render_docs(clean)
    commit(clean.parent, "samples in a folder of their own")
    moved.write_bytes(b"not the samples")  # the branch replaces them: their record is changed
    result = check(clean)
    assert result.exit_code == 1
    assert "raw_samples.sha256: run.jsonl.gz does not match it" in result.stderr


def test_contradicting_records_are_a_warning_and_with_strict_an_error(tmp_path: Path) -> None:
    records = replicated.knowledge_base(tmp_path)
    render_docs(records)
    base = ["check", "--records", str(records), "--docs", str(tmp_path / "docs")]
    warned = CliRunner().invoke(cli, base)
    assert warned.exit_code == 0, warned.output
    assert warned.stdout.strip().endswith("; 2 warning(s)")
    warnings = [line for line in warned.stderr.splitlines() if line.startswith("warning: ")]
    for older, newer in sorted(replicated.CONTRADICTIONS):
        expected = (
            rf"^warning: {records}/{newer}\.yaml:\d+: verdict\.per_class\.coding: contradicts "
            rf"{older} \({records}/{older}\.yaml\) in class coding \({older} vs this record: "
            r"refuted vs supported\)"
        )
        assert sum(bool(re.search(expected, line)) for line in warnings) == 1, warnings
    assert len(warnings) == len(replicated.CONTRADICTIONS)
    strict = CliRunner().invoke(cli, [*base, "--strict"])
    assert strict.exit_code == 1
    assert strict.stderr.splitlines()[-1] == "2 problems in 1 file(s)"
    # marking the odd one out superseded settles it: no warning left
    odd = records / "contradiction.yaml"
    odd.write_text(odd.read_text().replace("status: concluded", "status: superseded"))
    render_docs(records)
    settled = CliRunner().invoke(cli, [*base, "--strict"])
    assert settled.exit_code == 0 and "warning" not in settled.output, settled.output


def test_a_sweep_s_contradicted_cell_is_a_warning_at_its_cells(tmp_path: Path) -> None:
    records = swept.knowledge_base(tmp_path)
    render_docs(records)
    result = CliRunner().invoke(
        cli, ["check", "--records", str(records), "--docs", str(tmp_path / "docs")]
    )
    assert result.exit_code == 0, result.output
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert re.search(
        rf"^warning: {records}/sweep\.yaml:\d+: verdict\.cells: contradicts ab-k3-c8 "
        rf"\({records}/ab-k3-c8\.yaml\) in k3 at concurrency 8, class coding \(ab-k3-c8 vs this "
        r"record: supported vs refuted\)",
        warning,
    ), warning


def test_a_step_of_work_passes_check_without_samples_and_ticks_its_task(clean: Path) -> None:
    import yaml

    from tests.kb.test_models import STEP

    step = {**STEP, "id": "2026-12-03-collect", "resolves": ["next-steps#train-draft"]}
    (clean / "2026-12-03-collect.yaml").write_text(yaml.safe_dump(step, sort_keys=False))
    docs = clean.parent / "docs"
    CliRunner().invoke(cli, ["render", "--records", str(clean), "--docs", str(docs)])
    result = check(clean)  # measured, and no samples: a step measured no arms
    assert result.exit_code == 0, result.output
    plan = (docs / "plans" / "next-steps.md").read_text()
    assert "- [x] Train a draft model — [the model's own answers]" in plan


def test_a_second_check_parses_only_what_changed_and_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = replicated.knowledge_base(tmp_path)
    render_docs(records)
    base = ["check", "--records", str(records), "--docs", str(tmp_path / "docs")]
    first = CliRunner().invoke(cli, base)
    parsed: list[Path] = []
    load_file, positions = documents.load_file, store.positions
    monkeypatch.setattr(loading, "load_file", lambda p: parsed.append(p) or load_file(p))
    monkeypatch.setattr(store, "positions", lambda p: parsed.append(p) or positions(p))
    again = CliRunner().invoke(cli, base)
    assert parsed == [] and (again.exit_code, again.output) == (first.exit_code, first.output)
    odd = records / "contradiction.yaml"  # it contradicts others: its lines are looked up again
    odd.write_text(odd.read_text().replace("title: ", "title: Again, ", 1))
    render_docs(records)
    parsed.clear()
    changed = CliRunner().invoke(cli, base)
    assert odd in parsed and set(parsed) == {odd}
    uncached = CliRunner().invoke(cli, [*base, "--no-cache"])
    assert (changed.exit_code, changed.output) == (uncached.exit_code, uncached.output)
    assert "warning: " in changed.output
