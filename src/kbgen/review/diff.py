"""What a change did to the evidence: two knowledge bases in, a reviewable difference out.

Pure functions over loaded knowledge bases; `to_json` gives it to machines, and
`review.revisions.output` renders it as a pull-request comment (docs/design.md, "Review").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from kbgen.kb.cards import Card, task_states
from kbgen.kb.loading import KnowledgeBase
from kbgen.kb.models import METRIC_UNITS, MetricStats, Plan, Record, Workload
from kbgen.kb.replications import evidence
from kbgen.review import sweeps
from kbgen.review.sweeps import BestRow, CellRow
from kbgen.review.values import ValueChange, value_changes

COMMENT_MARKER = "<!-- kbgen-diff -->"  # how a CI job finds its own comment to update


@dataclass(frozen=True)
class Estimate:
    """A metric's mean with its 95% interval (None when n or stdev is unknown)."""

    mean: float
    low: float | None
    high: float | None
    n: int | None

    @classmethod
    def of(cls, stats: MetricStats | None) -> Estimate | None:
        if stats is None:
            return None
        low, high = stats.interval() or (None, None)
        return cls(stats.mean, low, high, stats.n)


@dataclass(frozen=True)
class MetricRow:
    variant: str
    cls: str
    metric: str
    unit: str
    base: Estimate | None
    head: Estimate | None
    change: float | None  # head mean / base mean - 1
    change_ci: tuple[float, float] | None  # its 95% interval, when both sides have n and stdev


@dataclass(frozen=True)
class VerdictRow:
    """One prompt class's verdict on both sides: the variant's effect against the baseline."""

    cls: str
    base_outcome: str | None
    head_outcome: str | None
    base_effect: float | None
    head_effect: float | None
    head_ci: tuple[float, float] | None


@dataclass(frozen=True)
class ClassBase:
    """What one class's verdict rests on: its paired prompts and rounds, and the requests of
    each arm."""

    cls: str
    prompts: int | None
    rounds: int | None
    n_baseline: int | None
    n_variant: int | None


@dataclass(frozen=True)
class EvidenceBase:
    """What a record's numbers rest on: where they come from (`source`: measured, imported or
    reported; `by`: the kbgen that measured them, the tool they were imported from, where they
    were reported), the prompts, the output length, and per class the requests of each arm."""

    source: str | None
    by: str | None
    prompts: str | None
    max_tokens: int | None
    ignore_eos: bool | None
    arms: tuple[str, str] | None  # (baseline, variant judged)
    classes: list[ClassBase] = field(default_factory=list)
    lengths: str | None = None  # where each request's output length came from, without max_tokens

    @property
    def counted(self) -> bool:
        """Whether the record says how many requests any class had."""
        return any(c.n_baseline is not None or c.n_variant is not None for c in self.classes)

    @classmethod
    def of(cls, record: Record) -> EvidenceBase:
        p, w, verdict = record.provenance, record.workload, record.verdict
        by = None
        if p is not None:
            measured = f"kbgen {p.kbgen.version}" if p.kbgen else p.tool
            by = measured if p.source == "measured" else p.reference
        baseline = record.config.baseline if record.config else None
        return cls(
            p.source if p else None,
            by,
            w.prompt_suite if w else None,
            w.max_tokens if w else None,
            w.ignore_eos if w else None,
            (baseline, verdict.variant) if verdict and baseline else None,
            [
                ClassBase(name, v.prompts, v.rounds, v.n_baseline, v.n_variant)
                for name, v in (verdict.per_class.items() if verdict else ())
            ],
            _lengths(w),
        )


def _lengths(w: Workload | None) -> str | None:
    """Output lengths each request drew (a synthetic draw) or was given (a trace)."""
    if w is None:
        return None
    if w.trace is not None:
        cut = w.trace.max_output_tokens
        return "output lengths the trace's" + (f", at most {cut} tokens" if cut else "")
    if w.synthetic is not None:
        out = w.synthetic.output_tokens
        if out.distribution == "fixed":
            return f"{out.mean} output tokens per request"
        return f"output lengths drawn ({out.distribution}, mean {out.mean})"
    return None


@dataclass(frozen=True)
class Caveat:
    """One thing that limits a record's verdict (`Verdict.limits`): about one class, or the
    whole comparison (None); `change`: "new" or "gone" against the base, "" otherwise."""

    cls: str | None
    text: str
    change: Literal["", "new", "gone"] = ""


