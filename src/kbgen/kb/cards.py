"""A record as pages, indexes and the replication rules need it (`Card`), and plan tasks' states.

A task stands as the records that resolve it say (`task_states`)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import date
from typing import Any

from kbgen.kb import questions
from kbgen.kb.models import Plan, Range, Record, Status


@dataclass(frozen=True)
class ClassResult:
    """One prompt class's verdict on a card: its outcome and the primary metric's relative
    change, with its 95% interval when there is one."""

    cls: str
    outcome: str
    effect: float
    interval: tuple[float, float] | None = None


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
        )

    @functools.cached_property
    def digest(self) -> str:
        """Changes whenever anything on the card does (a page that shows it is then stale): of
        its JSON, the same for a card made from a record and one read back from a cache."""
        text = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _CARD_FIELDS}  # `asdict` is ten times slower
        data["results"] = [
            {"cls": r.cls, "outcome": r.outcome, "effect": r.effect, "interval": r.interval}
            for r in self.results
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
                "results": tuple(
                    ClassResult(
                        r["cls"],
                        r["outcome"],
                        r["effect"],
                        tuple(r["interval"]) if r["interval"] is not None else None,
                    )
                    for r in data["results"]
                ),
                "acceptance": tuple(data["acceptance"]) if data["acceptance"] else None,
                "question_facets": tuple(tuple(pair) for pair in data["question_facets"]),
                **{k: tuple(data[k]) for k in ("tags", "resolves", "supersedes")},
            }
        )
        if digest is not None:
            card.__dict__["digest"] = digest  # where `functools.cached_property` keeps it
        return card


_CARD_FIELDS = tuple(f.name for f in fields(Card))


def _acceptance(record: Record) -> tuple[float, float] | None:
    """The judged variant's draft acceptance rate, as (low, high): equal for one number."""
    if record.verdict is None or (stats := record.spec_decode.get(record.verdict.variant)) is None:
        return None
    rate = stats.acceptance_rate
    if rate is None:
        return None
    return (rate.low, rate.high) if isinstance(rate, Range) else (rate, rate)


@dataclass(frozen=True)
class TaskState:
    """A plan task as the records say it stands."""

    done: bool
    record: Card | None = None  # the concluded record that resolves it
    superseded_by: Card | None = None  # when that record's evidence was replaced


def task_states(cards: Iterable[Card], plan: Plan) -> dict[str, TaskState]:
    """Which tasks of `plan` concluded records resolve, and which of those were superseded."""
    cards = sorted(cards, key=lambda c: (c.created, c.id))
    superseders = {old: card for card in cards for old in card.supersedes}
    states = {task.id: TaskState(False) for task in plan.tasks}
    for card in cards:
        for ref in card.resolves:
            plan_id, task_id = ref.split("#", 1)
            if plan_id != plan.id or task_id not in states:
                continue
            replaced = superseders.get(card.id)
            if card.status == Status.SUPERSEDED or replaced is not None:
                if not states[task_id].done:
                    states[task_id] = TaskState(False, card, replaced or card)
            elif card.status == Status.CONCLUDED:
                states[task_id] = TaskState(True, card)
    return states
