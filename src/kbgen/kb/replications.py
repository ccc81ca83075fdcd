"""Which records answer the same question: replications, contradictions and stale evidence.

Pure functions over records' cards (`kb.cards.Card`), used by the pages, `kbgen check`,
`kbgen diff` and `kbgen list --stale`; the question is `kb.questions`' (docs/design.md,
"Questions, replications, contradictions"). A sweep is seen as its cells (`Card.answers`), each
a comparison of its own question, beside A/B records and other sweeps' cells.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from kbgen.kb import questions
from kbgen.kb.cards import MAX_LISTED
from kbgen.kb.models import Status

if TYPE_CHECKING:
    from kbgen.kb.cards import Card, ClassResult


@dataclass(frozen=True)
class Question:
    """A question and the records that answer it, oldest first."""

    key: str
    label: str
    cards: tuple[Card, ...]


@dataclass(frozen=True)
class Contradiction:
    """Two records of one question that disagree decisively in one class (`""`: overall)."""

    question: str
    older: Card
    newer: Card
    cls: str
    why: str  # e.g. "supported vs refuted", "intervals +3.1% … +7.0% and −9.0% … −2.0%"

    def other(self, record_id: str) -> Card:
        return self.newer if self.older.id == record_id else self.older

    def own(self, record_id: str) -> Card:
        """`record_id`'s side: its card, or its sweep's cell (`cell` says which)."""
        return self.older if self.older.id == record_id else self.newer

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "question": self.question,
            "records": [self.older.id, self.newer.id],
            "class": self.cls,
            "why": self.why,
        }
        if self.older.cell or self.newer.cell:
            data["cells"] = [self.older.cell, self.newer.cell]
        return data


@dataclass(frozen=True)
class Stale:
    """A record measured on an older engine version than a comparable record."""

    card: Card
    newest: Card  # the comparable record on the newest version

    def said(self) -> str:
        """`measured on 0.32.0; NEWEST measured the same setup on 0.33.0`."""
        return (
            f"measured on {self.card.engine_version}; {self.newest.id} measured the same setup "
            f"on {self.newest.engine_version}"
        )


@dataclass(frozen=True)
class Related:
    """What a record's page shows of its question: small and picklable, so that a render worker
    can be given it; `key` tells when a page made with it is out of date."""

    label: str
    others: tuple[Card, ...] = ()  # its replications, newest first, at most MAX_LISTED
    more: int = 0  # replications not listed
    contradictions: tuple[Contradiction, ...] = ()
    stale: Stale | None = None
    superseded_by: tuple[Card, ...] = ()  # the records that list it under `supersedes`
    # a sweep's: for each of `others`, its own cell that asks the other's question
    matched: tuple[str, ...] = ()

    @functools.cached_property
    def key(self) -> str:
        parts = [
            str(len(self.superseded_by)),
            *[c.digest for c in self.superseded_by],
            self.label,
            str(len(self.others)),
            *[c.digest for c in self.others],
            str(len(self.matched)),
            *self.matched,
            str(self.more),
            str(len(self.contradictions)),
            *[f"{c.older.digest} {c.newer.digest} {c.cls} {c.why}" for c in self.contradictions],
            "" if self.stale is None else self.stale.newest.digest,
        ]
        digest = hashlib.sha256()
        for part in parts:  # each length-prefixed, each list counted: no two hash alike
            digest.update(f"{len(part)}:{part}".encode())
        return digest.hexdigest()


NOTHING = Related("")


@dataclass(frozen=True)
class Evidence:
    """The knowledge base's records grouped by question."""

    questions: dict[str, Question]
    contradictions: tuple[Contradiction, ...] = ()
    stale: dict[str, Stale] = field(default_factory=dict)  # by record id
    superseders: dict[str, tuple[Card, ...]] = field(default_factory=dict)  # by superseded id

    def related(self, record_id: str) -> Related:
        """What `record_id`'s page shows: its replications, contradictions, staleness."""
        return self._by_record.get(record_id, NOTHING)

    @functools.cached_property
    def _involving(self) -> dict[str, list[Contradiction]]:
        involving: dict[str, list[Contradiction]] = {}
        for c in self.contradictions:
            involving.setdefault(c.older.id, []).append(c)
            involving.setdefault(c.newer.id, []).append(c)
        return involving

    @functools.cached_property
    def _by_record(self) -> dict[str, Related]:
        by_record = {}
        swept: dict[str, list[tuple[Question, tuple[Card, ...], Card]]] = {}  # by record id
        for question in self.questions.values():
            if len(question.cards) < 2 and question.cards[0].id not in self.superseders:
                continue
            newest = tuple(reversed(question.cards))[: MAX_LISTED + 1]  # enough for any of them
            for card in question.cards:
                if card.cell is not None:  # a sweep's cell: the sweep's page shows all of them
                    swept.setdefault(card.id, []).append((question, newest, card))
                    continue
                others = tuple(c for c in newest if c.id != card.id)[:MAX_LISTED]
                by_record[card.id] = Related(
                    question.label,
                    others,
                    len(question.cards) - 1 - len(others),
                    tuple(self._involving.get(card.id, ())),
                    self.stale.get(card.id),
                    self.superseders.get(card.id, ()),
                )
        for record_id, asked in swept.items():
            by_record[record_id] = self._of_sweep(record_id, asked)
        for old, newer in self.superseders.items():  # one that answers no question
            by_record.setdefault(old, Related("", superseded_by=newer))
        return by_record

    def _of_sweep(
        self, record_id: str, asked: list[tuple[Question, tuple[Card, ...], Card]]
    ) -> Related:
        """A sweep's page: the replications of all its cells, newest first, each with the cell
        of its own that asks the other's question; the label where only one cell has any."""
        found = sorted(
            (
                (other, own.cell or "")
                for _, newest, own in asked
                for other in newest
                if other.id != record_id
            ),
            key=lambda pair: (pair[0].created, pair[0].id, pair[0].cell or "", pair[1]),
            reverse=True,
        )[:MAX_LISTED]
        shared = [question for question, _, _ in asked if len(question.cards) > 1]
        return Related(
            shared[0].label if len(shared) == 1 else "",
            tuple(other for other, _ in found),
            sum(len(question.cards) - 1 for question in shared) - len(found),
            tuple(self._involving.get(record_id, ())),
            self.stale.get(record_id),
            self.superseders.get(record_id, ()),
            tuple(own for _, own in found),
        )