# What a record measured: when none of these changed, its numbers were not measured again
MEASURED = ("measurements", "spec_decode", "raw_samples", "effective", "startup_s")


@dataclass(frozen=True)
class RecordChange:
    id: str
    title: str
    change: str  # "added", "changed" or "removed"
    status: tuple[str | None, str | None]  # (base, head)
    outcome: tuple[str | None, str | None]
    fields: list[str] = field(default_factory=list)  # top-level fields that differ
    verdicts: list[VerdictRow] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    # of a changed record: "re-measured" (what it measured changed), "re-judged" (its verdict
    # did, not its measurements) or "metadata" (neither: a title, tags, a description fixed)
    kind: str | None = None
    evidence: EvidenceBase | None = None  # the head's; None for a removed record
    caveats: list[Caveat] = field(default_factory=list)
    values: list[ValueChange] = field(default_factory=list)  # of a changed record
    cells: list[CellRow] = field(default_factory=list)  # a sweep's cells that differ
    best: list[BestRow] = field(default_factory=list)  # a sweep's best configurations that do
    level: str = "95%"  # the head's per-class intervals' level: a sweep's are its family's


@dataclass(frozen=True)
class TaskChange:
    plan: str
    task: str
    text: str
    ticked: bool  # True: newly ticked; False: newly unticked
    record: str | None  # the record that ticks it, or whose evidence no longer does
    outcome: str | None
    superseded_by: str | None  # the record itself when it is marked superseded
    plan_removed: bool = False


@dataclass(frozen=True)
class ContradictionChange:
    """Two records of one question that came to disagree decisively, or no longer do."""

    older: str
    newer: str
    cls: str  # "": their overall verdicts
    why: str
    introduced: bool  # True: the change introduced it; False: it resolved it
    older_cell: str | None = None  # where a side is a sweep: its cell (`k3 at concurrency 8`)
    newer_cell: str | None = None


@dataclass(frozen=True)
class Difference:
    base: str  # how the two sides are named: a short commit id, or "working tree"
    head: str
    records: list[RecordChange]
    tasks: list[TaskChange]
    warnings: list[str]
    contradictions: list[ContradictionChange] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.records or self.tasks or self.warnings or self.contradictions)


@dataclass(frozen=True)
class Side:
    """One side of a comparison: every record's card, and full models where they are needed.

    `records` holds at least every record that differs from the other side and the records
    those supersede — on both sides where they exist, so that a record present on one side
    only was truly added or removed. A knowledge base loaded in full is a side as it is.
    """

    name: str  # a short commit id, or "working tree"
    cards: dict[str, Card]  # every valid record
    records: dict[str, Record]
    plans: dict[str, Plan]

    @classmethod
    def of(cls, name: str, kb: KnowledgeBase) -> Side:
        cards = {r.id: Card.of(r) for r in kb.records.values()}
        return cls(name, cards, dict(kb.records), dict(kb.plans))


def compare(base: Side, head: Side, all_rows: bool = False) -> Difference:
    """Everything that differs between two sides, in a stable order.

    Warnings concern what changed: a record that did not change, in a plan that did not,
    raises none (it did when it changed).
    """
    changes = []
    for record_id in sorted(base.records.keys() | head.records.keys()):
        old, new = base.records.get(record_id), head.records.get(record_id)
        if old is not None and new is not None and _dump(old) == _dump(new):
            continue
        changes.append(_record_change(old, new, all_rows))
    return Difference(
        base.name,
        head.name,
        changes,
        _task_changes(base, head),
        _warnings(base, head),
        _contradiction_changes(base, head),
    )


def _contradiction_changes(base: Side, head: Side) -> list[ContradictionChange]:
    """The contradictions (`kb.replications`) on one side only: introduced, or resolved."""
    sides = [
        {
            (c.older.id, c.newer.id, c.cls, c.older.cell or "", c.newer.cell or ""): c.why
            for c in evidence(side.cards.values()).contradictions
        }
        for side in (base, head)
    ]
    return [
        ContradictionChange(
            older,
            newer,
            cls,
            side[(older, newer, cls, older_cell, newer_cell)],
            introduced=side is sides[1],
            older_cell=older_cell or None,
            newer_cell=newer_cell or None,
        )
        for side, other in ((sides[1], sides[0]), (sides[0], sides[1]))
        for older, newer, cls, older_cell, newer_cell in sorted(side.keys() - other.keys())
    ]


