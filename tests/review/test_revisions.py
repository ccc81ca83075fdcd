"""`kbgen diff` on a real git repository with a history of evidence."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.review import revisions as review
from tests.conftest import PLAN, RECORD, REPO
from tests.support.committed import committed
from tests.support.git import commit, git
from tests.support.golden import assert_golden

DRAFT = (
    RECORD.replace("id: ngram-test", "id: draft-test")
    .replace("title: n-gram vs baseline", "title: draft model vs baseline")
    .replace("next-steps#test-ngram", "next-steps#train-draft")
    .replace(
        "decode_tok_s: {n: 10, mean: 62.6, median: 62.0, stdev: 1.5}",
        "decode_tok_s: {n: 10, mean: 62.6, median: 62.0, stdev: 1.5}\n"
        "      ttft_ms: {n: 10, mean: 80.0}",
    )
)


FLIPPED = (
    RECORD.replace("decode_tok_s: {n: 10, mean: 46.4}", "decode_tok_s: {n: 10, mean: 70.1}")
    .replace("outcome: refuted\n  variant", "outcome: supported\n  variant")
    .replace(
        "coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}",
        "coding: {outcome: supported, effect: 0.12, ci_low: 0.08, ci_high: 0.16}",
    )
)


RERUN = (
    RECORD.replace("id: ngram-test", "id: ngram-rerun")
    .replace("title: n-gram vs baseline", "title: n-gram re-run on vLLM 0.33")
    .replace("version: 0.32.0", "version: 0.33.0")
    .replace("resolves:\n  - next-steps#test-ngram\n", "supersedes: [ngram-test]\n")
)


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose records/ went through five commits of evidence."""
    repo = tmp_path / "repo"
    records = repo / "records"
    (records / "plans").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    (records / "ngram-test.yaml").write_text(RECORD)
    commits = {"start": commit(repo, "plan and a first record")}
    (records / "draft-test.yaml").write_text(DRAFT)
    commits["added"] = commit(repo, "a record added")
    (records / "ngram-test.yaml").write_text(FLIPPED)
    commits["flipped"] = commit(repo, "new evidence flips a verdict")
    (records / "ngram-rerun.yaml").write_text(RERUN)
    commits["superseded"] = commit(repo, "a re-run supersedes the first record")
    (records / "draft-test.yaml").unlink()
    commits["deleted"] = commit(repo, "a record deleted")
    return records, commits


