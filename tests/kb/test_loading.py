"""Validation of records and plans: every malformed input gives FILE:LINE: FIELD: MESSAGE."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kbgen.kb import documents, pool
from kbgen.kb import loading as kb
from kbgen.kb.models import Plan, Record
from tests.conftest import PLAN, RECORD, REPO
from tests.support import special
from tests.support.properties import SETTINGS, examples

BOMB = "".join(
    f"{name}: &{name} [{', '.join([prev] * 9)}]\n"
    for name, prev in zip("bcdefghi", ["*a", "*b", "*c", "*d", "*e", "*f", "*g", "*h"], strict=True)
)


def sub(old: str, new: str, text: str = RECORD) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# (case id, file text, line: int or a substring whose line is expected, field, message regex)
CASES = [
    ("empty-file", "", 1, "", "empty document"),
    ("only-comments", "# nothing here\n", 1, "", "empty document"),
    ("top-level-list", "- a\n- b\n", 1, "", "found a list"),
    ("top-level-scalar", "hello\n", 1, "", "found a string"),
    ("tab-indent", sub("  statement:", "\tstatement:"), "\tstatement", "", "tab character"),
    ("bad-indent", sub("  direction:", "   direction:"), "   direction", "", "YAML syntax"),
    ("unclosed-flow", sub("tags: [ngram]", "tags: [ngram"), "provenance:", "", "YAML syntax"),
    (
        "duplicate-key",
        sub("title: n-gram", "title: x\ntitle: n-gram"),
        "title: n-gram",
        "",
        "duplicate key",
    ),
    ("two-documents", RECORD + "---\na: 1\n", "---", "", "another document"),
    ("control-char", sub("Why we", "Why\x07 we"), "Why", "", "control character U\\+0007"),
    ("alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x]\n" + BOMB, 1, "", "alias bomb"),
    ("deep-nesting", "a: " + "[" * 5000 + "]" * 5000 + "\n", None, "", "deeper than"),
    (
        "wrong-schema-version",
        sub("schema_version: 1", "schema_version: 2"),
        "schema_version",
        "schema_version",
        "Input should be 1",
    ),
    ("missing-title", sub("title: n-gram vs baseline\n", ""), 1, "title", "required"),
    (
        "unknown-top-key",
        sub("tags: [ngram]", "tags: [ngram]\nowner: me"),
        "owner",
        "owner",
        "unknown field",
    ),
    (
        "typo-nested-key",
        sub("minimum_effect:", "minimum_efect:"),
        "minimum_efect",
        "hypothesis.minimum_efect",
        "unknown field",
    ),
    (
        "bad-status",
        sub("status: concluded", "status: done"),
        "status:",
        "status",
        "'planned', 'running', 'concluded' or 'superseded'",
    ),
    (
        "bad-date",
        sub("created: 2026-11-01", "created: yesterday"),
        "created:",
        "created",
        "valid date",
    ),
    (
        "concluded-before-created",
        sub("concluded: 2026-11-02", "concluded: 2026-10-01"),
        "concluded:",
        "concluded",
        "before created",
    ),
    (
        "number-as-text",
        sub("mean: 62.6", "mean: fast"),
        "mean: fast",
        "measurements.baseline.coding.decode_tok_s.mean",
        "valid number",
    ),
    (
        "negative-count",
        sub("n: 10, mean: 62.6", "n: -3, mean: 62.6"),
        "n: -3",
        "measurements.baseline.coding.decode_tok_s.n",
        "greater than or equal to 0",
    ),
    (
        "unknown-metric",
        sub("decode_tok_s: {n: 10, mean: 62.6", "tok_s: {n: 10, mean: 62.6"),
        "tok_s: {n: 10",
        "measurements.baseline.coding.tok_s",
        "should be 'decode_tok_s'",
    ),
    (
        "id-not-slug",
        sub("id: ngram-test", "id: ../../etc/passwd"),
        "id:",
        "id",
        "should match pattern",
    ),
    (
        "id-not-filename",
        sub("id: ngram-test", "id: other-test"),
        "id:",
        "id",
        "must equal the file name",
    ),
    (
        "bad-speculative-method",
        sub("method: ngram", "method: lookahead"),
        "method: lookahead",
        "config.variants.ngram.speculative_config.method",
        "does not match any of the expected tags",
    ),
    (
        "ngram-window-inverted",
        sub("prompt_lookup_min: 2", "prompt_lookup_min: 9"),
        "prompt_lookup_min",
        "config.variants.ngram.speculative_config.prompt_lookup_min",
        "above prompt_lookup_max",
    ),
    (
        "baseline-not-a-variant",
        sub("baseline: baseline", "baseline: control"),
        "baseline: control",
        "config.baseline",
        "not one of the variants",
    ),
    (
        "measurement-of-unknown-variant",
        sub("  ngram:\n    coding:", "  eagle:\n    coding:"),
        "  eagle:",
        "measurements.eagle",
        "not a variant",
    ),
    (
        "accepted-above-drafted",
        sub("accepted_tokens: 120", "accepted_tokens: 999"),
        "accepted_tokens",
        "spec_decode.ngram.accepted_tokens",
        "exceeds draft_tokens",
    ),
    (
        "position-rate-not-number",
        sub("[0.5, 0.3,", "[high, 0.3,"),
        "per_position",
        "spec_decode.ngram.per_position_acceptance[0]",
        "valid number.*; or .*Range",
    ),
    (
        "ci-inverted",
        sub("ci_low: -0.3, ci_high: -0.2", "ci_low: -0.1, ci_high: -0.2"),
        "ci_low",
        "verdict.per_class.coding.ci_low",
        "above ci_high",
    ),
    (
        "concluded-without-verdict",
        RECORD[: RECORD.index("verdict:")] + RECORD[RECORD.index("resolves:") :],
        1,
        "verdict",
        "required when status is concluded",
    ),
    (
        "verdict-outcome-typo",
        sub("outcome: refuted\n  variant", "outcome: refute\n  variant"),
        "outcome: refute\n",
        "verdict.outcome",
        "'supported', 'refuted', 'inconclusive' or 'mixed'",
    ),
    (
        "task-ref-without-hash",
        sub("- next-steps#test-ngram", "- next-steps"),
        "- next-steps",
        "resolves[0]",
        "should match pattern",
    ),
    (
        "unknown-plan",
        sub("- next-steps#test-ngram", "- old-plan#test-ngram"),
        "- old-plan",
        "resolves[0]",
        "no plan 'old-plan'",
    ),
    (
        "unknown-task",
        sub("- next-steps#test-ngram", "- next-steps#fly"),
        "- next-steps#fly",
        "resolves[0]",
        "has no task 'fly'",
    ),
    (
        "dangling-supersedes",
        sub("tags: [ngram]", "tags: [ngram]\nsupersedes: [gone]"),
        "supersedes",
        "supersedes[0]",
        "no record 'gone'",
    ),
    (
        "self-supersedes",
        sub("tags: [ngram]", "tags: [ngram]\nsupersedes: [ngram-test]"),
        "supersedes",
        "supersedes[0]",
        "cannot supersede itself",
    ),
    (
        "raw-samples-escape",
        sub("tags: [ngram]", "tags: [ngram]\nraw_samples: {path: a/../../x}"),
        "raw_samples",
        "raw_samples.path",
        "inside the records folder",
    ),
    (
        "list-where-mapping",
        sub("hardware: {cpu: test cpu}", "hardware: [cpu]"),
        "hardware:",
        "config.hardware",
        "valid dictionary",
    ),
]


def _expected_line(text: str, line: int | str | None) -> int | None:
    if line is None or isinstance(line, int):
        return line
    return text[: text.index(line)].count("\n") + 1


@pytest.mark.parametrize(
    ("text", "line", "field", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_record_is_located(
    kb_dir: Path, text: str, line: int | str | None, field: str, message: str
) -> None:
    path = kb_dir / "ngram-test.yaml"
    path.write_text(text)
    problems = kb.load([kb_dir]).problems
    assert problems, "the malformed file was accepted"
    wanted = [p for p in problems if p.field == field and re.search(message, p.message)]
    assert wanted, "\n".join(map(str, problems))
    problem = wanted[0]
    assert problem.path == path
    assert problem.line == _expected_line(text, line)
    rendered = str(problem)
    assert rendered.startswith(f"{path}:{problem.line}: " if problem.line else f"{path}: ")


def test_cases_are_distinct() -> None:
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len({c[1] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 3, "NUL byte"),
        (b"id: x\ntitle: caf\xe9\n", 2, "not UTF-8"),
    ],
    ids=["binary", "latin-1"],
)
def test_non_text_file(kb_dir: Path, content: bytes, line: int, message: str) -> None:
    path = kb_dir / "ngram-test.yaml"
    path.write_bytes(content)
    [problem] = kb.load([kb_dir]).problems
    assert problem.path == path and message in problem.message and problem.line == line


def test_huge_file_is_refused_without_reading(kb_dir: Path) -> None:
    path = kb_dir / "ngram-test.yaml"
    with path.open("wb") as out:
        out.truncate(9 * 1024 * 1024)
    [problem] = kb.load([kb_dir]).problems
    assert "too large" in problem.message


def test_bad_plan_is_located(kb_dir: Path) -> None:
    path = kb_dir / "plans" / "next-steps.yaml"
    path.write_text(PLAN.replace("id: train-draft", "id: test-ngram"))
    problems = kb.load([kb_dir]).problems
    assert [str(p) for p in problems] == [f"{path}:7: tasks[1].id: 'test-ngram' appears twice"]


def test_duplicate_id_across_folders(kb_dir: Path) -> None:
    (kb_dir / "old").mkdir()
    (kb_dir / "old" / "ngram-test.yaml").write_text(RECORD)
    problems = kb.load([kb_dir]).problems
    assert len(problems) == 1
    assert problems[0].field == "id" and "also the id of" in problems[0].message


def test_every_problem_is_reported(kb_dir: Path) -> None:
    text = sub("mean: 62.6", "mean: x", sub("status: concluded", "status: done"))
    (kb_dir / "ngram-test.yaml").write_text(text)
    (kb_dir / "second.yaml").write_text("- not a mapping\n")
    fields = sorted(p.field for p in kb.load([kb_dir]).problems)
    assert fields == ["", "measurements.baseline.coding.decode_tok_s.mean", "status"]


def test_valid_knowledge_base(kb_dir: Path) -> None:
    base = kb.load([kb_dir])
    assert base.problems == []
    assert isinstance(base.records["ngram-test"], Record)
    assert isinstance(base.plans["next-steps"], Plan)
    assert base.path_of(base.records["ngram-test"]) == kb_dir / "ngram-test.yaml"


def test_example_records_are_valid() -> None:
    base = kb.load([REPO / "records"])
    assert base.problems == []
    assert "next-steps-eagle" in base.plans
    seed = base.records["2026-11-29-ngram-spec-decode-kimi-k2-5"]
    assert seed.verdict is not None and seed.verdict.outcome == "refuted"
    assert seed.provenance is not None and seed.provenance.source == "reported"
    assert {r.split("#")[1] for r in seed.resolves} == {"write-plan", "test-ngram"}


def test_cache_skips_unchanged_files_and_rechecks_changed_ones(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache.json"
    first = kb.load_facts([kb_dir], cache=cache)
    assert first.problems == [] and len(first.facts) == 2 and cache.exists()

    parsed: list[Path] = []
    real_load_file = documents.load_file

    def counting(path: Path) -> Record | Plan:
        parsed.append(path)
        return real_load_file(path)

    monkeypatch.setattr(kb, "load_file", counting)
    warm = kb.load_facts([kb_dir], cache=cache)
    assert parsed == [] and warm.facts == first.facts and warm.problems == []

    record = kb_dir / "ngram-test.yaml"
    record.write_text(RECORD.replace("- next-steps#test-ngram", "- next-steps#nope"))
    changed = kb.load_facts([kb_dir], cache=cache)
    assert parsed == [record]
    assert [p.field for p in changed.problems] == ["resolves[0]"]  # cross-checks still run


def test_cache_from_other_rules_is_ignored(kb_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    entry = [[1, 1, 1], ["record", "x", [], []]]
    stale = {"key": "other", "entries": {str((kb_dir / "ngram-test.yaml").absolute()): entry}}
    cache.write_text(json.dumps(stale))
    base = kb.load_facts([kb_dir], cache=cache)
    assert base.problems == [] and {f.id for f in base.facts.values()} == {
        "ngram-test",
        "next-steps",
    }
    cache.write_text("not json")
    assert kb.load_facts([kb_dir], cache=cache).problems == []


@pytest.mark.parametrize("models", [False, True], ids=["facts", "models"])
def test_parallel_load_finds_what_a_serial_one_does(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch, models: bool
) -> None:
    for i in range(6):
        (kb_dir / f"copy-{i}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: copy-{i}"))
    broken = sub("mean: 62.6", "mean: x", RECORD.replace("id: ngram-test", "id: copy-3"))
    (kb_dir / "copy-3.yaml").write_text(broken)
    load = kb.load if models else kb.load_facts
    serial = load([kb_dir])
    monkeypatch.setattr(pool, "PARALLEL_FROM", 2)
    parallel = load([kb_dir])
    assert parallel.facts == serial.facts and len(parallel.facts) == 7
    assert parallel.records == serial.records and len(parallel.records) == (6 if models else 0)
    assert parallel.problems == serial.problems
    assert [(p.path.name, p.field) for p in parallel.problems] == [
        ("copy-3.yaml", "measurements.baseline.coding.decode_tok_s.mean")
    ]


def named(doc: Record | Plan, path: Path) -> str:
    return f"{doc.id} from {path.name}"


def test_scan_hands_each_file_to_each_and_takes_known_files_as_given(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_path, record_path = kb_dir / "plans" / "next-steps.yaml", kb_dir / "ngram-test.yaml"
    first = kb.scan([kb_dir], named)
    assert first.problems == [] and first.products == {
        record_path: "ngram-test from ngram-test.yaml",
        plan_path: "next-steps from next-steps.yaml",
    }

    parsed: list[Path] = []
    real_load_file = documents.load_file

    def counting(path: Path) -> Record | Plan:
        parsed.append(path)
        return real_load_file(path)

    monkeypatch.setattr(kb, "load_file", counting)
    unknown_task = kb.Facts("record", "ngram-test", (("resolves", "next-steps#nope"),))
    known = {record_path: kb.Known(unknown_task, "as cached")}
    again = kb.scan([kb_dir], named, known=known)
    assert parsed == [plan_path] and again.products[record_path] == "as cached"
    assert [p.field for p in again.problems] == ["resolves[0]"]  # known files are cross-checked
    assert kb.scan([kb_dir], named, known=known, references=False).problems == []


@pytest.mark.parametrize("kind", sorted(set(special.SPECIAL) - {"folder"}))  # a folder: walked
def test_a_special_file_among_the_records_is_one_located_problem(kb_dir: Path, kind: str) -> None:
    path = kb_dir / "special.yaml"
    message = special.make(kind, path)
    with special.deadline(5):
        base = kb.load([kb_dir])
    [problem] = base.problems
    assert (problem.path, problem.line) == (path, None) and problem.message.startswith(message)
    assert set(base.records) == {"ngram-test"}


def test_a_symlink_to_a_record_inside_the_knowledge_base_is_read(kb_dir: Path) -> None:
    (kb_dir / "old").mkdir()
    (kb_dir / "old" / "moved.yaml").write_text(RECORD.replace("id: ngram-test", "id: moved"))
    (kb_dir / "old" / "moved-link.yaml").symlink_to("moved.yaml")
    problems = kb.load([kb_dir]).problems
    assert [p.message for p in problems] == [  # read, so its id is checked like any file's
        "'moved' must equal the file name ('moved-link')"
    ]


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.dates()
    | st.sampled_from(["next-steps", "test-ngram", "1", ".inf", "yes", "~", "2026-11-01"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_TASK = st.fixed_dictionaries(
    {},
    optional={"id": _SCALARS, "text": _VALUES, "done": _VALUES, "extra": _VALUES},
)
_PLAN_DATA = st.fixed_dictionaries(
    {},
    optional={
        "schema_version": st.sampled_from([1, 2, "1", True]) | _SCALARS,
        "id": st.just("next-steps") | _SCALARS,
        "title": st.text(max_size=30) | _VALUES,
        "context": _VALUES,
        "tasks": st.lists(_TASK, max_size=4) | _VALUES,
        "unknown": _VALUES,
    },
)


def _mutated(plan: str, at: int, junk: str) -> bytes:
    lines = plan.splitlines()
    lines.insert(at % (len(lines) + 1), junk)
    return "\n".join(lines).encode()


PLAN_FILES = st.one_of(
    _PLAN_DATA.map(lambda data: yaml.safe_dump(data, allow_unicode=True).encode()),
    st.builds(
        _mutated,
        st.just(PLAN),
        st.integers(min_value=0),
        st.text(alphabet=":-[]{}&*!|>#'\" \t\nab1", max_size=20) | st.text(max_size=20),
    ),
    st.binary(max_size=1_000),
    st.text(max_size=1_000).map(str.encode),
)


@settings(SETTINGS, max_examples=examples(300))
@given(content=PLAN_FILES)
@example(content=PLAN.encode())  # the valid plan: success
@example(content=b"id: x\ntasks: " + b"[" * 10_000)
@example(content=b"a: &a [" + b"*a, " * 50 + b"]\nb: &b [" + b"*a, " * 50 + b"]\n")
def test_any_plan_file_validates_or_is_located_problems(kb_dir: Path, content: bytes) -> None:
    """Whatever the plan file holds, `kbgen validate` says ok or prints one located line per
    problem (in the plan, or in the record that references it): never a traceback or a hang."""
    from click.testing import CliRunner

    from kbgen.cli import cli

    (kb_dir / "plans" / "next-steps.yaml").write_bytes(content)
    with special.deadline(10):
        result = CliRunner().invoke(cli, ["validate", "--no-cache", "--records", str(kb_dir)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == 0:
        assert result.stdout.startswith("ok: 1 record(s) and 1 plan(s) valid")
        return
    assert result.exit_code == 1, result.output
    *problems, summary = result.stderr.splitlines()
    assert problems and all(line.startswith(f"{kb_dir}/") for line in problems), result.stderr
    assert re.fullmatch(r"\d+ problems? in [12] file\(s\)", summary)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
def test_a_worker_s_watch_ends_it_once_its_parent_is_gone(pidfd: bool) -> None:
    import subprocess
    import sys
    import time

    parent = subprocess.Popen(["sleep", "60"])
    hide = "" if pidfd else "del os.pidfd_open; "
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os; {hide}from kbgen.kb import pool; "
            f"pool._watch({parent.pid}); print('not ended')",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)  # watching by now
    assert watcher.poll() is None  # a living parent keeps its worker
    parent.kill()
    parent.wait()
    assert watcher.wait(timeout=5 * pool.WATCH_INTERVAL_S + 5) == 1
    assert watcher.communicate()[0] == ""