def to_json(difference: Difference) -> dict[str, Any]:
    return {"format": "kbgen-diff/1", **dataclasses.asdict(difference)}


def _dump(record: Record) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude_none=True)


def _record_change(old: Record | None, new: Record | None, all_rows: bool) -> RecordChange:
    either = new or old
    assert either is not None
    change = "added" if old is None else "removed" if new is None else "changed"
    fields: list[str] = []
    values: list[ValueChange] = []
    if old is not None and new is not None:
        fields = _fields(old, new)
        values = value_changes(_dump(old), _dump(new))
    return RecordChange(
        id=either.id,
        title=either.title,
        change=change,
        status=(_status(old), _status(new)),
        outcome=(_outcome(old), _outcome(new)),
        fields=fields,
        verdicts=_verdict_rows(old, new),
        metrics=[] if new is None else _metric_rows(old, new, all_rows),
        kind=_kind(fields) if change == "changed" else None,
        evidence=None if new is None else EvidenceBase.of(new),
        caveats=[] if new is None else _caveats(old, new),
        values=values,
        cells=sweeps.cell_rows(old, new),
        best=sweeps.best_rows(old, new),
        level=_level(new or old),
    )


def _level(record: Record | None) -> str:
    """The level of a record's per-class intervals: 95%, a sweep's its family's (`99.58%`)."""
    family = record.verdict.family if record is not None and record.verdict else None
    return "95%" if family is None else f"{family.cell_confidence:.2%}"


def _fields(old: Record, new: Record) -> list[str]:
    """The top-level fields that differ."""
    before, after = _dump(old), _dump(new)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _kind(fields: list[str]) -> str:
    """What a change to a record was, from the top-level fields that differ."""
    if any(name in MEASURED for name in fields):
        return "re-measured"
    return "re-judged" if "verdict" in fields else "metadata"


def _caveats(old: Record | None, new: Record) -> list[Caveat]:
    """What limits the head's verdict; of a changed record, each marked new against the base's,
    and the base's that are gone after them."""
    said = [(cls, text) for cls, texts in _limits(new) for text in texts]
    if old is None:
        return [Caveat(cls, text) for cls, text in said]
    before = [(cls, text) for cls, texts in _limits(old) for text in texts]
    return [Caveat(cls, text, "" if (cls, text) in before else "new") for cls, text in said] + [
        Caveat(cls, text, "gone") for cls, text in before if (cls, text) not in said
    ]


def _limits(record: Record) -> list[tuple[str | None, list[str]]]:
    return record.verdict.limits() if record.verdict else []


def _status(record: Record | None) -> str | None:
    return None if record is None else str(record.status)


def _outcome(record: Record | None) -> str | None:
    return None if record is None or record.verdict is None else str(record.verdict.outcome)


def _verdict_rows(old: Record | None, new: Record | None) -> list[VerdictRow]:
    before = old.verdict.per_class if old is not None and old.verdict else {}
    after = new.verdict.per_class if new is not None and new.verdict else {}
    rows = []
    for cls in sorted(before.keys() | after.keys()):
        b, a = before.get(cls), after.get(cls)
        if b is not None and a is not None and b == a:
            continue
        ci = (a.ci_low, a.ci_high) if a and a.ci_low is not None and a.ci_high is not None else None
        rows.append(
            VerdictRow(
                cls,
                str(b.outcome) if b else None,
                str(a.outcome) if a else None,
                b.effect if b else None,
                a.effect if a else None,
                ci,
            )
        )
    return rows


def _metric_rows(old: Record | None, new: Record, all_rows: bool) -> list[MetricRow]:
    """Rows that changed; of a new record, those of its primary metric; with `all_rows`, all."""
    before = old.measurements if old is not None else {}
    primary = new.hypothesis.primary_metric if new.hypothesis else None
    keys = {
        (variant, cls, metric)
        for side in (before, new.measurements)
        for variant, by_class in side.items()
        for cls, by_metric in by_class.items()
        for metric in by_metric
    }
    rows = []
    for variant, cls, metric in sorted(keys):
        b = before.get(variant, {}).get(cls, {}).get(metric)
        a = new.measurements.get(variant, {}).get(cls, {}).get(metric)
        if not all_rows and (b == a or (old is None and primary and metric != primary)):
            continue
        change = a.mean / b.mean - 1 if a is not None and b is not None and b.mean else None
        unit = METRIC_UNITS.get(metric, "")
        estimates = (Estimate.of(b), Estimate.of(a))
        rows.append(MetricRow(variant, cls, metric, unit, *estimates, change, _change_ci(b, a)))
    return rows