def diff(records: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["diff", *args, "--records", str(records)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_record_added(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    out = diff(records, c["start"], c["added"])
    assert out.startswith(f"<!-- kbgen-diff -->\n## kbgen diff: `{c['start']}` → `{c['added']}`\n")
    assert "**1 new · 0 changed · 0 removed** record(s) · 1 task(s) ticked · 0 unticked" in out
    assert (
        "#### draft model vs baseline (`draft-test`)\n\nStatus `concluded`, verdict **refuted**."
        in out
    )
    assert (
        "- [x] `next-steps#train-draft` Train a draft model — newly ticked by `draft-test` "
        "(**refuted**)" in out
    )
    assert "| coding | **refuted** | -26.0% | -30.0% … -20.0% |" in out  # the new evidence's effect
    # a new record shows its measurements: baseline with its interval, nothing to compare with
    assert "| baseline | coding | `decode_tok_s` (tok/s) | 62.6 [61.7 … 63.5] | 10 |" in out


def test_a_verdict_flipped_by_new_evidence(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    out = diff(records, c["added"], c["flipped"])
    assert "**0 new · 1 changed · 0 removed**" in out
    assert "Verdict **refuted** → **supported**. Changed: `measurements`, `verdict`." in out
    assert "| coding | refuted → **supported** | -26.0% → +12.0% | +8.0% … +16.0% |" in out
    assert (
        "| ngram | coding | `decode_tok_s` (tok/s) | 46.4 | 70.1 | +51.1% |" in out
    )  # no stdev: no CI
    assert "| baseline |" not in out  # unchanged rows are left out by default
    everything = diff(records, c["added"], c["flipped"], "--all")
    assert (
        "| baseline | coding | `decode_tok_s` (tok/s) | 62.6 [61.7 … 63.5] | 62.6 [61.7 … 63.5] "
        "| +0.0% [-2.1% … +2.1%] |"  # the 95% interval of the change, by the delta method
    ) in everything


def test_a_changed_record_says_what_it_rests_on_and_how_it_changed(
    history: tuple[Path, dict[str, str]],
) -> None:
    records, c = history
    out = diff(records, c["added"], c["flipped"])
    assert "**Re-measured**: new measurements. Verdict **refuted** → **supported**." in out
    assert (
        "**Evidence:** measured by kbgen; prompts: not recorded; output length not recorded; "
        "requests per arm not recorded." in out
    )
    assert "| `verdict.outcome` |" not in out  # said in the line above


def test_a_metadata_change_is_called_one_and_shows_old_and_new(
    history: tuple[Path, dict[str, str]],
) -> None:
    records, _ = history
    path = records / "ngram-rerun.yaml"
    fixed = path.read_text().replace("hardware: {cpu: test cpu}", "hardware: {cpu: Xeon 8480+}")
    path.write_text(fixed.replace("tags: [ngram]", "tags: [ngram, cpu]"))
    out = diff(records, "HEAD")
    assert (
        "**Metadata change**: no new measurements, the verdict as it was. Changed: `config`, "
        "`tags`." in out
    )
    assert "| Setting or value | " in out
    assert "| `config.hardware.cpu` | test cpu | Xeon 8480+ |" in out
    assert "| `tags` | ngram | ngram, cpu |" in out
    assert "re-measured" not in out.lower()  # nothing was measured again


def test_caveats_and_values_from_a_record_are_inert_in_the_comment(
    history: tuple[Path, dict[str, str]],
) -> None:
    from tests.support.hostile import problems, to_html

    records, _ = history
    path = records / "ngram-rerun.yaml"
    payload = "<img src=x onerror=alert(1)> | [x](javascript:alert(2))"
    text = path.read_text().replace("hardware: {cpu: test cpu}", f"hardware: {{cpu: '{payload}'}}")
    text = text.replace(
        "  rule: the CI is below the minimum effect\n",
        "  rule: the CI is below the minimum effect\n"
        f"  caveats: ['coding: {payload}', '{payload}']\n",
    )
    path.write_text(text)
    out = diff(records, "HEAD")
    assert "<img" not in out and "javascript:" not in out.replace("\\[x&#93;(javascript:", "")
    assert problems(to_html(out)) == []
    assert out.count("&lt;img src=x onerror=alert(1)&gt; \\| ") == 3  # two caveats, the cpu
    assert "- **coding**: &lt;img" in out and "(new)" in out


def test_a_task_unticked_by_supersession(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    out = diff(records, c["flipped"], c["superseded"])
    assert (
        "- [ ] `next-steps#test-ngram` Test n-gram speculative decoding — unticked: evidence "
        "`ngram-test` superseded by `ngram-rerun`"
    ) in out
    assert "### ⚠️ Warnings" in out
    assert (
        "`ngram-rerun` supersedes `ngram-test`, which had a different engine version "
        "(0.32.0 vs 0.33.0)"
    ) in out
    assert (
        "`next-steps#test-ngram` is resolved only by `ngram-test`, whose evidence was superseded "
        "by `ngram-rerun`" in out
    )


def test_a_record_deleted(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    out = diff(records, c["superseded"], c["deleted"])
    assert (
        "### Removed records\n\n- draft model vs baseline (`draft-test`), was `concluded` with "
        "verdict **refuted**" in out
    )
    assert (
        "- [ ] `next-steps#train-draft` Train a draft model — unticked: `draft-test` no longer "
        "resolves it" in out
    )


def test_json_for_machines(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    data = json.loads(diff(records, c["start"], c["deleted"], "--format", "json"))
    assert data["format"] == "kbgen-diff/1"
    assert (data["base"], data["head"]) == (c["start"], c["deleted"])
    changes = {r["id"]: r for r in data["records"]}
    assert set(changes) == {"ngram-test", "ngram-rerun"}  # draft-test came and went
    assert changes["ngram-test"]["outcome"] == ["refuted", "supported"]
    assert changes["ngram-rerun"]["change"] == "added"
    [row] = changes["ngram-test"]["metrics"]
    assert row["base"]["mean"] == 46.4 and row["head"]["mean"] == 70.1
    assert [(t["task"], t["ticked"]) for t in data["tasks"]] == [("test-ngram", False)]
    assert len(data["warnings"]) == 2


def test_default_is_this_branch_against_where_it_forked(
    history: tuple[Path, dict[str, str]],
) -> None:
    records, c = history
    repo = records.parent
    git(repo, "checkout", "-q", "-b", "feature", c["flipped"])
    (records / "ngram-test.yaml").write_text(
        RECORD.replace("title: n-gram vs baseline", "title: renamed")
    )
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "feature")  # main moved on (superseded, deleted); we did not
    out = diff(records)
    assert f"## kbgen diff: `{c['flipped']}` → `working tree`" in out
    assert "#### renamed (`ngram-test`)" in out  # the uncommitted edit is in
    assert "ngram-rerun" not in out  # main's later commits are not this branch's change


def test_nothing_changed(history: tuple[Path, dict[str, str]]) -> None:
    records, _ = history
    assert diff(records, "HEAD").endswith("No record or plan task changed.\n")


def test_markup_from_a_record_is_inert_in_the_comment(history: tuple[Path, dict[str, str]]) -> None:
    records, _ = history
    path = records / "ngram-rerun.yaml"
    path.write_text(
        path.read_text().replace(
            "title: n-gram re-run on vLLM 0.33", "title: <img src=x onerror=alert(1)>"
        )
    )
    out = diff(records)
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out


def test_bad_revisions_and_folders_are_usage_errors(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    records, _ = history
    bad = CliRunner().invoke(cli, ["diff", "no-such-rev", "--records", str(records)])
    assert bad.exit_code == 2 and bad.stderr == "error: unknown git revision 'no-such-rev'\n"
    outside = tmp_path / "elsewhere" / "records"
    outside.mkdir(parents=True)
    lost = CliRunner().invoke(cli, ["diff", "--records", str(outside)])
    assert lost.exit_code == 2 and "not inside a git repository" in lost.stderr


def test_review_difference_is_a_library_call(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    result = review.difference(records, c["start"], c["added"])
    assert [r.id for r in result.records] == ["draft-test"]


REVIEW_PAGE = REPO / "docs" / "review.md"


EXAMPLE = ("<!-- kbgen diff example: start -->\n", "<!-- kbgen diff example: end -->")


def example_diff(tmp_path: Path) -> str:
    """`kbgen diff` of the example knowledge base (as committed): its plan, then its records."""
    example = committed(tmp_path / "committed", "records") / "records"
    repo = tmp_path / "example"
    records = repo / "records"
    shutil.copytree(example / "plans", records / "plans")
    git(repo, "init", "-q", "-b", "main")
    fixed = {
        "GIT_AUTHOR_DATE": "2026-11-29T12:00:00Z",
        "GIT_COMMITTER_DATE": "2026-11-29T12:00:00Z",
    }
    with pytest.MonkeyPatch.context() as env:
        for key, value in fixed.items():
            env.setenv(key, value)  # fixed dates: the same commits, the same ids, every time
        plan = commit(repo, "the plan")
        shutil.copytree(example, records, dirs_exist_ok=True)
        done = commit(repo, "the n-gram experiment, concluded")
    return diff(records, plan, done)


def test_review_page_shows_a_real_diff(tmp_path: Path) -> None:
    output = example_diff(tmp_path)
    assert "newly ticked by `2026-11-29-ngram-spec-decode-kimi-k2-5`" in output
    shown = '!!! example "`kbgen diff` as the pull request\'s comment shows it"\n\n' + "".join(
        f"    {line}\n" if line else "\n" for line in output.splitlines()
    )
    assert_golden(shown, REVIEW_PAGE, between=EXAMPLE)


def test_the_documented_workflow_runs_check_and_updates_one_comment() -> None:
    from kbgen.site import starter

    shipped = starter.contents("kb")[".github/workflows/kbgen-review.yml"]
    assert f"```yaml\n{shipped}```" in REVIEW_PAGE.read_text()  # the page shows what ships
    workflow = yaml.safe_load(shipped)
    steps = workflow["jobs"]["review"]["steps"]
    runs = [step.get("run", "") for step in steps]
    [diff_run] = [run for run in runs if run.startswith("kbgen diff ")]
    assert "|| test -s kbgen-diff.md" in diff_run  # the comment of an invalid head is kept
    assert runs[-1].startswith("kbgen check")
    assert all(step.get("if") == "always()" for step in steps[-2:])  # whatever failed before
    [post] = [run for run in runs if "gh api" in run]
    assert "--method PATCH" in post and 'startswith("<!-- kbgen-diff -->")' in post
    assert steps[0]["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    assert workflow["permissions"]["pull-requests"] == "write"


def test_the_pre_commit_hooks_kbgen_init_writes_name_real_commands() -> None:
    from kbgen.site import starter

    config = yaml.safe_load(starter.contents("kb")[".pre-commit-config.yaml"])
    [local] = config["repos"]
    assert local["repo"] == "local"  # no tag of kbgen's repository to name
    hooks = local["hooks"]
    assert {hook["id"] for hook in hooks} == {"kbgen-render", "kbgen-check"}
    for hook in hooks:
        assert hook["language"] == "system" and hook["pass_filenames"] is False
        program, command = hook["entry"].split()
        assert program == "kbgen"
        assert CliRunner().invoke(cli, [command, "--help"]).exit_code == 0


def test_invalid_files_at_the_base_are_left_out_with_a_warning(
    history: tuple[Path, dict[str, str]],
) -> None:
    records, c = history
    repo = records.parent
    git(repo, "checkout", "-q", c["start"])
    broken = records / "ngram-test.yaml"
    broken.write_text(broken.read_text().replace("status: concluded", "status: finished"))
    typo = commit(repo, "a typo")
    broken.write_text(RECORD)  # fixed in the working tree
    out = diff(records, typo)
    assert f"- `{typo}:records/ngram-test.yaml` does not validate: left out of the base" in out
    bad = CliRunner().invoke(cli, ["diff", c["start"], typo, "--records", str(records)])
    assert bad.exit_code == 1
    assert re.match(rf"{typo}:records/ngram-test\.yaml:\d+: status: ", bad.stderr), bad.stderr
    # the pull request's comment says what is invalid, where: not nothing
    assert bad.stdout.startswith(f"<!-- kbgen-diff -->\n## kbgen diff: `{c['start']}` → `{typo}`\n")
    assert f"❌ **The head, `{typo}`, does not validate**: 1 problem(s) in 1 file(s)." in bad.stdout
    assert re.search(
        rf"^\| `{typo}:records/ngram-test\.yaml` \| \d+ \| `status` \| Input should be ",
        bad.stdout,
        re.M,
    ), bad.stdout
    as_json = CliRunner().invoke(
        cli, ["diff", c["start"], typo, "--records", str(records), "--format", "json"]
    )
    assert as_json.exit_code == 1 and as_json.stdout == ""  # machines read the exit code


def test_the_comment_on_an_invalid_head_masks_what_looks_like_a_secret(
    history: tuple[Path, dict[str, str]],
) -> None:
    records, _ = history
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    path = records / "ngram-rerun.yaml"
    path.write_text(path.read_text() + f"{token}: pasted by mistake\n")
    bad = CliRunner().invoke(cli, ["diff", "HEAD", "--records", str(records)])
    assert bad.exit_code == 1 and "does not validate" in bad.stdout
    assert token not in bad.stdout and token not in bad.stderr
    assert "| `***` | unknown field (not in the schema; check its spelling) |" in bad.stdout


def test_a_records_folder_below_the_root_with_any_file_name(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    records = repo / "données" / "records"
    (records / "plans").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (records / "plans" / "next-steps.yaml").write_text(PLAN)
    (records / "ngram-test.yaml").write_text(RECORD)
    (records / "notes – é.md").write_text("not a record\n")
    first = commit(repo, "first")
    (records / "ngram-test.yaml").write_text(FLIPPED)
    second = commit(repo, "second")
    assert "Verdict **refuted** → **supported**" in diff(records, first, second)
    (records / "draft-test.yaml").write_text(DRAFT)
    git(repo, "checkout", "-q", "--detach")  # a detached HEAD, as CI checks pull requests out
    assert "#### draft model vs baseline (`draft-test`)" in diff(records, first)


def test_delta_interval_by_the_delta_method() -> None:
    from kbgen.kb.models import MetricStats
    from kbgen.review.diff import _change_ci

    interval = _change_ci(
        MetricStats(n=100, mean=50.0, stdev=5.0), MetricStats(n=100, mean=60.0, stdev=5.0)
    )
    assert interval is not None
    low, high = interval
    # ratio 1.2; relative standard errors 0.01 (base) and 0.00833 (head)
    assert (round(low, 4), round(high, 4)) == (0.1694, 0.2306)
    assert (
        _change_ci(MetricStats(n=None, mean=50.0), MetricStats(n=3, mean=60.0, stdev=1.0)) is None
    )


def test_a_removed_plan_unticks_its_tasks(history: tuple[Path, dict[str, str]]) -> None:
    records, c = history
    git(records.parent, "checkout", "-q", c["flipped"])  # test-ngram and train-draft are ticked
    (records / "plans" / "next-steps.yaml").unlink()
    for path in records.glob("*.yaml"):  # nothing may refer to the plan any more
        text = path.read_text().replace("resolves:\n  - next-steps#test-ngram\n", "")
        path.write_text(text.replace("resolves:\n  - next-steps#train-draft\n", ""))
    out = diff(records, "HEAD")
    gone = "— unticked: its plan was removed"
    assert f"- [ ] `next-steps#test-ngram` Test n-gram speculative decoding {gone}" in out
    assert f"- [ ] `next-steps#train-draft` Train a draft model {gone}" in out


def test_an_empty_repository_has_nothing_to_compare_with(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    (repo / "records").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    result = CliRunner().invoke(cli, ["diff", "--records", str(repo / "records")])
    assert result.exit_code == 2 and "no commit yet, so nothing to compare with" in result.stderr


def test_a_new_record_shows_its_primary_metric_unless_all(
    history: tuple[Path, dict[str, str]],
) -> None:
    records, c = history
    assert "`ttft_ms`" not in diff(records, c["start"], c["added"])
    assert "| baseline | coding | `ttft_ms` (ms) | 80 | 10 |" in diff(
        records, c["start"], c["added"], "--all"
    )


def _full_side(repo: Path, rev: str | None, dest: Path) -> object:
    """The naive reading, independent of kbgen's git code: the whole folder, loaded in full."""
    from kbgen.kb import loading as kb
    from kbgen.review import diff

    if rev is None:
        return diff.Side.of(review.WORKING_TREE, kb.load([repo / "records"]))
    dest.mkdir(parents=True)
    tar = subprocess.run(["git", "archive", rev, "records"], cwd=repo, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
    short = git(repo, "rev-parse", "--short", rev)
    return diff.Side.of(short, kb.load([dest / "records"]))


def test_reading_only_the_differing_files_gives_the_full_comparison(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    from kbgen.review import diff

    records, c = history
    repo = records.parent
    order = ["start", "added", "flipped", "superseded", "deleted"]
    for i, older in enumerate(order):
        for newer in order[i + 1 :]:
            base = _full_side(repo, c[older], tmp_path / older / newer / "base")
            head = _full_side(repo, c[newer], tmp_path / older / newer / "head")
            full = diff.compare(base, head)  # type: ignore[arg-type]
            assert review.difference(records, c[older], c[newer]) == full, (older, newer)


def test_the_working_tree_as_head_matches_the_full_comparison(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    from kbgen.review import diff

    records, c = history
    repo = records.parent
    (records / "ngram-rerun.yaml").unlink()  # an uncommitted deletion
    flipped = (records / "ngram-test.yaml").read_text()
    (records / "ngram-test.yaml").write_text(flipped.replace("n-gram vs baseline", "edited"))
    (records / "untracked.yaml").write_text(RECORD.replace("id: ngram-test", "id: untracked"))
    (repo / ".gitignore").write_text("records/ignored.yaml\n")
    (records / "ignored.yaml").write_text(RECORD.replace("id: ngram-test", "id: ignored"))
    git(repo, "update-index", "--assume-unchanged", "records/plans/next-steps.yaml")
    plan = records / "plans" / "next-steps.yaml"
    plan.write_text(plan.read_text().replace("Train a draft model", "Train a draft"))
    for older in ("start", "superseded", "deleted"):
        base = _full_side(repo, c[older], tmp_path / older)
        full = diff.compare(base, _full_side(repo, None, tmp_path / "unused"))  # type: ignore[arg-type]
        assert review.difference(records, c[older]) == full, older
    out = review.output(records, c["deleted"], None, False, "markdown")
    assert "#### edited (`ngram-test`)" in out and "(`untracked`)" in out and "(`ignored`)" in out