def evidence(cards: Iterable[Card]) -> Evidence:
    """The cards grouped by question, with the contradictions and stale records among them."""
    cards = sorted(cards, key=lambda c: (c.created, c.id))
    standing = {card.id for card in current(cards)}
    grouped: dict[str, dict[str, Card]] = {}  # question -> record id -> the card it answers with
    for card in cards:
        for answer in card.answers():
            if answer.question:  # a sweep whose two cells ask one question: the first
                grouped.setdefault(answer.question, {}).setdefault(answer.id, answer)
    labels = _labels({key: next(reversed(members.values())) for key, members in grouped.items()})
    questions = {
        key: Question(key, labels[key], tuple(members.values()))
        for key, members in sorted(grouped.items())
    }
    found: list[Contradiction] = []
    stale: dict[str, Stale] = {}
    for question in questions.values():
        now = [c for c in question.cards if c.id in standing]
        found += _contradictions(question.key, now)
        stale.update(_stale(now))
    superseders: dict[str, list[Card]] = {}
    for card in cards:  # oldest first
        for old in card.supersedes:
            superseders.setdefault(old, []).append(card)
    return Evidence(
        questions, tuple(found), stale, {old: tuple(new) for old, new in superseders.items()}
    )


def _labels(newest: dict[str, Card]) -> dict[str, str]:
    """Each question's label; where two share one, what sets them apart added in words
    (`questions.tell_apart`: `… · with --no-async-scheduling`, `… · max_tokens 512`)."""
    by_label: dict[str, list[str]] = {}
    for key, card in newest.items():
        by_label.setdefault(card.question_label or key, []).append(key)
    labels = {}
    for label, keys in by_label.items():
        if len(keys) == 1:
            labels[keys[0]] = label
            continue
        said = questions.tell_apart(
            {key: newest[key].question_facets for key in keys},
            {key: newest[key].id for key in keys},
        )
        labels.update((key, f"{label} · {said[key]}") for key in keys)
    return labels