def _change_ci(base: MetricStats | None, head: MetricStats | None) -> tuple[float, float] | None:
    """95% interval of `head.mean / base.mean - 1` by the delta method (independent samples)."""
    if base is None or head is None or not base.mean or not head.mean:
        return None
    if base.stdev is None or head.stdev is None or not base.n or not head.n:
        return None
    ratio = head.mean / base.mean
    spread = math.sqrt(
        (head.stdev**2 / head.n) / head.mean**2 + (base.stdev**2 / base.n) / base.mean**2
    )
    half = 1.96 * abs(ratio) * spread
    return ratio - 1 - half, ratio - 1 + half


def _task_changes(base: Side, head: Side) -> list[TaskChange]:
    base_cards, head_cards = list(base.cards.values()), list(head.cards.values())
    changes = []
    for plan_id in sorted(base.plans.keys() | head.plans.keys()):
        plan = head.plans.get(plan_id) or base.plans[plan_id]
        after = task_states(head_cards, head.plans[plan_id]) if plan_id in head.plans else {}
        before = task_states(base_cards, base.plans[plan_id]) if plan_id in base.plans else {}
        for task in plan.tasks:
            now, then = after.get(task.id), before.get(task.id)
            done, was_done = now is not None and now.done, then is not None and then.done
            if done == was_done:
                continue
            card = now.record if now is not None and now.done else then.record if then else None
            superseded = now.superseded_by if now is not None else None
            changes.append(
                TaskChange(
                    plan_id,
                    task.id,
                    task.text,
                    done,
                    card.id if card else None,
                    card.outcome if card else None,
                    superseded.id if superseded else None,
                    plan_removed=plan_id not in head.plans,
                )
            )
    return changes


def _warnings(base: Side, head: Side) -> list[str]:
    warnings = []
    for record_id, new in sorted(head.records.items()):
        old = base.records.get(record_id)
        if old is not None and _dump(old) == _dump(new):
            continue  # unchanged: its warnings were seen when it changed
        for caveat in new.verdict.caveats if new.verdict else []:
            if "--allow-mismatch" in caveat:
                warnings.append(f"`{record_id}` compares its variants {caveat}")
        # a setup that differs without new measurements is a description fixed, not a new setup
        if old is not None and _kind(_fields(old, new)) == "re-measured":
            for what in _setup_differences(old, new):
                warnings.append(
                    f"`{record_id}` was re-measured with a different {what}: its metric "
                    "deltas compare two setups"
                )
        for old_id in new.supersedes:
            replaced = head.records.get(old_id) or base.records.get(old_id)
            if replaced is None:
                continue
            for what in _setup_differences(replaced, new):
                warnings.append(
                    f"`{record_id}` supersedes `{old_id}`, which had a different {what}: "
                    "compare the verdicts, not the numbers"
                )
    touched = {
        record_id
        for record_id in base.records.keys() | head.records.keys()
        if record_id not in base.records
        or record_id not in head.records
        or _dump(base.records[record_id]) != _dump(head.records[record_id])
    }
    cards = list(head.cards.values())
    for plan_id, plan in sorted(head.plans.items()):
        plan_changed = plan_id not in base.plans or base.plans[plan_id] != plan
        for task_id, state in task_states(cards, plan).items():
            if state.superseded_by is None or state.record is None:
                continue
            if plan_changed or {state.record.id, state.superseded_by.id} & touched:
                how = (
                    "which is marked superseded"
                    if state.superseded_by.id == state.record.id
                    else f"whose evidence was superseded by `{state.superseded_by.id}`"
                )
                warnings.append(
                    f"`{plan_id}#{task_id}` is resolved only by `{state.record.id}`, {how}: "
                    "re-check the task"
                )
    return warnings


def _setup_differences(a: Record, b: Record) -> list[str]:
    if a.config is None or b.config is None:
        return []
    found = []
    if a.config.engine.version != b.config.engine.version:
        found.append(f"engine version ({a.config.engine.version} vs {b.config.engine.version})")
    if a.config.hardware.model_dump(exclude={"host"}) != b.config.hardware.model_dump(
        exclude={"host"}
    ):
        found.append("hardware")
    return found
