"""Which records answer the same question: replications, contradictions and stale evidence.

Pure functions over records' cards (`kb.loading.Card`), used by the pages, `kbgen check`,
`kbgen diff` and `kbgen list --stale`.

**The rule.** Two records test the same question on a comparable setup when they agree on
everything that could change the answer (`question_of` builds the key from it):

- the hypothesis: its primary metric, direction and minimum effect;
- the engine's name (not its version: an older version is *stale* evidence, below);
- the model: name and quantization;
- the hardware: CPU, CPU count, accelerator, count and interconnect (not the host's name);
- the server arguments common to both arms, and the settings (arguments and speculative
  configuration) of the baseline and of the variant judged against it — not the arms' names;
- the workload's prompt suite, concurrency, output length, temperature, API and whether EOS
  was ignored (not the seeds, warm-up, repeats or rounds: those are how carefully it was
  measured, not what was asked).

A record without a configuration, or with more than one variant and no verdict to say which
is judged, answers no question here. The experiment's id (the spec's file name) is not part
of the rule: a spec edited between two runs asks a different question under the same name.

**Replications** are the other records of a record's question. Among those that are concluded
and not superseded, a **contradiction** is a decisive disagreement in a prompt class both
decided (or overall, when neither has classes): one supported and the other refuted, or the
two effect intervals not overlapping. A superseded record's disagreement was settled by the
record that replaced it. A record is **stale** when a comparable record, not superseded, was
measured on a newer engine version.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from kbgen.kb.models import Record, Status

if TYPE_CHECKING:
    from kbgen.kb.loading import Card

MAX_LISTED = 20  # replications listed on a record's page; the rest are counted


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

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "records": [self.older.id, self.newer.id],
            "class": self.cls,
            "why": self.why,
        }


@dataclass(frozen=True)
class Stale:
    """A record measured on an older engine version than a comparable record."""

    card: Card
    newest: Card  # the comparable record on the newest version


@dataclass(frozen=True)
class Related:
    """What a record's page shows of its question: small and picklable, so that a render worker
    can be given it; `key` tells when a page made with it is out of date."""

    label: str
    others: tuple[Card, ...] = ()  # its replications, newest first, at most MAX_LISTED
    more: int = 0  # replications not listed
    contradictions: tuple[Contradiction, ...] = ()
    stale: Stale | None = None

    @functools.cached_property
    def key(self) -> str:
        data = json.dumps(
            [
                self.label,
                [c.to_json() for c in self.others],
                self.more,
                [c.to_json() for c in self.contradictions],
                None if self.stale is None else self.stale.newest.to_json(),
            ],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(data.encode()).hexdigest()


NOTHING = Related("")


@dataclass(frozen=True)
class Evidence:
    """The knowledge base's records grouped by question."""

    questions: dict[str, Question]
    contradictions: tuple[Contradiction, ...] = ()
    stale: dict[str, Stale] = field(default_factory=dict)  # by record id

    def question_of(self, record_id: str) -> Question | None:
        for question in self.questions.values():
            if any(card.id == record_id for card in question.cards):
                return question
        return None

    def related(self, record_id: str) -> Related:
        """What `record_id`'s page shows: its replications, contradictions, staleness."""
        return self._by_record.get(record_id, NOTHING)

    @functools.cached_property
    def _by_record(self) -> dict[str, Related]:
        by_record = {}
        for question in self.questions.values():
            if len(question.cards) < 2:
                continue
            newest_first = tuple(reversed(question.cards))
            for card in question.cards:
                others = tuple(c for c in newest_first if c.id != card.id)
                by_record[card.id] = Related(
                    question.label,
                    others[:MAX_LISTED],
                    max(0, len(others) - MAX_LISTED),
                    tuple(c for c in self.contradictions if card.id in (c.older.id, c.newer.id)),
                    self.stale.get(card.id),
                )
        return by_record

    def contradicted(self, record_id: str) -> bool:
        return any(record_id in (c.older.id, c.newer.id) for c in self.contradictions)