def _contradictions(question: str, current: list[Card]) -> list[Contradiction]:
    """Every decisive disagreement among `current` (oldest first), found without comparing
    every pair: a question re-measured every night for years is thousands of records."""
    order = {card.id: i for i, card in enumerate(current)}
    by_class: dict[str, list[tuple[Card, ClassResult | None]]] = {}
    for card in current:
        for result in card.results:
            by_class.setdefault(result.cls, []).append((card, result))
        if not card.results and card.outcome:  # an overall verdict only
            by_class.setdefault("", []).append((card, None))
    found: dict[tuple[int, int, str], Contradiction] = {}

    def add(one: Card, other: Card, cls: str, why: Callable[[Card, Card], str]) -> None:
        a, b = sorted((one, other), key=lambda c: order[c.id])
        key = (order[a.id], order[b.id], cls)
        if key not in found:  # an outcome's disagreement is named before the intervals'
            found[key] = Contradiction(question, a, b, cls, why(a, b))

    for cls, entries in by_class.items():
        outcome = {card.id: (r.outcome if r else card.outcome) for card, r in entries}
        spans = {card.id: r.interval for card, r in entries if r is not None and r.interval}
        said = functools.partial(_said, outcome)
        apart = functools.partial(_apart, spans)
        supported = [card for card, _ in entries if outcome[card.id] == "supported"]
        refuted = [card for card, _ in entries if outcome[card.id] == "refuted"]
        for one in supported:
            for other in refuted:
                add(one, other, cls, said)
        by_low = sorted((spans[c.id][0], order[c.id], c) for c, _ in entries if c.id in spans)
        lows = [low for low, _, _ in by_low]
        for _, _, one in by_low:  # every record whose interval starts above where one's ends
            for _, _, other in by_low[bisect.bisect_right(lows, spans[one.id][1]) :]:
                add(one, other, cls, apart)
    position = {(card.id, r.cls): i for card in current for i, r in enumerate(card.results)}
    return [
        found[key]
        for key in sorted(
            found, key=lambda k: (k[0], k[1], position.get((current[k[1]].id, k[2]), 0))
        )
    ]


def current(cards: Iterable[Card]) -> list[Card]:
    """The records whose evidence stands: concluded, and neither marked superseded nor
    replaced by a record that supersedes them; in the order given."""
    cards = list(cards)
    replaced = {old for card in cards for old in card.supersedes}
    return [c for c in cards if c.status == Status.CONCLUDED and c.id not in replaced]


def _said(outcome: dict[str, str | None], older: Card, newer: Card) -> str:
    return f"{outcome[older.id]} vs {outcome[newer.id]}"


def _apart(spans: dict[str, tuple[float, float]], older: Card, newer: Card) -> str:
    return f"intervals {_span(spans[older.id])} and {_span(spans[newer.id])} do not overlap"


def _span(interval: tuple[float, float] | None) -> str:
    assert interval is not None
    return f"{interval[0]:+.1%} … {interval[1]:+.1%}"


def _stale(current: list[Card]) -> dict[str, Stale]:
    versioned = [(v, c) for c in current if (v := _version(c.engine_version)) is not None]
    if not versioned:
        return {}
    newest_version, newest = max(versioned, key=lambda vc: (vc[0], vc[1].created, vc[1].id))
    return {c.id: Stale(c, newest) for v, c in versioned if v < newest_version}


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:  # not a version vLLM (PEP 440) writes: not compared
        return None
