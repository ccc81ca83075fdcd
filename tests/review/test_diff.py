"""The pure comparison of two knowledge bases: records, verdicts, metrics, tasks, warnings."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from kbgen.kb.cards import Card
from kbgen.kb.models import Plan, Record
from kbgen.review import diff
from kbgen.review.diff import (
    Caveat,
    ClassBase,
    Estimate,
    EvidenceBase,
    MetricRow,
    Side,
    TaskChange,
    VerdictRow,
)
from kbgen.review.values import ValueChange
from kbgen.site import render
from tests.conftest import PLAN, RECORD
from tests.support import swept
from tests.support.golden import assert_golden, golden_path

FIRST = yaml.safe_load(RECORD)  # ngram-test: concluded, refuted, resolves next-steps#test-ngram


def record(**changes: Any) -> Record:
    """The test record with some values replaced: `a__b=v` sets `data["a"]["b"] = v`."""
    data = copy.deepcopy(FIRST)
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = data
        for name in parents:
            node = node.setdefault(name, {})
        node[key] = value
    return Record.model_validate(data)


def side(name: str, *records: Record, plans: tuple[Plan, ...] | None = None) -> Side:
    plans = (Plan.model_validate(yaml.safe_load(PLAN)),) if plans is None else plans
    return Side(
        name,
        {r.id: Card.of(r) for r in records},
        {r.id: r for r in records},
        {p.id: p for p in plans},
    )


def summary(mean: float, stdev: float | None = None, n: int | None = None) -> dict[str, Any]:
    return {"mean": mean, **({} if stdev is None else {"stdev": stdev}), "n": n}


def test_the_same_knowledge_base_on_both_sides_is_no_difference() -> None:
    result = diff.compare(side("abc1234", record()), side("working tree", record()))
    assert (result.base, result.head) == ("abc1234", "working tree")
    assert result.empty and result.records == [] and result.tasks == [] and result.warnings == []


# --- record changes --------------------------------------------------------------------------


def test_a_record_added() -> None:
    [change] = diff.compare(side("a"), side("b", record())).records
    assert (change.id, change.title, change.change) == ("ngram-test", "n-gram vs baseline", "added")
    assert change.status == (None, "concluded") and change.outcome == (None, "refuted")
    assert change.fields == []
    assert change.verdicts == [VerdictRow("coding", None, "refuted", None, -0.26, (-0.3, -0.2))]
    # a new record shows its primary metric's rows only, with nothing to compare them with
    assert [(m.variant, m.metric, m.base, m.change) for m in change.metrics] == [
        ("baseline", "decode_tok_s", None, None),
        ("ngram", "decode_tok_s", None, None),
    ]


def test_a_record_removed() -> None:
    [change] = diff.compare(side("a", record()), side("b")).records
    assert change.change == "removed"
    assert change.status == ("concluded", None) and change.outcome == ("refuted", None)
    assert change.verdicts == [VerdictRow("coding", "refuted", None, -0.26, None, None)]
    assert change.metrics == []  # the numbers of what is gone are not a change to review


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        ({"title": "n-gram vs baseline, again"}, ["title"]),
        ({"context": "Why.", "tags": ["ngram", "cpu"]}, ["context", "tags"]),
        ({"status": "superseded"}, ["status"]),
        ({"config__engine__version": "0.33.0"}, ["config"]),
    ],
)
def test_a_changed_record_names_the_top_level_fields_that_differ(
    changes: dict[str, Any], fields: list[str]
) -> None:
    [change] = diff.compare(side("a", record()), side("b", record(**changes))).records
    assert change.change == "changed" and change.fields == fields
    assert change.verdicts == [] and change.metrics == []  # neither changed


def test_changed_records_come_in_id_order() -> None:
    others = [record(id=name) for name in ("zeta", "alpha")]
    result = diff.compare(side("a", record()), side("b", *others))
    assert [(r.id, r.change) for r in result.records] == [
        ("alpha", "added"),
        ("ngram-test", "removed"),
        ("zeta", "added"),
    ]


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"title": "retitled", "tags": ["ngram", "cpu"]}, "metadata"),
        ({"config__hardware": {"cpu": "the cpu it really was"}}, "metadata"),  # a description
        ({"config__engine__version": "0.33.0"}, "metadata"),
        ({"verdict__rationale": "Slower."}, "re-judged"),
        ({"measurements__ngram__coding__decode_tok_s": {"n": 10, "mean": 47.0}}, "re-measured"),
        ({"spec_decode__ngram__drafts": 101}, "re-measured"),
        ({"raw_samples": {"path": "ngram-test.samples.jsonl.gz"}}, "re-measured"),
    ],
)
def test_a_changed_record_says_whether_it_was_measured_again(
    changes: dict[str, Any], kind: str
) -> None:
    [change] = diff.compare(side("a", record()), side("b", record(**changes))).records
    assert change.kind == kind


def test_added_and_removed_records_are_no_kind_of_change() -> None:
    [added] = diff.compare(side("a"), side("b", record())).records
    [removed] = diff.compare(side("a", record()), side("b")).records
    assert added.kind is None and removed.kind is None


@pytest.mark.parametrize(
    ("changes", "values"),
    [
        (
            {"config__hardware": {"cpu": "the cpu it really was", "cpu_count": 2}},
            [
                ValueChange("config.hardware.cpu", "test cpu", "the cpu it really was"),
                ValueChange("config.hardware.cpu_count", None, "2"),
            ],
        ),
        ({"tags": ["ngram", "cpu"]}, [ValueChange("tags", "ngram", "ngram, cpu")]),
        ({"tags": []}, [ValueChange("tags", "ngram", "(none)")]),
        ({"context": "x" * 150}, [ValueChange("context", "Why we ran it.", "x" * 99 + "…")]),
        (
            {"config__variants__ngram__args": ["--max-num-seqs", "8"]},
            [ValueChange("config.variants.ngram.args", "--max-num-seqs, 4", "--max-num-seqs, 8")],
        ),
        (  # shown apart: the status line, the verdict and metric rows, the caveats
            {
                "status": "superseded",
                "verdict__outcome": "inconclusive",
                "verdict__per_class": {"coding": {"outcome": "inconclusive", "effect": 0.0}},
                "verdict__caveats": ["one round"],
                "measurements__ngram__coding__decode_tok_s": {"n": 10, "mean": 47.0},
            },
            [],
        ),
        (
            {"spec_decode__ngram__drafts": 101},
            [ValueChange("spec_decode.ngram.drafts", "100", "101")],
        ),
        (  # what a class rests on, old and new; its effect and each prompt's are shown apart
            {
                "verdict__per_class": {
                    "coding": {
                        "outcome": "refuted",
                        "effect": -0.25,
                        "ci_low": -0.3,
                        "ci_high": -0.2,
                        "n_baseline": 20,
                        "per_unit": {0: -0.25},
                    }
                }
            },
            [ValueChange("verdict.per_class.coding.n_baseline", None, "20")],
        ),
    ],
    ids=[
        "hardware",
        "tags",
        "no-tags",
        "long",
        "arguments",
        "shown-apart",
        "spec-decode",
        "class-base",
    ],
)
def test_a_changed_record_lists_each_value_that_differs_old_and_new(
    changes: dict[str, Any], values: list[ValueChange]
) -> None:
    [change] = diff.compare(side("a", record()), side("b", record(**changes))).records
    assert change.values == values


def test_two_long_values_are_cut_where_they_differ_not_where_they_agree() -> None:
    rule = "the rule: " + "word " * 30 + "ends {}"
    base, head = (record(verdict__rule=rule.format(end)) for end in ("here", "there"))
    [change] = diff.compare(side("a", base), side("b", head)).records
    assert change.values == [
        ValueChange("verdict.rule", "…word word word ends here", "…word word word ends there")
    ]


def test_a_record_s_evidence_base() -> None:
    measured = record(
        workload={
            "prompt_suite": "bench/prompts/seed.jsonl",
            "classes": ["coding"],
            "max_tokens": 128,
        },
        provenance={"source": "measured", "tool": "kbgen 0.1.0"},
        verdict__per_class={
            "coding": {
                "outcome": "refuted",
                "effect": -0.26,
                "prompts": 12,
                "rounds": 2,
                "n_baseline": 24,
                "n_variant": 23,
            }
        },
    )
    imported = record(
        provenance={"source": "imported", "tool": "kbgen 0.1.0", "reference": "vllm bench serve"},
        verdict__per_class={
            "coding": {"outcome": "refuted", "effect": -0.2, "n_baseline": 8, "n_variant": 8}
        },
    )
    assert diff.compare(side("a"), side("b", measured)).records[0].evidence == EvidenceBase(
        "measured",
        "kbgen 0.1.0",
        "bench/prompts/seed.jsonl",
        128,
        None,
        ("baseline", "ngram"),
        [ClassBase("coding", 12, 2, 24, 23)],
    )
    [change] = diff.compare(side("a", record()), side("b", imported)).records
    assert change.evidence is not None
    assert (change.evidence.source, change.evidence.by) == ("imported", "vllm bench serve")
    assert change.evidence.classes == [ClassBase("coding", None, None, 8, 8)]
    [gone] = diff.compare(side("a", record()), side("b")).records
    assert gone.evidence is None and gone.caveats == []


@pytest.mark.parametrize(
    ("workload", "said"),
    [
        ({"trace": {"path": "t.csv"}}, "output lengths the trace's"),
        (
            {"trace": {"path": "t.csv", "max_output_tokens": 256}},
            "output lengths the trace's, at most 256 tokens",
        ),
        (
            {
                "synthetic": {
                    "count": 8,
                    "input_tokens": {"mean": 64},
                    "output_tokens": {"mean": 32},
                }
            },
            "32 output tokens per request",
        ),
        (
            {
                "synthetic": {
                    "count": 8,
                    "input_tokens": {"mean": 64},
                    "output_tokens": {"distribution": "uniform", "mean": 32, "min": 8, "max": 56},
                }
            },
            "output lengths drawn (uniform, mean 32)",
        ),
    ],
)
def test_a_trace_s_or_a_draw_s_output_lengths_are_said(
    workload: dict[str, object], said: str
) -> None:
    """A record without max_tokens whose requests took their lengths from a trace or a draw
    says so, not `output length not recorded`."""
    head = record(
        workload={"prompt_suite": "t", "classes": ["trace"], "ignore_eos": True, **workload}
    )
    [change] = diff.compare(side("a"), side("b", head)).records
    assert change.evidence is not None and change.evidence.max_tokens is None
    assert change.evidence.lengths == said
    page = render.template(
        "diff.md.j2", None, marker=render.Markdown(""), d=diff.compare(side("a"), side("b", head))
    )
    assert f"{said} (EOS ignored)" in page and "output length not recorded" not in page


def test_a_record_s_caveats_new_and_gone_against_the_base() -> None:
    base = record(verdict__caveats=["coding: an arm drifted 9.0% across rounds", "one round"])
    head = record(
        verdict__caveats=["one round", "2 of 4 windows ran on a busy machine"],
        verdict__reasons=["coding: no usable decode_tok_s in ngram"],
    )
    [added] = diff.compare(side("a"), side("b", head)).records
    assert added.caveats == [
        Caveat(None, "one round"),
        Caveat(None, "2 of 4 windows ran on a busy machine"),
        Caveat("coding", "no usable decode_tok_s in ngram"),
    ]
    [changed] = diff.compare(side("a", base), side("b", head)).records
    assert changed.caveats == [
        Caveat(None, "one round"),
        Caveat(None, "2 of 4 windows ran on a busy machine", "new"),
        Caveat("coding", "no usable decode_tok_s in ngram", "new"),
        Caveat("coding", "an arm drifted 9.0% across rounds", "gone"),
    ]


# --- verdict rows ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_class", "rows"),
    [
        (  # flipped by new evidence
            {"coding": {"outcome": "supported", "effect": 0.12, "ci_low": 0.08, "ci_high": 0.16}},
            [VerdictRow("coding", "refuted", "supported", -0.26, 0.12, (0.08, 0.16))],
        ),
        (  # a class added without an interval; the unchanged class is not repeated
            {
                "coding": {"outcome": "refuted", "effect": -0.26, "ci_low": -0.3, "ci_high": -0.2},
                "math": {"outcome": "inconclusive", "effect": 0.01},
            },
            [VerdictRow("math", None, "inconclusive", None, 0.01, None)],
        ),
        (  # a class dropped
            {},
            [VerdictRow("coding", "refuted", None, -0.26, None, None)],
        ),
    ],
)
def test_verdict_rows_are_the_classes_whose_verdict_changed(
    per_class: dict[str, Any], rows: list[VerdictRow]
) -> None:
    [change] = diff.compare(
        side("a", record()), side("b", record(verdict__per_class=per_class))
    ).records
    assert change.verdicts == rows


# --- metric deltas ---------------------------------------------------------------------------


def metric_rows(before: dict[str, Any], after: dict[str, Any], all_rows: bool) -> list[MetricRow]:
    base = record(measurements__ngram__coding__decode_tok_s=before)
    head = record(measurements__ngram__coding__decode_tok_s=after)
    changes = diff.compare(side("a", base), side("b", head), all_rows=all_rows).records
    return [m for c in changes for m in c.metrics]


def test_a_metric_delta_with_its_interval() -> None:
    [row] = metric_rows(summary(100.0, 20.0, 16), summary(110.0, 22.0, 16), all_rows=False)
    assert (row.variant, row.cls, row.metric, row.unit) == (
        "ngram",
        "coding",
        "decode_tok_s",
        "tok/s",
    )
    # each mean's 95% interval: mean ± 1.96 · stdev / √n
    assert isinstance(row.base, Estimate) and isinstance(row.head, Estimate)
    assert dataclasses.astuple(row.base) == pytest.approx((100.0, 90.2, 109.8, 16))
    assert dataclasses.astuple(row.head) == pytest.approx((110.0, 99.22, 120.78, 16))
    assert row.change == pytest.approx(0.10)
    # the delta method: 1.96 · 1.1 · √(25/100² + 30.25/110²) = 0.15245
    assert row.change_ci == pytest.approx((0.10 - 0.15245, 0.10 + 0.15245), abs=1e-5)


@pytest.mark.parametrize(
    ("before", "after", "change", "base_interval"),
    [
        (summary(100.0), summary(90.0), -0.10, (None, None)),  # no stdev, no n: means only
        (summary(100.0, 20.0), summary(90.0, 18.0), -0.10, (None, None)),  # n unknown
        (summary(100.0, 20.0, 16), summary(90.0), -0.10, (90.2, 109.8)),  # one side's only
        (summary(0.0, 1.0, 16), summary(90.0, 1.0, 16), None, (-0.49, 0.49)),  # no ratio of 0
    ],
)
def test_a_metric_delta_without_an_interval(
    before: dict[str, Any],
    after: dict[str, Any],
    change: float | None,
    base_interval: tuple[float | None, float | None],
) -> None:
    [row] = metric_rows(before, after, all_rows=False)
    assert row.change is None if change is None else row.change == pytest.approx(change)
    assert row.change_ci is None
    assert row.base is not None
    assert (row.base.low, row.base.high) == pytest.approx(base_interval)


@pytest.mark.parametrize(("all_rows", "shown"), [(False, 1), (True, 2)])
def test_unchanged_metric_rows_only_with_all_rows(all_rows: bool, shown: int) -> None:
    rows = metric_rows(summary(100.0), summary(90.0), all_rows)
    assert len(rows) == shown
    unchanged = [row for row in rows if row.variant == "baseline"]
    assert [row.change for row in unchanged] == ([0.0] if all_rows else [])


def test_a_new_record_shows_every_metric_with_all_rows() -> None:
    new = record(measurements__baseline__coding__ttft_ms=summary(80.0))
    default = diff.compare(side("a"), side("b", new)).records[0].metrics
    every = diff.compare(side("a"), side("b", new), all_rows=True).records[0].metrics
    assert {row.metric for row in default} == {"decode_tok_s"}  # the primary metric
    assert [(row.metric, row.unit) for row in every if row.metric != "decode_tok_s"] == [
        ("ttft_ms", "ms")
    ]


# --- task changes ----------------------------------------------------------------------------

TICKED = TaskChange(
    plan="next-steps",
    task="test-ngram",
    text="Test n-gram speculative decoding",
    ticked=True,
    record="ngram-test",
    outcome="refuted",
    superseded_by=None,
)
UNTICKED = dataclasses.replace(TICKED, ticked=False)
RERUN = record(id="ngram-rerun", title="n-gram re-run", resolves=[], supersedes=["ngram-test"])
NO_PLANS: tuple[Plan, ...] = ()


@pytest.mark.parametrize(
    ("base", "head", "head_plans", "changes"),
    [
        ((), (record(),), None, [TICKED]),
        ((record(status="running"),), (record(),), None, [TICKED]),  # concluded now
        ((record(),), (record(title="retitled"),), None, []),  # still ticked: no change
        ((record(),), (), None, [UNTICKED]),  # its evidence removed
        (
            (record(),),
            (record(status="superseded"),),
            None,
            [dataclasses.replace(UNTICKED, superseded_by="ngram-test")],
        ),
        (
            (record(),),
            (record(), RERUN),
            None,
            [dataclasses.replace(UNTICKED, superseded_by="ngram-rerun")],
        ),
        ((record(),), (record(),), NO_PLANS, [dataclasses.replace(UNTICKED, plan_removed=True)]),
    ],
    ids=["added", "concluded", "unchanged", "removed", "superseded", "replaced", "plan-removed"],
)
def test_task_changes(
    base: tuple[Record, ...],
    head: tuple[Record, ...],
    head_plans: tuple[Plan, ...] | None,
    changes: list[TaskChange],
) -> None:
    assert diff.compare(side("a", *base), side("b", *head, plans=head_plans)).tasks == changes


# --- warnings --------------------------------------------------------------------------------

REMEASURED = {"coding": {"decode_tok_s": {"n": 10, "mean": 47.0}}}
MISMATCH = "compared despite: engine versions differ (0.32.0 vs 0.33.0) (--allow-mismatch)"


@pytest.mark.parametrize(
    ("base", "head", "warnings"),
    [
        (
            (),
            (record(verdict__caveats=[MISMATCH, "2 requests failed"]),),
            [f"`ngram-test` compares its variants {MISMATCH}"],
        ),
        (
            (record(),),
            (record(config__engine__version="0.33.0", measurements__ngram=REMEASURED),),
            [
                "`ngram-test` was re-measured with a different engine version (0.32.0 vs "
                "0.33.0): its metric deltas compare two setups"
            ],
        ),
        (
            (record(),),
            (record(config__hardware={"cpu": "another cpu"}, measurements__ngram=REMEASURED),),
            [
                "`ngram-test` was re-measured with a different hardware: its metric deltas "
                "compare two setups"
            ],
        ),
        (
            (record(),),
            (
                record(
                    config__hardware={"cpu": "test cpu", "host": "b"},
                    measurements__ngram=REMEASURED,
                ),
            ),
            [],
        ),
        # the setup's description fixed, nothing measured again: no claim of a re-measurement
        ((record(),), (record(config__engine__version="0.33.0"),), []),
        ((record(),), (record(config__hardware={"cpu": "the right cpu"}),), []),
        (
            (record(),),
            (
                record(),
                record(
                    id="ngram-rerun",
                    supersedes=["ngram-test"],
                    resolves=[],
                    config__engine__version="0.33.0",
                ),
            ),
            [
                "`ngram-rerun` supersedes `ngram-test`, which had a different engine version "
                "(0.32.0 vs 0.33.0): compare the verdicts, not the numbers",
                "`next-steps#test-ngram` is resolved only by `ngram-test`, whose evidence was "
                "superseded by `ngram-rerun`: re-check the task",
            ],
        ),
        (
            (record(),),
            (record(status="superseded"),),
            [
                "`next-steps#test-ngram` is resolved only by `ngram-test`, which is marked "
                "superseded: re-check the task"
            ],
        ),
    ],
    ids=[
        "mismatch",
        "engine",
        "hardware",
        "host-only",
        "engine-described",
        "hardware-described",
        "superseded-by",
        "marked-superseded",
    ],
)
def test_warnings(base: tuple[Record, ...], head: tuple[Record, ...], warnings: list[str]) -> None:
    assert diff.compare(side("a", *base), side("b", *head)).warnings == warnings


@pytest.mark.parametrize(
    "unchanged",
    [record(verdict__caveats=[MISMATCH]), record(status="superseded")],
    ids=["mismatch", "superseded"],
)
def test_what_did_not_change_raises_no_warning(unchanged: Record) -> None:
    result = diff.compare(side("a", unchanged), side("b", unchanged))
    assert result.warnings == [] and result.empty


def test_a_changed_plan_repeats_the_warning_of_its_superseded_evidence() -> None:
    plan = yaml.safe_load(PLAN)
    plan["title"] = "Next steps, revised"
    revised = (Plan.model_validate(plan),)
    old = record(status="superseded")
    result = diff.compare(side("a", old), side("b", old, plans=revised))
    assert result.warnings == [
        "`next-steps#test-ngram` is resolved only by `ngram-test`, which is marked superseded: "
        "re-check the task"
    ]


# --- JSON ------------------------------------------------------------------------------------


def test_to_json_is_the_difference_as_plain_data() -> None:
    base = record(measurements__ngram__coding__decode_tok_s=summary(100.0, 20.0, 16))
    head = record(measurements__ngram__coding__decode_tok_s=summary(110.0, 22.0, 16))
    data = json.loads(json.dumps(diff.to_json(diff.compare(side("a", base), side("b", head)))))
    assert data["format"] == "kbgen-diff/1"
    assert (data["base"], data["head"], data["tasks"], data["warnings"]) == ("a", "b", [], [])
    [change] = data["records"]
    assert change["id"] == "ngram-test" and change["status"] == ["concluded", "concluded"]
    [row] = change["metrics"]
    assert row["head"] == {
        "mean": 110.0,
        "low": pytest.approx(99.22),
        "high": pytest.approx(120.78),
        "n": 16,
    }
    assert row["change"] == pytest.approx(0.1) and len(row["change_ci"]) == 2


def test_a_change_that_introduces_or_resolves_a_contradiction_says_so(tmp_path: Any) -> None:
    from kbgen.kb import loading
    from tests.support import replicated

    kb = loading.load([replicated.knowledge_base(tmp_path)])
    records = list(kb.records.values())
    without = [r for r in records if r.id != "contradiction"]
    settled = [
        r if r.id != "contradiction" else r.model_copy(update={"status": "superseded"})
        for r in records
    ]
    introduced = diff.compare(side("base", *without), side("head", *records))
    expected = [
        (older, newer, "coding", "refuted vs supported")
        for older, newer in sorted(replicated.CONTRADICTIONS)
    ]
    assert [(c.older, c.newer, c.cls, c.why) for c in introduced.contradictions] == expected
    assert all(c.introduced for c in introduced.contradictions)
    resolved = diff.compare(side("base", *records), side("head", *settled))
    assert [(c.older, c.newer) for c in resolved.contradictions] == [e[:2] for e in expected]
    assert not any(c.introduced for c in resolved.contradictions)
    assert diff.compare(side("base", *records), side("head", *records)).contradictions == []
    assert diff.to_json(introduced)["contradictions"][0]["introduced"] is True


def test_a_secret_in_a_changed_value_is_masked_on_both_sides() -> None:
    """The comment is public: a token a branch adds, or one it removes (then in the old
    column), is never shown."""
    token = "hf_" + "a1B2c3D4e5" * 4
    base = record(config__server_env={"HF_TOKEN": token})
    head = record(
        config__server_env={"HF_TOKEN": token + "x"},
        config__server_args=["--api-key", "sk-" + "z9" * 20],
    )
    [change] = diff.compare(side("a", base), side("b", head)).records
    shown = " ".join(f"{v.old} {v.new}" for v in change.values)
    assert change.values and token not in shown and "z9z9" not in shown


# --- sweeps ----------------------------------------------------------------------------------

Edits = Mapping[tuple[tuple[str, int], str], dict[str, Any] | None]  # (variant, c), class: said
Row = tuple[str, str, str | None, str | None]  # a cell row: where, class, base and head outcome


def sweep_with(
    cells: Edits | None = None,
    best: list[dict[str, Any]] | None = None,
) -> Record:
    by_cell = copy.deepcopy(swept.CELLS)
    for (where, cls), said in (cells or {}).items():
        if said is None:
            del by_cell[where][cls]
        else:
            by_cell[where][cls] = said
    data = swept.sweep(cells=by_cell, best=swept.BEST if best is None else best)
    return Record.model_validate(data)


SUPPORTED = swept.cls("supported", 0.12, 0.06, 0.18)
# what changed in the sweep's cells, and the rows that say so: (where, class, base, head)
CELL_CHANGES: dict[str, tuple[Edits, list[Row]]] = {
    "an outcome": (
        {(("k5", 8), "coding"): SUPPORTED},
        [("k5 at concurrency 8", "coding", "inconclusive", "supported")],
    ),
    "a number, not the outcome": (
        {(("k3", 8), "math"): swept.cls("refuted", -0.2, -0.3, -0.1)},
        [("k3 at concurrency 8", "math", "refuted", "refuted")],
    ),
    "a cell gone": (
        {(("k5", 1), "math"): None},
        [("k5 at concurrency 1", "math", "inconclusive", None)],
    ),
    "nothing": ({}, []),
}


@pytest.mark.parametrize(("edits", "rows"), CELL_CHANGES.values(), ids=CELL_CHANGES.keys())
def test_a_sweep_s_cells_that_changed_are_reported(edits: Edits, rows: list[Row]) -> None:
    base, head = sweep_with(), sweep_with(edits)
    changes = diff.compare(side("a", base), side("b", head)).records
    found = [(c.where, c.cls, c.base_outcome, c.head_outcome) for r in changes for c in r.cells]
    assert found == rows
    back = diff.compare(side("a", head), side("b", base)).records  # the other way: it appears
    assert [(c.where, c.base_outcome, c.head_outcome) for r in back for c in r.cells] == [
        (where, after, before) for where, _, before, after in rows
    ]


def test_a_new_sweep_reports_every_cell_with_its_interval() -> None:
    [change] = diff.compare(side("a"), side("b", sweep_with())).records
    assert len(change.cells) == 8  # k5 at concurrency 8 has no data in math: still a cell
    [k3] = [c for c in change.cells if c.where == "k3 at concurrency 1" and c.cls == "coding"]
    assert (k3.base_outcome, k3.head_outcome, k3.head_effect, k3.head_ci) == (
        None,
        "supported",
        0.3,
        (0.12, 0.5),
    )
    assert [(b.at, b.head_variant, b.head_probability) for b in change.best] == [
        ("concurrency 1", "k3", 0.97),
        ("concurrency 8", "baseline", 0.61),
    ]


def test_a_sweep_s_best_configuration_that_changed_is_reported() -> None:
    moved = [swept.BEST[0], {**swept.BEST[1], "variant": "k5", "probability_best": 0.55}]
    [change] = diff.compare(side("a", sweep_with()), side("b", sweep_with(best=moved))).records
    assert change.cells == []
    assert [
        (b.at, b.base_variant, b.head_variant, b.base_probability, b.head_probability)
        for b in change.best
    ] == [("concurrency 8", "baseline", "k5", 0.61, 0.55)]
    assert not [v for v in change.values if v.path.startswith("verdict.best")]


def test_an_a_b_record_has_no_cell_or_best_rows() -> None:
    [change] = diff.compare(
        side("a", record()), side("b", record(verdict__outcome="supported"))
    ).records
    assert change.cells == [] and change.best == []


def test_the_comment_shows_a_sweep_s_changed_cells_and_best() -> None:
    from kbgen.site import render

    edits = {(("k5", 8), "coding"): SUPPORTED, (("k5", 1), "math"): None}
    moved = [swept.BEST[0], {**swept.BEST[1], "variant": "k5", "probability_best": 0.55}]
    result = diff.compare(side("abc1234", sweep_with()), side("def5678", sweep_with(edits, moved)))
    comment = render.template("diff.md.j2", d=result, marker=render.Markdown(diff.COMMENT_MARKER))
    assert_golden(comment, golden_path("diff/sweep.md"))


def test_a_sweep_s_cell_that_comes_to_contradict_an_a_b_record_names_the_cell() -> None:
    a_b = Record.model_validate(swept.CONTRADICTION)
    agreeing = {(("k3", 8), "coding"): SUPPORTED, (("k3", 8), "math"): SUPPORTED}
    result = diff.compare(side("a", a_b, sweep_with(agreeing)), side("b", a_b, sweep_with()))
    [c] = result.contradictions
    assert (c.older, c.older_cell, c.newer, c.newer_cell, c.cls, c.introduced) == (
        "ab-k3-c8",
        None,
        "sweep",
        "k3 at concurrency 8",
        "coding",
        True,
    )