def evidence(cards: Iterable[Card]) -> Evidence:
    """The cards grouped by question, with the contradictions and stale records among them."""
    cards = sorted(cards, key=lambda c: (c.created, c.id))
    replaced = {old for card in cards for old in card.supersedes}
    grouped: dict[str, list[Card]] = {}
    for card in cards:
        if card.question:
            grouped.setdefault(card.question, []).append(card)
    questions = {
        key: Question(key, members[-1].question_label or key, tuple(members))
        for key, members in sorted(grouped.items())
    }
    found: list[Contradiction] = []
    stale: dict[str, Stale] = {}
    for question in questions.values():
        current = [c for c in question.cards if _current(c, replaced)]
        for i, older in enumerate(current):
            for newer in current[i + 1 :]:
                found += _disagreements(question.key, older, newer)
        stale.update(_stale(current))
    return Evidence(questions, tuple(found), stale)


def _current(card: Card, replaced: set[str]) -> bool:
    """Concluded, and neither marked superseded nor replaced by a record that supersedes it."""
    return card.status == Status.CONCLUDED and card.id not in replaced


def _disagreements(question: str, older: Card, newer: Card) -> list[Contradiction]:
    if not older.results and not newer.results:  # an overall verdict only, on both
        if {older.outcome, newer.outcome} == {"supported", "refuted"}:
            return [
                Contradiction(question, older, newer, "", f"{older.outcome} vs {newer.outcome}")
            ]
        return []
    mine = {r.cls: r for r in older.results}
    found = []
    for theirs in newer.results:
        ours = mine.get(theirs.cls)
        if ours is None:
            continue
        outcomes = {ours.outcome, theirs.outcome}
        if outcomes == {"supported", "refuted"}:
            why = f"{ours.outcome} vs {theirs.outcome}"
        elif _apart(ours.interval, theirs.interval):
            why = f"intervals {_span(ours.interval)} and {_span(theirs.interval)} do not overlap"
        else:
            continue
        found.append(Contradiction(question, older, newer, theirs.cls, why))
    return found


def _apart(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and (a[1] < b[0] or b[1] < a[0])


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


def question_of(record: Record) -> tuple[str, str] | None:
    """The key and a readable label of the question `record` answers; None when it has none
    (the rule is in this module's docstring)."""
    config, workload, hypothesis = record.config, record.workload, record.hypothesis
    if config is None or hypothesis is None:
        return None
    variant = record.verdict.variant if record.verdict else None
    if variant is None:
        others = [name for name in config.variants if name != config.baseline]
        if len(others) != 1:
            return None
        variant = others[0]
    if variant not in config.variants or config.baseline not in config.variants:
        return None
    arms = [config.variants[config.baseline], config.variants[variant]]
    asked = {
        "hypothesis": hypothesis.model_dump(
            mode="json", include={"primary_metric", "direction", "minimum_effect"}
        ),
        "engine": config.engine.name,
        "model": config.model.model_dump(mode="json", include={"name", "quantization"}),
        "hardware": config.hardware.model_dump(mode="json", exclude={"host"}),
        "server_args": config.server_args,
        "arms": [arm.model_dump(mode="json", exclude_none=True) for arm in arms],
        "workload": None
        if workload is None
        else workload.model_dump(
            mode="json",
            include={
                "prompt_suite",
                "concurrency",
                "max_tokens",
                "temperature",
                "api",
                "ignore_eos",
            },
        ),
    }
    key = hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]
    return key, _label(record, variant)


def _label(record: Record, variant: str) -> str:
    """`ngram vs baseline · smollm2-135m-instruct · 2 × Intel Xeon · vllm · concurrency 1`."""
    assert record.config is not None
    config = record.config
    hw = config.hardware
    if hw.accelerator:
        hardware = f"{hw.count} × {hw.accelerator}" if hw.count else hw.accelerator
    elif hw.cpu:
        hardware = f"{hw.cpu_count} × {hw.cpu}" if hw.cpu_count else hw.cpu
    else:
        hardware = "unstated hardware"
    parts = [f"{variant} vs {config.baseline}", config.model.name, hardware, config.engine.name]
    if record.workload and record.workload.concurrency:
        parts.append(f"concurrency {record.workload.concurrency}")
    return " · ".join(parts)
