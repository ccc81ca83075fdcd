"""A record as pages, indexes and the replication rules need it (`Card`), and plan tasks' states.

A sweep's card carries its cells, each the question it asks and its classes' results, and its
best configuration per load; a task stands as the records that resolve it say (`task_states`)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from datetime import date
from typing import Any

from kbgen.kb import questions
from kbgen.kb.models import Figure, Load, Outcome, Plan, Range, Record, Status

MAX_LISTED = 20  # records listed beside one (its replications, a task's others); the rest counted


@dataclass(frozen=True)
class ClassResult:
    """One prompt class's verdict on a card: its outcome and the primary metric's relative
    change, with its 95% interval when there is one."""

    cls: str
    outcome: str
    effect: float
    interval: tuple[float, float] | None = None


# a load level as (name, value) pairs, by name (a request rate may be a float or "inf")
LoadItems = tuple[tuple[str, int | float | str], ...]
Positions = tuple[tuple[str, tuple[tuple[float, float] | None, ...]], ...]  # (arm, by position)


def load_words(load: Load | LoadItems) -> str:
    """`concurrency 8, max_tokens 256`; empty for the workload's one load."""
    items = load.items() if isinstance(load, dict) else load
    return ", ".join(f"{name} {value}" for name, value in sorted(items))


def configuration_words(variant: str, load: Load) -> str:
    """A sweep's cell as a record's caveats and pages name it: `ngram-k3 at concurrency 8,
    max tokens 256`, the load in its own order (`cell_words` is the cards' key)."""
    if not load:
        return variant
    return f"{variant} at " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in load.items())


def cell_words(variant: str, load: Load | LoadItems) -> str:
    """`k3 at concurrency 8`: a sweep's cell by its variant and load level."""
    at = load_words(load)
    return f"{variant} at {at}" if at else variant


@dataclass(frozen=True)
class SweepCell:
    """One comparison of a sweep: a variant at a load level against the baseline, the question
    it asks (`questions.question_of` of the variant at the load) and its classes' results (a
    class without data, which has no effect, left out: it has nothing to compare)."""

    variant: str
    load: LoadItems
    results: tuple[ClassResult, ...]
    question: str | None = None
    question_label: str | None = None
    question_facets: questions.Facets = ()

    @property
    def where(self) -> str:
        return cell_words(self.variant, self.load)

    @property
    def outcome(self) -> str:
        """The classes' common outcome; mixed when decisive outcomes differ; else inconclusive."""
        said = {r.outcome for r in self.results}
        if {Outcome.SUPPORTED, Outcome.REFUTED} <= said:
            return str(Outcome.MIXED)
        return said.pop() if len(said) == 1 else str(Outcome.INCONCLUSIVE)


@dataclass(frozen=True)
class SweepBest:
    """A sweep's best configuration at one load level, its probability of being the best, and
    the configurations that cannot be told apart from it."""

    load: LoadItems
    variant: str
    probability: float
    ties: tuple[str, ...] = ()


@dataclass(frozen=True)
class Card:
    """What plan pages, indexes and the replication rules need of a record: small, so it
    crosses processes cheaply."""

    id: str
    title: str
    status: Status
    created: date
    concluded: date | None
    tags: tuple[str, ...]
    outcome: str | None  # the verdict's, when there is one
    resolves: tuple[str, ...]
    supersedes: tuple[str, ...]
    results: tuple[ClassResult, ...] = ()  # per class, in the verdict's order
    metric: str | None = None  # the hypothesis' primary metric
    statement: str | None = None  # the hypothesis (Markdown)
    variant: str | None = None  # the arm judged against the baseline
    acceptance: tuple[float, float] | None = None  # its draft acceptance rate (low, high)
    decision: str | None = None  # Markdown
    consequences: str | None = None  # Markdown
    engine_version: str | None = None
    question: str | None = None  # `questions.question_of`'s key
    question_label: str | None = None
    question_facets: questions.Facets = ()  # what the question is made of, to tell two apart
    model: str | None = None  # the model's name
    hardware: str | None = None  # `questions.hardware`: `8 × NVIDIA H200`
    compared: str | None = None  # `ngram vs baseline`: the arm judged against the baseline
    cells: tuple[SweepCell, ...] = ()  # a sweep's, in the verdict's order
    best: tuple[SweepBest, ...] = ()  # a sweep's, per load level
    cell: str | None = None  # of a card that stands for one cell of a sweep (`answers`)
    starts: int | None = None  # what it cost (`Record.cost`): server starts,
    server_minutes: float | None = None  # the time its servers were up,
    accelerator_minutes: float | None = None  # and that times their accelerators
    positions: Positions = ()  # each speculating arm's acceptance by draft position

    @property
    def when(self) -> date:
        """The date the index shows and sorts by: when it was concluded, else created."""
        return self.concluded or self.created

    @property
    def classes(self) -> tuple[tuple[str, str], ...]:
        """(class, outcome) pairs: disagreement between classes stays visible."""
        return tuple((r.cls, r.outcome) for r in self.results)

    @property
    def effects(self) -> tuple[float, ...]:
        return tuple(r.effect for r in self.results)

    def answers(self) -> tuple[Card, ...]:
        """The card as the questions it answers see it: itself, or for a sweep a card per cell,
        with the cell's question, results and outcome, named by `cell` (`k3 at concurrency
        8`)."""
        if not self.cells:
            return (self,)
        return tuple(
            replace(
                self,
                outcome=cell.outcome,
                results=cell.results,
                variant=cell.variant,
                acceptance=None,
                question=cell.question,
                question_label=cell.question_label,
                question_facets=cell.question_facets,
                cells=(),
                best=(),
                cell=cell.where,
            )
            for cell in self.cells
        )

    @classmethod
    def of(cls, record: Record) -> Card:
        verdict, config = record.verdict, record.config
        question = questions.question_of(record)
        arms = questions.arms(record)
        return cls(
            record.id,
            record.title,
            record.status,
            record.created,
            record.concluded,
            tuple(record.tags),
            verdict.outcome if verdict else None,
            tuple(record.resolves),
            tuple(record.supersedes),
            tuple(
                ClassResult(
                    c,
                    str(v.outcome),
                    v.effect,
                    None if v.ci_low is None or v.ci_high is None else (v.ci_low, v.ci_high),
                )
                for c, v in verdict.per_class.items()
            )
            if verdict
            else (),
            record.hypothesis.primary_metric if record.hypothesis else None,
            record.hypothesis.statement if record.hypothesis else None,
            verdict.variant if verdict else None,
            _acceptance(record),
            record.decision,
            record.consequences,
            config.engine.version if config else None,
            question[0] if question else None,
            question[1] if question else None,
            question[2] if question else (),
            config.model.name if config else None,
            questions.hardware(config.hardware) if config else None,
            f"{arms[1]} vs {arms[0]}" if arms else None,
            _cells(record),
            tuple(
                SweepBest(load_items(b.load), b.variant, b.probability_best, tuple(b.ties))
                for b in (verdict.best if verdict else ())
            ),
            positions=_positions(record),
            starts=record.cost.starts if record.cost else None,
            server_minutes=record.cost.server_minutes if record.cost else None,
            accelerator_minutes=record.cost.accelerator_minutes if record.cost else None,
        )

    @functools.cached_property
    def digest(self) -> str:
        """Changes whenever anything on the card does (a page that shows it is then stale): of
        its JSON, the same for a card made from a record and one read back from a cache."""
        text = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _CARD_FIELDS}  # `asdict` is ten times slower
        data["results"] = [_result_json(r) for r in self.results]
        data["cells"] = [
            {
                "variant": c.variant,
                "load": c.load,
                "results": [_result_json(r) for r in c.results],
                "question": c.question,
                "question_label": c.question_label,
                "question_facets": c.question_facets,
            }
            for c in self.cells
        ]
        data["best"] = [
            {"load": b.load, "variant": b.variant, "probability": b.probability, "ties": b.ties}
            for b in self.best
        ]
        data["created"] = self.created.isoformat()
        data["concluded"] = self.concluded.isoformat() if self.concluded else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], digest: str | None = None) -> Card:
        """The card `to_json` wrote; `digest`, when given, is the one it had then (a cache
        keeps it, so a card read back is not serialised again to learn it)."""
        card = cls(
            **{
                **data,
                "status": Status(data["status"]),
                "created": date.fromisoformat(data["created"]),
                "concluded": date.fromisoformat(data["concluded"]) if data["concluded"] else None,
                "results": _results_of(data["results"]),
                "cells": tuple(
                    SweepCell(
                        c["variant"],
                        load_items(c["load"]),
                        _results_of(c["results"]),
                        c["question"],
                        c["question_label"],
                        tuple(tuple(pair) for pair in c["question_facets"]),
                    )
                    for c in data["cells"]
                ),
                "best": tuple(
                    SweepBest(
                        load_items(b["load"]), b["variant"], b["probability"], tuple(b["ties"])
                    )
                    for b in data["best"]
                ),
                "acceptance": tuple(data["acceptance"]) if data["acceptance"] else None,
                "positions": tuple(
                    (arm, tuple(tuple(p) if p else None for p in rates))
                    for arm, rates in data["positions"]
                ),
                "question_facets": tuple(tuple(pair) for pair in data["question_facets"]),
                **{k: tuple(data[k]) for k in ("tags", "resolves", "supersedes")},
            }
        )
        if digest is not None:
            card.__dict__["digest"] = digest  # where `functools.cached_property` keeps it
        return card


_CARD_FIELDS = tuple(f.name for f in fields(Card))


def _result_json(result: ClassResult) -> dict[str, Any]:
    return {
        "cls": result.cls,
        "outcome": result.outcome,
        "effect": result.effect,
        "interval": result.interval,
    }


def _results_of(data: list[dict[str, Any]]) -> tuple[ClassResult, ...]:
    return tuple(
        ClassResult(
            r["cls"],
            r["outcome"],
            r["effect"],
            tuple(r["interval"]) if r["interval"] is not None else None,
        )
        for r in data
    )


def load_items(load: Load | list[list[Any]] | LoadItems) -> LoadItems:
    """A load level as (name, value) pairs, by name: hashable, and as JSON reads it back."""
    pairs = load.items() if isinstance(load, dict) else load
    return tuple(sorted((str(name), _value(value)) for name, value in pairs))


def _value(value: Any) -> int | float | str:
    """A load's value as a key holds it: a count, a rate, or `inf`."""
    return value if isinstance(value, int | float | str) else str(value)


def _cells(record: Record) -> tuple[SweepCell, ...]:
    """A sweep's cells, a comparison per variant and load level in the verdict's order, each
    with the question it asks; none for an A/B record."""
    verdict = record.verdict
    if verdict is None or not verdict.cells:
        return ()
    grouped: dict[tuple[str, LoadItems], tuple[Load, list[ClassResult]]] = {}
    for cell in verdict.cells:
        _, results = grouped.setdefault((cell.variant, load_items(cell.load)), (cell.load, []))
        if cell.effect is not None:
            low, high = cell.ci_low, cell.ci_high
            interval = None if low is None or high is None else (low, high)
            results.append(ClassResult(cell.prompt_class, str(cell.outcome), cell.effect, interval))
    out = []
    for (variant, items), (load, results) in grouped.items():
        asked = questions.question_of(record, variant, load)
        out.append(
            SweepCell(
                variant,
                items,
                tuple(results),
                asked[0] if asked else None,
                asked[1] if asked else None,
                asked[2] if asked else (),
            )
        )
    return tuple(out)


def _acceptance(record: Record) -> tuple[float, float] | None:
    """The judged variant's draft acceptance rate, as (low, high): equal for one number."""
    if record.verdict is None or (stats := record.spec_decode.get(record.verdict.variant)) is None:
        return None
    return _bounds(stats.acceptance_rate)


def _positions(record: Record) -> Positions:
    """Each arm's acceptance by draft position, as (low, high) each, in the record's order."""
    return tuple(
        (arm, tuple(_bounds(rate) for rate in stats.per_position_acceptance))
        for arm, stats in record.spec_decode.items()
        if stats.per_position_acceptance
    )


def _bounds(rate: Figure | None) -> tuple[float, float] | None:
    """A figure as (low, high): equal for one number."""
    if rate is None:
        return None
    return (rate.low, rate.high) if isinstance(rate, Range) else (rate, rate)


@dataclass(frozen=True)
class TaskState:
    """A plan task as the records say it stands."""

    done: bool
    record: Card | None = None  # the concluded record that resolves it: the newest
    superseded_by: Card | None = None  # when that record's evidence was replaced
    # the other concluded records that resolve it, newest first, at most MAX_LISTED
    others: tuple[Card, ...] = ()
    more: int = 0  # those not listed


def task_states(cards: Iterable[Card], plan: Plan) -> dict[str, TaskState]:
    """Which tasks of `plan` concluded records resolve (the newest ticks it; the others stand
    beside it), and which of those were superseded."""
    cards = sorted(cards, key=lambda c: (c.created, c.id))
    superseders = {old: card for card in cards for old in card.supersedes}
    standing: dict[str, list[Card]] = {task.id: [] for task in plan.tasks}  # oldest first
    lapsed: dict[str, TaskState] = {}  # the newest superseded record, where none stands
    for card in cards:
        for ref in dict.fromkeys(card.resolves):  # a task named twice: once
            plan_id, task_id = ref.split("#", 1)
            if plan_id != plan.id or task_id not in standing:
                continue
            replaced = superseders.get(card.id)
            if card.status == Status.SUPERSEDED or replaced is not None:
                lapsed[task_id] = TaskState(False, card, replaced or card)
            elif card.status == Status.CONCLUDED:
                standing[task_id].append(card)
    states = {}
    for task_id, found in standing.items():
        if not found:
            states[task_id] = lapsed.get(task_id, TaskState(False))
            continue
        others = found[-2::-1][:MAX_LISTED]
        states[task_id] = TaskState(
            True, found[-1], None, tuple(others), len(found) - 1 - len(others)
        )
    return states
